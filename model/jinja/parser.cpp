#include "model/jinja/parser.h"

#include <algorithm>
#include <functional>
#include <set>

#include "core/error.h"
#include "model/jinja/builtins.h"

namespace retain::jinja {

namespace {

constexpr int kMaxParseDepth = 150;

const char* const kUnsupportedStatements[] = {"block", "extends", "include",   "import",
                                              "from",  "with",    "autoescape"};

class Parser {
 public:
  Parser(const std::vector<Token>& tokens, const std::string& name)
      : tokens_(tokens), name_(name) {}

  Body run() {
    Body body = subparse({});
    if (cur().type != TokenType::kEof) unexpected(cur());
    check_names(body, false);
    return body;
  }

 private:
  // Python's own recursion limit stops jinja2 on absurdly nested input; this stops earlier, before
  // the C++ stack could overflow.
  struct DepthGuard {
    Parser& p;
    explicit DepthGuard(Parser& parser) : p(parser) {
      if (++p.depth_ > kMaxParseDepth)
        p.error(p.cur(), "expressions or blocks nested beyond " + std::to_string(kMaxParseDepth) +
                             " levels");
    }
    ~DepthGuard() { --p.depth_; }
  };

  // ---- token stream ----
  const Token& cur() const { return tokens_[pos_]; }
  const Token& look() const { return tokens_[std::min(pos_ + 1, tokens_.size() - 1)]; }
  const Token& next() {
    const Token& t = tokens_[pos_];
    if (pos_ + 1 < tokens_.size()) ++pos_;
    return t;
  }
  bool is_op(const char* op) const { return cur().type == TokenType::kOp && cur().value == op; }
  bool is_name(const char* n) const { return cur().type == TokenType::kName && cur().value == n; }
  bool skip_op(const char* op) {
    if (!is_op(op)) return false;
    next();
    return true;
  }
  bool skip_name(const char* n) {
    if (!is_name(n)) return false;
    next();
    return true;
  }
  [[noreturn]] void error(const Token& at, const std::string& what) const {
    fail(name_, ":", at.line, ": ", what);
  }
  [[noreturn]] void unexpected(const Token& at) const {
    error(at, "unexpected '" + describe_token(at) + "'");
  }
  [[noreturn]] void expected(const std::string& what) const {
    error(cur(), "expected token '" + what + "', got '" + describe_token(cur()) + "'");
  }
  // jinja2's message for an unknown tag (name) or the end of the template (no name) inside blocks.
  [[noreturn]] void fail_unknown_tag(const Token& at, const std::string* name) const {
    std::string message =
        name ? "Encountered unknown tag '" + *name + "'." : "Unexpected end of template.";
    if (!end_stack_.empty()) {
      bool nesting = false;
      for (const auto& ends : end_stack_)
        nesting |= name && std::find(ends.begin(), ends.end(), *name) != ends.end();
      std::string looking;
      for (const auto& n : end_stack_.back())
        looking += (looking.empty() ? "'" : " or '") + n + "'";
      message += nesting ? " You probably made a nesting mistake. Jinja is expecting this tag, but "
                           "currently looking for " +
                               looking + "."
                         : " Jinja was looking for the following tags: " + looking + ".";
    }
    if (!tag_stack_.empty())
      message += " The innermost block that needs to be closed is '" + tag_stack_.back() + "'.";
    error(at, message);
  }
  [[noreturn]] void outside_subset(const Token& at, const std::string& what) const {
    error(at, what + " is outside the Jinja subset retain supports");
  }
  const Token& expect_op(const char* op) {
    if (!is_op(op)) expected(op);
    return next();
  }
  const Token& expect_name() {
    if (cur().type != TokenType::kName) expected("name");
    return next();
  }
  void expect_block_end() {
    if (cur().type != TokenType::kBlockEnd) expected("end of statement block");
    next();
  }

  static ExprPtr make(ExprKind kind, int line) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->line = line;
    return e;
  }
  static std::unique_ptr<Stmt> make_stmt(StmtKind kind, int line) {
    auto s = std::make_unique<Stmt>();
    s->kind = kind;
    s->line = line;
    return s;
  }

