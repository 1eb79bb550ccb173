// The parsed template: expressions and statements as jinja2's parser builds them (the same node
// kinds, precedence and associativity), each with the line it came from for error messages.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "model/jinja/value.h"

namespace retain::jinja {

enum class ExprKind {
  kLiteral,  // literal
  kName,     // name
  kList,     // args: items
  kTuple,    // args: items
  kDict,     // args: key, value, key, value, ...
  kGetattr,  // object.name
  kGetitem,  // object[args[0]]
  kSlice,    // object[args[0]:args[1]:args[2]], each may be null
  kCall,     // object(args..., keywords...)
  kFilter,   // object|name(args..., keywords...); object null: the body of a filter block
  kTest,     // object is name(args..., keywords...)
  kNot,      // not object
  kNeg,      // -object
  kPos,      // +object
  kBinary,   // args[0] name args[1]: + - * / // % **
  kAnd,      // args[0] and args[1]
  kOr,       // args[0] or args[1]
  kConcat,   // args[0] ~ args[1] ~ ...
  kCompare,  // object ops[0] args[0] ops[1] args[1] ... (chained, "in" / "notin" too)
  kCond,     // args[1] if args[0] else args[2] (args[2] null: undefined)
};

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Keyword {
  std::string name;
  ExprPtr value;
};

struct Expr {
  ExprKind kind;
  int line = 0;
  Value literal;
  std::string name;
  ExprPtr object;
  std::vector<ExprPtr> args;
  std::vector<Keyword> keywords;
  std::vector<std::string> ops;
};

enum class StmtKind {
  kText,         // text
  kOutput,       // {{ expr }}
  kIf,           // branches, else_body
  kFor,          // for target in expr [if test]: body [else: else_body]
  kSet,          // set target = expr
  kSetBlock,     // set target [| filter]: body
  kMacro,        // macro name(params, defaults): body
  kCallBlock,    // call(params) expr: body (the body becomes `caller`)
  kFilterBlock,  // filter: body
  kBreak,
  kContinue,
  kGeneration,  // transformers' {% generation %}: renders its body, in a scope of its own
};

struct Stmt;
using Body = std::vector<std::unique_ptr<Stmt>>;

// What set / for assign to: one name, a tuple of names, or a namespace attribute (ns.attr).
struct Target {
  std::vector<std::string> names;
  bool is_tuple = false;
  std::string ns_attr;  // set: names[0].ns_attr
};

struct Branch {
  ExprPtr test;
  Body body;
};

struct Stmt {
  StmtKind kind;
  int line = 0;
  std::string text;
  ExprPtr expr;
  ExprPtr test;    // for's inline `if`
  ExprPtr filter;  // set block / filter block: a kFilter chain whose innermost object is null
  Target target;
  std::vector<Branch> branches;
  Body body;
  Body else_body;
  // Macros and call blocks.
  std::string name;
  std::vector<std::string> params;
  std::vector<ExprPtr> defaults;  // for the last defaults.size() params
  bool uses_caller = false;
  bool uses_varargs = false;
  bool uses_kwargs = false;
};

}  // namespace retain::jinja
