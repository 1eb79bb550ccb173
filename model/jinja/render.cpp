#include "model/jinja/render.h"

#include <memory>
#include <unordered_map>

#include "model/jinja/operators.h"

namespace retain::jinja {

namespace {

// Python stops a runaway recursion (a macro calling itself) with RecursionError; so does this.
constexpr int kMaxCallDepth = 200;

struct Scope {
  Scope* parent;
  std::unordered_map<std::string, Value> vars;
};

enum class Flow { kNormal, kBreak, kContinue };

class Renderer {
 public:
  explicit Renderer(const Clock& clock) : clock_(clock) {}

  // Namespaces and loop.changed's memory are the only values that change after they are made, so
  // the only ones that can end up holding themselves (`set ns.me = ns`); clearing them breaks
  // such cycles.
  ~Renderer() {
    for (auto& ns : namespaces_)
      if (auto o = ns.lock()) o->attrs = Dict();
    for (auto& state : changed_states_) state->reset();
  }

  std::string run(const Body& body, const Value& context) {
    Scope* root = new_scope(nullptr);
    if (context.kind() == Kind::kDict)
      for (const auto& [k, v] : context.dict().entries()) root->vars[k.to_str()] = v;
    std::string out;
    exec(body, root, out);
    return out;
  }

 private:
  Scope* new_scope(Scope* parent) {
    scopes_.push_back(std::make_unique<Scope>(Scope{parent, {}}));
    return scopes_.back().get();
  }

  Value lookup(const std::string& name, Scope* scope) {
    for (Scope* s = scope; s != nullptr; s = s->parent) {
      auto it = s->vars.find(name);
      if (it != s->vars.end()) return it->second;
    }
    auto g = globals_.find(name);
    if (g != globals_.end()) return g->second;
    std::optional<Value> global;
    if (name == "namespace") {
      global = Value::callable("namespace", [this](CallArgs& args) {
        Value ns = global_value("namespace", clock_)->callable().call(args);
        namespaces_.push_back(ns.object_ptr());
        return ns;
      });
    } else {
      global = global_value(name, clock_);
    }
    if (!global) return Value::undefined(name);
    globals_.emplace(name, *global);
    return *global;
  }

  // ---- statements ----
  Flow exec(const Body& body, Scope* scope, std::string& out) {
    for (const auto& s : body) {
      Flow f = exec_stmt(*s, scope, out);
      if (f != Flow::kNormal) return f;
    }
    return Flow::kNormal;
  }

  Flow exec_stmt(const Stmt& s, Scope* scope, std::string& out) {
    try {
      return exec_stmt_inner(s, scope, out);
    } catch (RenderError& e) {
      if (e.line == 0) e.line = s.line;
      throw;
    }
  }

  Flow exec_stmt_inner(const Stmt& s, Scope* scope, std::string& out) {
    switch (s.kind) {
      case StmtKind::kText:
        out += s.text;
        check_size(out);
        return Flow::kNormal;
      case StmtKind::kOutput:
        out += eval(*s.expr, scope).to_str();
        check_size(out);
        return Flow::kNormal;
      case StmtKind::kIf:
        for (const auto& b : s.branches)
          if (eval(*b.test, scope).truthy()) return exec(b.body, scope, out);
        return exec(s.else_body, scope, out);
      case StmtKind::kFor:
        exec_for(s, scope, out);
        return Flow::kNormal;
      case StmtKind::kSet:
        assign(s.target, eval(*s.expr, scope), scope);
        return Flow::kNormal;
      case StmtKind::kSetBlock: {
        std::string buf;
        Flow f = exec(s.body, new_scope(scope), buf);
        Value v(buf);
        if (s.filter) v = eval_filter(*s.filter, scope, &v);
        assign(s.target, v, scope);
        return f;
      }
      case StmtKind::kMacro:
        scope->vars[s.name] = make_macro(s, scope, s.name);
        return Flow::kNormal;
      case StmtKind::kCallBlock: {
        const Expr& call = *s.expr;
        Value callee = eval(*call.object, scope);
        CallArgs args = eval_args(call, scope);
        args.keywords.emplace_back("caller", make_macro(s, scope, "caller"));
        out += call_value(callee, args).to_str();
        return Flow::kNormal;
      }
      case StmtKind::kFilterBlock: {
        std::string buf;
        Flow f = exec(s.body, new_scope(scope), buf);
        Value input(buf);
        out += eval_filter(*s.filter, scope, &input).to_str();
        return f;
      }
      case StmtKind::kBreak:
        return Flow::kBreak;
      case StmtKind::kContinue:
        return Flow::kContinue;
      case StmtKind::kGeneration:
        exec(s.body, new_scope(scope), out);
        return Flow::kNormal;
    }
    return Flow::kNormal;
  }