  // ---- statements ----
  // Parses until a block whose first name is in `end` (left unconsumed), or the end of input.
  Body subparse(const std::vector<std::string>& end) {
    if (!end.empty()) end_stack_.push_back(end);
    Body body = subparse_inner(end);
    if (!end.empty()) end_stack_.pop_back();
    return body;
  }

  Body subparse_inner(const std::vector<std::string>& end) {
    Body body;
    while (true) {
      const Token& t = cur();
      if (t.type == TokenType::kEof) {
        if (!end.empty()) fail_unknown_tag(t, nullptr);
        return body;
      }
      if (t.type == TokenType::kData) {
        auto s = make_stmt(StmtKind::kText, t.line);
        s->text = t.value;
        body.push_back(std::move(s));
        next();
      } else if (t.type == TokenType::kVarBegin) {
        next();
        auto s = make_stmt(StmtKind::kOutput, t.line);
        s->expr = parse_tuple(true, false, {});
        if (cur().type != TokenType::kVarEnd) expected("end of print statement");
        next();
        body.push_back(std::move(s));
      } else if (t.type == TokenType::kBlockBegin) {
        next();
        if (cur().type == TokenType::kName &&
            std::find(end.begin(), end.end(), cur().value) != end.end())
          return body;
        body.push_back(parse_statement());
        expect_block_end();
      } else {
        unexpected(t);
      }
    }
  }

  // After a statement's header: `%}`, the body up to one of `end`; the end name is consumed when
  // `drop_needle`.
  Body parse_statements(const std::vector<std::string>& end, bool drop_needle) {
    skip_op(":");
    expect_block_end();
    Body body = subparse(end);
    if (drop_needle) next();
    return body;
  }

  std::unique_ptr<Stmt> parse_statement() {
    DepthGuard guard(*this);
    const Token& t = cur();
    if (t.type != TokenType::kName) error(t, "tag name expected");
    tag_stack_.push_back(t.value);
    std::unique_ptr<Stmt> s;
    const std::string& tag = t.value;
    if (tag == "if") {
      s = parse_if();
    } else if (tag == "for") {
      s = parse_for();
    } else if (tag == "set") {
      s = parse_set();
    } else if (tag == "macro") {
      s = parse_macro();
    } else if (tag == "call") {
      s = parse_call_block();
    } else if (tag == "filter") {
      s = parse_filter_block();
    } else if (tag == "print") {
      s = make_stmt(StmtKind::kOutput, next().line);
      s->expr = parse_tuple(true, false, {});
    } else if (tag == "break" || tag == "continue") {
      if (loop_depth_ == 0) error(t, "'" + tag + "' outside loop");
      s = make_stmt(tag == "break" ? StmtKind::kBreak : StmtKind::kContinue, next().line);
    } else if (tag == "generation") {
      s = make_stmt(StmtKind::kGeneration, next().line);
      int saved = loop_depth_;
      loop_depth_ = 0;  // the body is a separate function in jinja2: no break out of it
      s->body = parse_statements({"endgeneration"}, true);
      loop_depth_ = saved;
    } else {
      for (const char* u : kUnsupportedStatements)
        if (tag == u) outside_subset(t, "the '" + tag + "' statement");
      tag_stack_.pop_back();
      fail_unknown_tag(t, &t.value);
    }
    tag_stack_.pop_back();
    return s;
  }

  std::unique_ptr<Stmt> parse_if() {
    auto s = make_stmt(StmtKind::kIf, next().line);
    while (true) {
      Branch b;
      b.test = parse_tuple(false, false, {});
      b.body = parse_statements({"elif", "else", "endif"}, false);
      s->branches.push_back(std::move(b));
      const Token& t = next();
      if (t.value == "elif") continue;
      if (t.value == "else") s->else_body = parse_statements({"endif"}, true);
      break;
    }
    return s;
  }

