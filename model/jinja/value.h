// The values a template computes with, modelled on the Python objects jinja2 hands a template:
// undefined (jinja2's default Undefined), None, bool, int, float, str (with markupsafe's Markup
// flag: `|safe` strings escape what `+` joins to them), list / tuple / one-pass iterator (what
// filters like select and map return), dict in insertion order (Python's), objects with attributes
// (namespace(), the loop variable) and callables (macros, globals, bound methods).
// Lists and dicts are immutable once built, as ImmutableSandboxedEnvironment keeps them; only a
// namespace changes, through `{% set ns.attr = ... %}`.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace retain::jinja {

class Value;

// Bounds where Python would run out of memory or recursion depth: texts and lists past them, and
// containers nested deeper, are refused rather than exhausting the process.
constexpr size_t kMaxTextBytes = size_t{1} << 26;
constexpr int kMaxNesting = 500;

// What went wrong while rendering, in jinja2's words ("'x' is undefined", "can only concatenate
// str (not "int") to str"); the renderer adds the template's name and the line of the construct.
class RenderError : public std::runtime_error {
 public:
  explicit RenderError(const std::string& message, bool raised = false)
      : std::runtime_error(message), raised_by_template(raised) {}
  int line = 0;
  bool raised_by_template;  // raise_exception(...) called by the template itself
};

// A construct outside the subset this engine implements, met while rendering (a Python method or
// filter argument it does not know): never rendered as something else.
class UnsupportedError : public RenderError {
 public:
  explicit UnsupportedError(const std::string& what)
      : RenderError(what + " is outside the Jinja subset retain supports") {}
};

class Dict;
struct ListData;
struct Object;
struct Callable;
struct CallArgs;

enum class Kind {
  kUndefined,
  kNone,
  kBool,
  kInt,
  kFloat,
  kString,
  kList,
  kDict,
  kObject,
  kCallable
};
// A list, a tuple, or a one-pass iterator (a generator: no len(), always true, empty once read).
enum class SeqKind { kList, kTuple, kIterator };

class Value {
 public:
  Value() : kind_(Kind::kUndefined) {}             // undefined, no name
  Value(bool b) : kind_(Kind::kBool), b_(b) {}     // NOLINT(google-explicit-constructor)
  Value(int i) : kind_(Kind::kInt), i_(i) {}       // NOLINT(google-explicit-constructor)
  Value(int64_t i) : kind_(Kind::kInt), i_(i) {}   // NOLINT(google-explicit-constructor)
  Value(double f) : kind_(Kind::kFloat), f_(f) {}  // NOLINT(google-explicit-constructor)
  Value(std::string s, bool safe = false);         // NOLINT(google-explicit-constructor)
  Value(const char* s) : Value(std::string(s)) {}  // NOLINT(google-explicit-constructor)

  // `name` is what the template called it; `hint` replaces the "is undefined" message (the sandbox
  // refusing an attribute, an if-expression without else).
  static Value undefined(const std::string& name, const std::string& hint = "");
  // The undefined an attribute or item lookup on `owner` gives: "'dict object' has no attribute".
  static Value missing(const Value& owner, const Value& key, bool attribute);
  static Value none();
  static Value list(std::vector<Value> items, SeqKind kind = SeqKind::kList);
  static Value dict_view(std::vector<Value> items, const std::string& view);
  static Value range(int64_t start, int64_t stop, int64_t step);
  static Value dict(Dict d);
  static Value object(std::shared_ptr<Object> o);
  static Value callable(std::string name, std::function<Value(CallArgs&)> fn,
                        bool is_macro = false);
  // JSON as Python's json.loads gives it: objects keep their key order.
  static Value from_json(const nlohmann::ordered_json& j);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::kUndefined; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_number() const {
    return kind_ == Kind::kInt || kind_ == Kind::kFloat || kind_ == Kind::kBool;
  }
  bool is_sequence() const { return kind_ == Kind::kList; }
  bool is_namespace() const;

  bool as_bool() const { return b_; }
  int64_t as_int() const { return kind_ == Kind::kBool ? (b_ ? 1 : 0) : i_; }
  double as_float() const { return kind_ == Kind::kFloat ? f_ : static_cast<double>(as_int()); }
  const std::string& str() const;
  bool safe() const { return safe_; }  // a markupsafe.Markup string
  const std::vector<Value>& items() const;
  SeqKind seq_kind() const;
  const ListData& list_data() const;
  const Dict& dict() const;
  Object& object() const;
  std::shared_ptr<Object> object_ptr() const;
  const Callable& callable() const;
  const std::string& undefined_name() const;
  // The message jinja2's UndefinedError carries for this undefined.
  std::string undefined_message() const;
  [[noreturn]] void fail_undefined() const;
  // Same object (the `sameas` test, Python's `is`).
  bool same_as(const Value& other) const;