  static void check_size(const std::string& out) {
    if (out.size() > kMaxTextBytes) throw UnsupportedError("a rendered text beyond 64 MiB");
  }

  void assign(const Target& t, const Value& value, Scope* scope) {
    if (!t.ns_attr.empty()) {
      Value ns = lookup(t.names[0], scope);
      if (!ns.is_namespace()) throw RenderError("cannot assign attribute on non-namespace object");
      if (t.ns_attr[0] == '_')
        throw RenderError(
            "Chat templates cannot store underscore-prefixed attributes on a "
            "namespace, but got '" +
            t.ns_attr + "'. Please rename the attribute.");
      ns.object().attrs.set(Value(t.ns_attr), value);
      return;
    }
    if (!t.is_tuple) {
      scope->vars[t.names[0]] = value;
      return;
    }
    auto items = py_iterate(value);
    if (items.size() > t.names.size())
      throw RenderError("too many values to unpack (expected " + std::to_string(t.names.size()) +
                        ")");
    if (items.size() < t.names.size())
      throw RenderError("not enough values to unpack (expected " + std::to_string(t.names.size()) +
                        ", got " + std::to_string(items.size()) + ")");
    for (size_t i = 0; i < items.size(); ++i) scope->vars[t.names[i]] = items[i];
  }

  Value make_loop(const std::vector<Value>& items, size_t i,
                  const std::shared_ptr<std::optional<Value>>& last_changed) {
    auto loop = std::make_shared<Object>();
    loop->type_name = "LoopContext";
    auto n = static_cast<int64_t>(items.size());
    auto k = static_cast<int64_t>(i);
    Dict& a = loop->attrs;
    a.set("index", Value(k + 1));
    a.set("index0", Value(k));
    a.set("revindex", Value(n - k));
    a.set("revindex0", Value(n - k - 1));
    a.set("first", Value(k == 0));
    a.set("last", Value(k == n - 1));
    a.set("length", Value(n));
    a.set("depth", Value(1));
    a.set("depth0", Value(0));
    a.set("previtem",
          i > 0 ? items[i - 1] : Value::undefined("previtem", "there is no previous item"));
    a.set("nextitem", i + 1 < items.size() ? items[i + 1]
                                           : Value::undefined("nextitem", "there is no next item"));
    a.set("cycle", Value::callable("loop.cycle", [k](CallArgs& args) {
            if (!args.keywords.empty())
              throw RenderError("loop.cycle() takes no keyword arguments");
            if (args.positional.empty()) throw RenderError("no items for cycling given");
            return args.positional[static_cast<size_t>(k) % args.positional.size()];
          }));
    a.set("changed", Value::callable("loop.changed", [last_changed](CallArgs& args) {
            Value now = Value::list(args.positional, SeqKind::kTuple);
            bool changed = !last_changed->has_value() || !py_equal(**last_changed, now);
            *last_changed = now;
            return Value(changed);
          }));
    return Value::object(loop);
  }

  void exec_for(const Stmt& s, Scope* scope, std::string& out) {
    std::vector<Value> items = py_iterate(eval(*s.expr, scope));
    if (s.test) {
      // The inline `if` filters before the loop counts: loop.length and loop.index see only the
      // items kept.
      std::vector<Value> kept;
      for (auto& item : items) {
        Scope* probe = new_scope(scope);
        assign(s.target, item, probe);
        if (eval(*s.test, probe).truthy()) kept.push_back(std::move(item));
      }
      items = std::move(kept);
    }
    auto changed = std::make_shared<std::optional<Value>>();
    changed_states_.push_back(changed);
    for (size_t i = 0; i < items.size(); ++i) {
      Scope* it = new_scope(scope);
      assign(s.target, items[i], it);
      it->vars["loop"] = make_loop(items, i, changed);
      if (exec(s.body, it, out) == Flow::kBreak) break;
    }
    if (items.empty()) exec(s.else_body, new_scope(scope), out);
  }