  Target parse_assign_target(bool with_namespace, const std::set<std::string>& extra_end) {
    Target target;
    if (with_namespace && cur().type == TokenType::kName && look().type == TokenType::kOp &&
        look().value == ".") {
      target.names.push_back(next().value);
      next();
      target.ns_attr = expect_name().value;
      return target;
    }
    // A name or a (possibly parenthesised) tuple of names, as parse_tuple(simplified=True).
    bool parens = skip_op("(");
    while (true) {
      if (!target.names.empty()) {
        if (!skip_op(",")) break;
        target.is_tuple = true;
      }
      if (cur().type == TokenType::kBlockEnd || is_op(")") || is_op("=") ||
          (cur().type == TokenType::kName && extra_end.count(cur().value)))
        break;
      if (is_op("(")) outside_subset(cur(), "a nested tuple as an assignment target");
      const Token& n = cur();
      if (n.type != TokenType::kName || n.value == "true" || n.value == "false" ||
          n.value == "none" || n.value == "True" || n.value == "False" || n.value == "None")
        error(n, "can't assign to '" + describe_token(n) + "'");
      target.names.push_back(next().value);
    }
    if (parens) {
      expect_op(")");
      target.is_tuple = target.is_tuple || target.names.size() != 1;
    }
    if (target.names.empty()) expected("name");
    return target;
  }

  std::unique_ptr<Stmt> parse_for() {
    auto s = make_stmt(StmtKind::kFor, next().line);
    s->target = parse_assign_target(false, {"in"});
    if (!skip_name("in")) expected("in");
    s->expr = parse_tuple(false, false, {"recursive"});
    if (skip_name("if")) s->test = parse_expression(true);
    if (is_name("recursive")) outside_subset(cur(), "a recursive for loop");
    ++loop_depth_;
    s->body = parse_statements({"endfor", "else"}, false);
    --loop_depth_;
    if (next().value == "else") s->else_body = parse_statements({"endfor"}, true);
    return s;
  }

  std::unique_ptr<Stmt> parse_set() {
    int line = next().line;
    Target target = parse_assign_target(true, {});
    if (skip_op("=")) {
      auto s = make_stmt(StmtKind::kSet, line);
      s->target = std::move(target);
      s->expr = parse_tuple(true, false, {});
      return s;
    }
    auto s = make_stmt(StmtKind::kSetBlock, line);
    s->target = std::move(target);
    if (is_op("|")) s->filter = parse_filter(nullptr, false);
    s->body = parse_statements({"endset"}, true);
    return s;
  }

  void parse_signature(Stmt& s) {
    expect_op("(");
    while (!is_op(")")) {
      if (!s.params.empty()) expect_op(",");
      const Token& n = expect_name();
      s.params.push_back(n.value);
      if (skip_op("="))
        s.defaults.push_back(parse_expression(true));
      else if (!s.defaults.empty())
        error(n, "non-default argument follows default argument");
    }
    expect_op(")");
  }

  // Which of the special names caller / varargs / kwargs a macro body reads: jinja2 accepts
  // extra arguments only then.
  static void scan_names(const Body& body, Stmt& macro) {
    std::function<void(const Expr*)> expr = [&](const Expr* e) {
      if (e == nullptr) return;
      if (e->kind == ExprKind::kName) {
        macro.uses_caller |= e->name == "caller";
        macro.uses_varargs |= e->name == "varargs";
        macro.uses_kwargs |= e->name == "kwargs";
      }
      expr(e->object.get());
      for (const auto& a : e->args) expr(a.get());
      for (const auto& k : e->keywords) expr(k.value.get());
    };
    std::function<void(const Body&)> stmts = [&](const Body& b) {
      for (const auto& s : b) {
        expr(s->expr.get());
        expr(s->test.get());
        expr(s->filter.get());
        for (const auto& br : s->branches) {
          expr(br.test.get());
          stmts(br.body);
        }
        for (const auto& d : s->defaults) expr(d.get());
        stmts(s->body);
        stmts(s->else_body);
      }
    };
    stmts(body);
  }