  int depth() const;  // how deeply containers nest in it (0 for scalars)

  bool truthy() const;             // Python bool()
  std::string to_str() const;      // Python str(): what {{ x }} prints
  std::string repr() const;        // Python repr(): how lists and dicts print their items
  std::string type_name() const;   // Python's type name: 'str', 'int', 'NoneType', ...
  std::string owner_name() const;  // jinja2's object_type_repr: 'dict object', 'None'

 private:
  static Value from_json(const nlohmann::ordered_json& j, int depth);

  Kind kind_;
  bool safe_ = false;
  bool b_ = false;
  int64_t i_ = 0;
  double f_ = 0;
  std::variant<std::monostate, std::shared_ptr<const std::string>, std::shared_ptr<ListData>,
               std::shared_ptr<const Dict>, std::shared_ptr<Object>,
               std::shared_ptr<const Callable>>
      ptr_;
  // Undefined: its name and message hint.
  std::shared_ptr<const std::pair<std::string, std::string>> undefined_;
};

struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keywords;
};

// A Python dict: insertion order, keys compared as Python compares them (1, 1.0 and True are one
// key). Keys must be hashable (not lists or dicts); callers check with check_hashable.
class Dict {
 public:
  const Value* find(const Value& key) const;
  const Value* find(const std::string& key) const;
  void set(Value key, Value value);  // replaces in place, else appends
  const std::vector<std::pair<Value, Value>>& entries() const { return entries_; }
  size_t size() const { return entries_.size(); }
  int depth() const { return depth_; }  // 1 + the deepest key or value

 private:
  std::vector<std::pair<Value, Value>> entries_;
  int depth_ = 1;
};

struct ListData {
  std::vector<Value> items;
  SeqKind kind = SeqKind::kList;
  mutable bool consumed = false;  // an iterator that has been read
  // Python objects that iterate like a list but are not one: "dict_items", "dict_keys",
  // "dict_values", "range" (with its arguments, for its repr). They print, compare and serialise
  // as those types do.
  std::string view;
  int64_t range_args[3] = {0, 0, 1};
  int depth = 1;  // 1 + the deepest item
};

// namespace() objects and the loop variable: attributes, no items.
struct Object {
  std::string type_name;  // "Namespace", "LoopContext"
  Dict attrs;
  bool is_namespace = false;
};

struct Callable {
  std::string name;  // for messages: "macro 'render'", "str.strip"
  std::function<Value(CallArgs&)> call;
  bool is_macro = false;
};

// Whether Python could use the value as a dict key; raises TypeError("unhashable type") when not.
void check_hashable(const Value& v);
// Python's ==, and op ("<", "<=", ">", ">=") raising TypeError for unorderable types.
bool py_equal(const Value& a, const Value& b);
bool py_compare(const std::string& op, const Value& a, const Value& b);
bool py_less(const Value& a, const Value& b);
// Python iter() / len(); iterating an iterator consumes it.
std::vector<Value> py_iterate(const Value& v);
int64_t py_len(const Value& v);
// The `in` operator: `needle in haystack`.
bool py_contains(const Value& haystack, const Value& needle);

// Binds a call's arguments to a Python-like signature (positional, then by keyword), raising
// TypeError as Python does for too many, unknown or repeated arguments.
class ArgBinder {
 public:
  ArgBinder(const std::string& what, const CallArgs& args, std::vector<std::string> params);
  bool has(size_t i) const { return given_[i]; }
  const Value& get(size_t i) const { return values_[i]; }  // undefined when not given
  Value get_or(size_t i, Value fallback) const { return given_[i] ? values_[i] : fallback; }

 private:
  std::vector<Value> values_;
  std::vector<bool> given_;
};

// json.dumps(value, ensure_ascii, indent, separators, sort_keys); indent < 0: None, and a string
// indent when indent_text is set.
struct JsonFormat {
  bool ensure_ascii = false;
  int indent = -1;
  std::optional<std::string> indent_text;
  std::optional<std::pair<std::string, std::string>> separators;
  bool sort_keys = false;
};
std::string to_json(const Value& v, const JsonFormat& format);

}  // namespace retain::jinja