  // A macro (or a call block's body, which becomes `caller`): a callable that renders `def`'s
  // body in a scope whose parent is the one it was defined in.
  Value make_macro(const Stmt& def, Scope* defining, const std::string& name) {
    return Value::callable(
        "macro '" + name + "'",
        [this, &def, defining, name](CallArgs& args) {
          return call_macro(def, defining, name, args);
        },
        true);
  }

  Value call_macro(const Stmt& def, Scope* defining, const std::string& name, CallArgs& args) {
    if (depth_ >= kMaxCallDepth) throw RenderError("maximum recursion depth exceeded");
    struct DepthGuard {
      int& d;
      explicit DepthGuard(int& depth) : d(++depth) {}
      ~DepthGuard() { --d; }
    } guard(depth_);
    const size_t np = def.params.size();
    const size_t first_default = np - def.defaults.size();
    std::vector<std::optional<Value>> bound(np);
    for (size_t i = 0; i < np && i < args.positional.size(); ++i) bound[i] = args.positional[i];
    Dict extra;
    std::optional<Value> caller;
    for (const auto& [key, value] : args.keywords) {
      auto it = std::find(def.params.begin(), def.params.end(), key);
      auto idx = static_cast<size_t>(it - def.params.begin());
      if (it != def.params.end() && idx >= args.positional.size() && !bound[idx]) {
        bound[idx] = value;
      } else if (key == "caller" && def.uses_caller && !caller) {
        caller = value;
      } else if (def.uses_kwargs) {
        extra.set(Value(key), value);
      } else {
        throw RenderError("macro '" + name + "' takes no keyword argument '" + key + "'");
      }
    }
    if (args.positional.size() > np && !def.uses_varargs)
      throw RenderError("macro '" + name + "' takes not more than " + std::to_string(np) +
                        " argument(s)");
    Scope* m = new_scope(defining);
    for (size_t i = 0; i < np; ++i) {
      const std::string& p = def.params[i];
      if (bound[i])
        m->vars[p] = *bound[i];
      else if (i >= first_default)
        m->vars[p] = eval(*def.defaults[i - first_default], m);
      else
        m->vars[p] = Value::undefined(p, "parameter '" + p + "' was not provided");
    }
    if (def.uses_caller)
      m->vars["caller"] = caller ? *caller : Value::undefined("caller", "No caller defined");
    if (def.uses_varargs) {
      std::vector<Value> rest;
      for (size_t i = np; i < args.positional.size(); ++i) rest.push_back(args.positional[i]);
      m->vars["varargs"] = Value::list(std::move(rest), SeqKind::kTuple);
    }
    if (def.uses_kwargs) m->vars["kwargs"] = Value::dict(std::move(extra));
    std::string out;
    exec(def.body, m, out);
    return Value(out);
  }

  // ---- expressions ----
  CallArgs eval_args(const Expr& e, Scope* scope) {
    CallArgs args;
    for (const auto& a : e.args) args.positional.push_back(eval(*a, scope));
    for (const auto& k : e.keywords) args.keywords.emplace_back(k.name, eval(*k.value, scope));
    return args;
  }

  // A filter chain; the innermost filter without an input reads `block_input` (a filter block's
  // or a set block's body).
  Value eval_filter(const Expr& e, Scope* scope, const Value* block_input) {
    try {
      Value input;
      if (e.object == nullptr)
        input = *block_input;
      else if (e.object->kind == ExprKind::kFilter)
        input = eval_filter(*e.object, scope, block_input);
      else
        input = eval(*e.object, scope);
      CallArgs args = eval_args(e, scope);
      return apply_filter(e.name, input, args);
    } catch (RenderError& err) {
      if (err.line == 0) err.line = e.line;
      throw;
    }
  }

  Value eval(const Expr& e, Scope* scope) {
    try {
      return eval_inner(e, scope);
    } catch (RenderError& err) {
      if (err.line == 0) err.line = e.line;
      throw;
    }
  }