  std::unique_ptr<Stmt> parse_macro() {
    auto s = make_stmt(StmtKind::kMacro, next().line);
    s->name = expect_name().value;
    parse_signature(*s);
    int saved = loop_depth_;
    loop_depth_ = 0;
    s->body = parse_statements({"endmacro"}, true);
    loop_depth_ = saved;
    scan_names(s->body, *s);
    return s;
  }

  std::unique_ptr<Stmt> parse_call_block() {
    auto s = make_stmt(StmtKind::kCallBlock, next().line);
    if (is_op("(")) parse_signature(*s);
    s->expr = parse_expression(true);
    if (s->expr->kind != ExprKind::kCall) error(cur(), "expected call");
    int saved = loop_depth_;
    loop_depth_ = 0;
    s->body = parse_statements({"endcall"}, true);
    loop_depth_ = saved;
    scan_names(s->body, *s);
    return s;
  }

  std::unique_ptr<Stmt> parse_filter_block() {
    auto s = make_stmt(StmtKind::kFilterBlock, next().line);
    s->filter = parse_filter(nullptr, true);
    s->body = parse_statements({"endfilter"}, true);
    return s;
  }

  // ---- expressions ----
  bool is_tuple_end(const std::set<std::string>& extra_end) const {
    const Token& t = cur();
    if (t.type == TokenType::kVarEnd || t.type == TokenType::kBlockEnd ||
        (t.type == TokenType::kOp && t.value == ")"))
      return true;
    return t.type == TokenType::kName && extra_end.count(t.value) > 0;
  }

  ExprPtr parse_tuple(bool with_condexpr, bool explicit_parentheses,
                      const std::set<std::string>& extra_end) {
    int line = cur().line;
    std::vector<ExprPtr> items;
    bool is_tuple = false;
    while (true) {
      if (!items.empty()) expect_op(",");
      if (is_tuple_end(extra_end)) break;
      items.push_back(parse_expression(with_condexpr));
      if (is_op(","))
        is_tuple = true;
      else
        break;
    }
    if (!is_tuple) {
      if (!items.empty()) return std::move(items[0]);
      if (!explicit_parentheses)
        error(cur(), "Expected an expression, got '" + describe_token(cur()) + "'");
    }
    auto e = make(ExprKind::kTuple, line);
    e->args = std::move(items);
    return e;
  }

  ExprPtr parse_expression(bool with_condexpr) {
    return with_condexpr ? parse_condexpr() : parse_or();
  }

  ExprPtr parse_condexpr() {
    DepthGuard guard(*this);
    int line = cur().line;
    ExprPtr expr1 = parse_or();
    while (skip_name("if")) {
      ExprPtr expr2 = parse_or();
      ExprPtr expr3 = skip_name("else") ? parse_condexpr() : nullptr;
      auto e = make(ExprKind::kCond, line);
      e->args.push_back(std::move(expr2));
      e->args.push_back(std::move(expr1));
      e->args.push_back(std::move(expr3));
      expr1 = std::move(e);
      line = cur().line;
    }
    return expr1;
  }

  ExprPtr binary(ExprKind kind, int line, ExprPtr left, ExprPtr right, std::string op = "") {
    auto e = make(kind, line);
    e->name = std::move(op);
    e->args.push_back(std::move(left));
    e->args.push_back(std::move(right));
    return e;
  }

  ExprPtr parse_or() {
    int line = cur().line;
    ExprPtr left = parse_and();
    while (skip_name("or")) {
      left = binary(ExprKind::kOr, line, std::move(left), parse_and());
      line = cur().line;
    }
    return left;
  }

  ExprPtr parse_and() {
    int line = cur().line;
    ExprPtr left = parse_not();
    while (skip_name("and")) {
      left = binary(ExprKind::kAnd, line, std::move(left), parse_not());
      line = cur().line;
    }
    return left;
  }

  ExprPtr parse_not() {
    DepthGuard guard(*this);
    if (is_name("not")) {
      auto e = make(ExprKind::kNot, next().line);
      e->object = parse_not();
      return e;
    }
    return parse_compare();
  }

  ExprPtr parse_compare() {
    int line = cur().line;
    ExprPtr expr = parse_math1();
    auto e = make(ExprKind::kCompare, line);
    while (true) {
      const Token& t = cur();
      if (t.type == TokenType::kOp && (t.value == "==" || t.value == "!=" || t.value == "<" ||
                                       t.value == "<=" || t.value == ">" || t.value == ">=")) {
        e->ops.push_back(next().value);
      } else if (skip_name("in")) {
        e->ops.emplace_back("in");
      } else if (is_name("not") && look().type == TokenType::kName && look().value == "in") {
        next();
        next();
        e->ops.emplace_back("notin");
      } else {
        break;
      }
      e->args.push_back(parse_math1());
      e->line = cur().line;
    }
    if (e->ops.empty()) return expr;
    e->object = std::move(expr);
    return e;
  }

  ExprPtr parse_math1() {
    int line = cur().line;
    ExprPtr left = parse_concat();
    while (is_op("+") || is_op("-")) {
      std::string op = next().value;
      left = binary(ExprKind::kBinary, line, std::move(left), parse_concat(), op);
      line = cur().line;
    }
    return left;
  }

  ExprPtr parse_concat() {
    int line = cur().line;
    ExprPtr first = parse_math2();
    if (!is_op("~")) return first;
    auto e = make(ExprKind::kConcat, line);
    e->args.push_back(std::move(first));
    while (skip_op("~")) e->args.push_back(parse_math2());
    return e;
  }

  ExprPtr parse_math2() {
    int line = cur().line;
    ExprPtr left = parse_pow();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      std::string op = next().value;
      left = binary(ExprKind::kBinary, line, std::move(left), parse_pow(), op);
      line = cur().line;
    }
    return left;
  }

  ExprPtr parse_pow() {
    int line = cur().line;
    ExprPtr left = parse_unary(true);
    while (skip_op("**")) {
      left = binary(ExprKind::kBinary, line, std::move(left), parse_unary(true), "**");
      line = cur().line;
    }
    return left;
  }

  ExprPtr parse_unary(bool with_filter) {
    DepthGuard guard(*this);
    int line = cur().line;
    ExprPtr node;
    if (is_op("-") || is_op("+")) {
      bool neg = next().value == "-";
      node = make(neg ? ExprKind::kNeg : ExprKind::kPos, line);
      node->object = parse_unary(false);
    } else {
      node = parse_primary();
    }
    node = parse_postfix(std::move(node));
    if (with_filter) node = parse_filter_expr(std::move(node));
    return node;
  }

  ExprPtr parse_primary() {
    const Token& t = cur();
    auto literal = [&](Value v) {
      auto e = make(ExprKind::kLiteral, t.line);
      e->literal = std::move(v);
      return e;
    };
    switch (t.type) {
      case TokenType::kName: {
        next();
        if (t.value == "true" || t.value == "True") return literal(Value(true));
        if (t.value == "false" || t.value == "False") return literal(Value(false));
        if (t.value == "none" || t.value == "None") return literal(Value::none());
        auto e = make(ExprKind::kName, t.line);
        e->name = t.value;
        return e;
      }
      case TokenType::kString: {
        int line = t.line;
        std::string s;
        while (cur().type == TokenType::kString) s += next().value;
        auto e = make(ExprKind::kLiteral, line);
        e->literal = Value(std::move(s));
        return e;
      }
      case TokenType::kInt:
        next();
        return literal(Value(t.int_value));
      case TokenType::kFloat:
        next();
        return literal(Value(t.float_value));
      case TokenType::kOp:
        if (t.value == "(") {
          next();
          ExprPtr e = parse_tuple(true, true, {});
          expect_op(")");
          return e;
        }
        if (t.value == "[") return parse_list();
        if (t.value == "{") return parse_dict();
        break;
      default:
        break;
    }
    unexpected(t);
  }

  ExprPtr parse_list() {
    auto e = make(ExprKind::kList, expect_op("[").line);
    while (!is_op("]")) {
      if (!e->args.empty()) expect_op(",");
      if (is_op("]")) break;
      e->args.push_back(parse_expression(true));
    }
    expect_op("]");
    return e;
  }