  bool compare(const std::string& op, const Value& a, const Value& b) {
    if (op == "==") return py_equal(a, b);
    if (op == "!=") return !py_equal(a, b);
    if (op == "<" || op == ">" || op == "<=" || op == ">=") return py_compare(op, a, b);
    if (op == "in") return py_contains(b, a);
    return !py_contains(b, a);  // notin
  }

  Value eval_inner(const Expr& e, Scope* scope) {
    switch (e.kind) {
      case ExprKind::kLiteral:
        return e.literal;
      case ExprKind::kName:
        return lookup(e.name, scope);
      case ExprKind::kList:
      case ExprKind::kTuple: {
        std::vector<Value> items;
        for (const auto& a : e.args) items.push_back(eval(*a, scope));
        return Value::list(std::move(items),
                           e.kind == ExprKind::kTuple ? SeqKind::kTuple : SeqKind::kList);
      }
      case ExprKind::kDict: {
        Dict d;
        for (size_t i = 0; i + 1 < e.args.size(); i += 2) {
          Value key = eval(*e.args[i], scope);
          check_hashable(key);
          d.set(key, eval(*e.args[i + 1], scope));
        }
        return Value::dict(std::move(d));
      }
      case ExprKind::kGetattr:
        return get_attr(eval(*e.object, scope), e.name);
      case ExprKind::kGetitem: {
        Value obj = eval(*e.object, scope);
        return get_item(obj, eval(*e.args[0], scope));
      }
      case ExprKind::kSlice: {
        Value obj = eval(*e.object, scope);
        Value part[3];
        for (int i = 0; i < 3; ++i)
          if (e.args[i]) part[i] = eval(*e.args[i], scope);
        return get_slice(obj, part[0], part[1], part[2], e.args[0] != nullptr, e.args[1] != nullptr,
                         e.args[2] != nullptr);
      }
      case ExprKind::kCall: {
        Value callee = eval(*e.object, scope);
        CallArgs args = eval_args(e, scope);
        return call_value(callee, args);
      }
      case ExprKind::kFilter:
        return eval_filter(e, scope, nullptr);
      case ExprKind::kTest: {
        Value input = eval(*e.object, scope);
        CallArgs args = eval_args(e, scope);
        return Value(apply_test(e.name, input, args));
      }
      case ExprKind::kNot:
        return Value(!eval(*e.object, scope).truthy());
      case ExprKind::kNeg:
      case ExprKind::kPos:
        return unary_op(e.kind == ExprKind::kNeg, eval(*e.object, scope));
      case ExprKind::kBinary: {
        Value a = eval(*e.args[0], scope);
        return binary_op(e.name, a, eval(*e.args[1], scope));
      }
      case ExprKind::kAnd: {
        Value a = eval(*e.args[0], scope);
        return a.truthy() ? eval(*e.args[1], scope) : a;
      }
      case ExprKind::kOr: {
        Value a = eval(*e.args[0], scope);
        return a.truthy() ? a : eval(*e.args[1], scope);
      }
      case ExprKind::kConcat: {
        std::string s;
        for (const auto& a : e.args) {
          s += eval(*a, scope).to_str();
          check_size(s);
        }
        return Value(std::move(s));
      }
      case ExprKind::kCompare: {
        Value left = eval(*e.object, scope);
        for (size_t i = 0; i < e.ops.size(); ++i) {
          Value right = eval(*e.args[i], scope);
          if (!compare(e.ops[i], left, right)) return Value(false);
          left = std::move(right);
        }
        return Value(true);
      }
      case ExprKind::kCond:
        if (eval(*e.args[0], scope).truthy()) return eval(*e.args[1], scope);
        if (e.args[2]) return eval(*e.args[2], scope);
        return Value::undefined("", "the inline if-expression on line " + std::to_string(e.line) +
                                        " evaluated to false and no else section was defined.");
    }
    return Value();
  }

  const Clock& clock_;
  std::vector<std::unique_ptr<Scope>> scopes_;
  std::unordered_map<std::string, Value> globals_;
  std::vector<std::weak_ptr<Object>> namespaces_;
  std::vector<std::shared_ptr<std::optional<Value>>> changed_states_;
  int depth_ = 0;
};

}  // namespace

std::string render_template(const Body& body, const Value& context, const Clock& clock) {
  return Renderer(clock).run(body, context);
}

}  // namespace retain::jinja