  ExprPtr parse_dict() {
    auto e = make(ExprKind::kDict, expect_op("{").line);
    while (!is_op("}")) {
      if (!e->args.empty()) expect_op(",");
      if (is_op("}")) break;
      e->args.push_back(parse_expression(true));
      expect_op(":");
      e->args.push_back(parse_expression(true));
    }
    expect_op("}");
    return e;
  }

  ExprPtr parse_postfix(ExprPtr node) {
    while (true) {
      if (is_op(".") || is_op("["))
        node = parse_subscript(std::move(node));
      else if (is_op("("))
        node = parse_call(std::move(node));
      else
        return node;
    }
  }

  ExprPtr parse_filter_expr(ExprPtr node) {
    while (true) {
      if (is_op("|"))
        node = parse_filter(std::move(node), false);
      else if (is_name("is"))
        node = parse_test(std::move(node));
      else if (is_op("("))
        node = parse_call(std::move(node));
      else
        return node;
    }
  }

  ExprPtr parse_subscript(ExprPtr node) {
    const Token& t = next();
    if (t.value == ".") {
      const Token& attr = next();
      if (attr.type == TokenType::kName) {
        auto e = make(ExprKind::kGetattr, t.line);
        e->object = std::move(node);
        e->name = attr.value;
        return e;
      }
      if (attr.type != TokenType::kInt) error(attr, "expected name or number");
      auto e = make(ExprKind::kGetitem, t.line);
      e->object = std::move(node);
      auto index = make(ExprKind::kLiteral, attr.line);
      index->literal = Value(attr.int_value);
      e->args.push_back(std::move(index));
      return e;
    }
    std::vector<ExprPtr> subs;
    while (!is_op("]")) {
      if (!subs.empty()) expect_op(",");
      subs.push_back(parse_subscribed());
    }
    expect_op("]");
    if (subs.size() != 1) outside_subset(t, "a subscript with several indices");
    if (subs[0]->kind == ExprKind::kSlice) {
      subs[0]->object = std::move(node);
      return std::move(subs[0]);
    }
    auto e = make(ExprKind::kGetitem, t.line);
    e->object = std::move(node);
    e->args.push_back(std::move(subs[0]));
    return e;
  }

  ExprPtr parse_subscribed() {
    int line = cur().line;
    std::vector<ExprPtr> parts;
    if (is_op(":")) {
      next();
      parts.push_back(nullptr);
    } else {
      ExprPtr node = parse_expression(true);
      if (!is_op(":")) return node;
      next();
      parts.push_back(std::move(node));
    }
    if (is_op(":") || is_op("]") || is_op(","))
      parts.push_back(nullptr);
    else
      parts.push_back(parse_expression(true));
    if (skip_op(":")) {
      if (is_op("]") || is_op(","))
        parts.push_back(nullptr);
      else
        parts.push_back(parse_expression(true));
    } else {
      parts.push_back(nullptr);
    }
    auto e = make(ExprKind::kSlice, line);
    e->args = std::move(parts);
    return e;
  }

  void parse_call_args(Expr& e) {
    const Token& open = expect_op("(");
    bool require_comma = false;
    while (!is_op(")")) {
      if (require_comma) {
        expect_op(",");
        if (is_op(")")) break;
      }
      if (is_op("*") || is_op("**")) outside_subset(cur(), "*args / **kwargs in a call");
      if (cur().type == TokenType::kName && look().type == TokenType::kOp && look().value == "=") {
        std::string key = next().value;
        next();
        e.keywords.push_back(Keyword{key, parse_expression(true)});
      } else {
        if (!e.keywords.empty()) error(open, "invalid syntax for function call expression");
        e.args.push_back(parse_expression(true));
      }
      require_comma = true;
    }
    expect_op(")");
  }

  ExprPtr parse_call(ExprPtr node) {
    auto e = make(ExprKind::kCall, cur().line);
    e->object = std::move(node);
    parse_call_args(*e);
    return e;
  }

  std::string dotted_name() {
    std::string name = expect_name().value;
    while (is_op(".")) {
      next();
      name += "." + expect_name().value;
    }
    return name;
  }

  ExprPtr parse_filter(ExprPtr node, bool start_inline) {
    while (is_op("|") || start_inline) {
      if (!start_inline) next();
      start_inline = false;
      const Token& t = cur();
      std::string name = dotted_name();
      auto e = make(ExprKind::kFilter, t.line);
      e->object = std::move(node);
      e->name = name;
      if (is_op("(")) parse_call_args(*e);
      node = std::move(e);
    }
    return node;
  }

  ExprPtr parse_test(ExprPtr node) {
    int line = next().line;
    bool negated = skip_name("not");
    std::string name = dotted_name();
    auto e = make(ExprKind::kTest, line);
    e->object = std::move(node);
    e->name = name;
    if (is_op("(")) {
      parse_call_args(*e);
    } else if ((cur().type == TokenType::kName || cur().type == TokenType::kString ||
                cur().type == TokenType::kInt || cur().type == TokenType::kFloat || is_op("(") ||
                is_op("[") || is_op("{")) &&
               !is_name("else") && !is_name("or") && !is_name("and")) {
      if (is_name("is")) error(cur(), "You cannot chain multiple tests with is");
      e->args.push_back(parse_postfix(parse_primary()));
    }
    if (!negated) return e;
    auto n = make(ExprKind::kNot, line);
    n->object = std::move(e);
    return n;
  }

  // jinja2 refuses a template naming an unknown filter or test when it compiles it, except inside
  // an if statement or an if-expression (a "soft frame": a for loop, macro or block inside starts
  // a hard one again), where the error waits until the filter runs. Filters and tests jinja2
  // knows but this engine does not are left to fail when they run, naming themselves.
  void check_expr(const Expr* e, bool soft) const {
    if (e == nullptr) return;
    if (e->kind == ExprKind::kCond) soft = true;
    if (!soft && e->kind == ExprKind::kFilter && filter_support(e->name) == Support::kUnknown)
      fail(name_, ":", e->line, ": No filter named '", e->name, "'.");
    if (!soft && e->kind == ExprKind::kTest && test_support(e->name) == Support::kUnknown)
      fail(name_, ":", e->line, ": No test named '", e->name, "'.");
    check_expr(e->object.get(), soft);
    for (const auto& a : e->args) check_expr(a.get(), soft);
    for (const auto& k : e->keywords) check_expr(k.value.get(), soft);
  }

  void check_names(const Body& body, bool soft) const {
    for (const auto& s : body) {
      switch (s->kind) {
        case StmtKind::kIf:
          for (const auto& b : s->branches) {
            check_expr(b.test.get(), true);
            check_names(b.body, true);
          }
          check_names(s->else_body, true);
          break;
        case StmtKind::kFor:
          check_expr(s->expr.get(), soft);
          check_expr(s->test.get(), false);
          check_names(s->body, false);
          check_names(s->else_body, false);
          break;
        case StmtKind::kMacro:
        case StmtKind::kCallBlock:
          for (const auto& d : s->defaults) check_expr(d.get(), false);
          check_expr(s->expr.get(), soft);
          check_names(s->body, false);
          break;
        case StmtKind::kSetBlock:
        case StmtKind::kFilterBlock:
        case StmtKind::kGeneration:
          check_expr(s->filter.get(), false);
          check_names(s->body, false);
          break;
        default:
          check_expr(s->expr.get(), soft);
      }
    }
  }

  const std::vector<Token>& tokens_;
  const std::string& name_;
  size_t pos_ = 0;
  int loop_depth_ = 0;
  int depth_ = 0;
  std::vector<std::string> tag_stack_;
  std::vector<std::vector<std::string>> end_stack_;
};

}  // namespace

Body parse_template(const std::vector<Token>& tokens, const std::string& name) {
  return Parser(tokens, name).run();
}

}  // namespace retain::jinja
