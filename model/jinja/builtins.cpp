#include "model/jinja/builtins.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>

#include "model/jinja/methods.h"
#include "model/jinja/operators.h"
#include "model/jinja/text.h"

namespace retain::jinja {

namespace {

// ---- tests ----

// A test and its argument count: jinja2's tests take the value and none or one argument.
struct Test {
  int arity;
  bool (*fn)(const Value& v, const Value& arg);
};

bool remainder_is(const Value& v, const Value& divisor, int64_t expected) {
  return py_equal(binary_op("%", v, divisor), Value(expected));
}

bool sequence(const Value& v) {
  switch (v.kind()) {
    case Kind::kUndefined:
    case Kind::kString:
    case Kind::kDict:
      return true;
    case Kind::kList:
      return v.seq_kind() != SeqKind::kIterator &&
             (v.list_data().view.empty() || v.list_data().view == "range");
    default:
      return false;
  }
}

// The loop variable is iterable and callable in jinja2 (recursive loops); namespaces are neither.
bool loop_object(const Value& v) { return v.kind() == Kind::kObject && !v.is_namespace(); }

const std::map<std::string, Test>& tests() {
  using V = const Value&;
  static const std::map<std::string, Test> table = {
      {"odd", {0, [](V v, V) { return remainder_is(v, Value(2), 1); }}},
      {"even", {0, [](V v, V) { return remainder_is(v, Value(2), 0); }}},
      {"divisibleby", {1, [](V v, V n) { return remainder_is(v, n, 0); }}},
      {"defined", {0, [](V v, V) { return !v.is_undefined(); }}},
      {"undefined", {0, [](V v, V) { return v.is_undefined(); }}},
      {"none", {0, [](V v, V) { return v.is_none(); }}},
      {"boolean", {0, [](V v, V) { return v.kind() == Kind::kBool; }}},
      {"false", {0, [](V v, V) { return v.kind() == Kind::kBool && !v.as_bool(); }}},
      {"true", {0, [](V v, V) { return v.kind() == Kind::kBool && v.as_bool(); }}},
      {"integer", {0, [](V v, V) { return v.kind() == Kind::kInt; }}},
      {"float", {0, [](V v, V) { return v.kind() == Kind::kFloat; }}},
      {"number", {0, [](V v, V) { return v.is_number(); }}},
      {"string", {0, [](V v, V) { return v.is_string(); }}},
      {"mapping", {0, [](V v, V) { return v.kind() == Kind::kDict; }}},
      {"sequence", {0, [](V v, V) { return sequence(v); }}},
      {"iterable",
       {0,
        [](V v, V) {
          return v.kind() == Kind::kUndefined || v.kind() == Kind::kString ||
                 v.kind() == Kind::kList || v.kind() == Kind::kDict || loop_object(v);
        }}},
      {"callable",
       {0,
        [](V v, V) {
          // Undefined has __call__ (it raises), so callable() says yes.
          return v.kind() == Kind::kCallable || v.kind() == Kind::kUndefined || loop_object(v);
        }}},
      {"sameas", {1, [](V v, V o) { return v.same_as(o); }}},
      {"lower", {0, [](V v, V) { return py_islower(v.to_str()); }}},
      {"upper", {0, [](V v, V) { return py_isupper(v.to_str()); }}},
      {"escaped", {0, [](V v, V) { return v.is_string() && v.safe(); }}},
      {"in", {1, [](V v, V seq) { return py_contains(seq, v); }}},
      {"==", {1, [](V v, V o) { return py_equal(v, o); }}},
      {"eq", {1, [](V v, V o) { return py_equal(v, o); }}},
      {"equalto", {1, [](V v, V o) { return py_equal(v, o); }}},
      {"!=", {1, [](V v, V o) { return !py_equal(v, o); }}},
      {"ne", {1, [](V v, V o) { return !py_equal(v, o); }}},
      {">", {1, [](V v, V o) { return py_compare(">", v, o); }}},
      {"gt", {1, [](V v, V o) { return py_compare(">", v, o); }}},
      {"greaterthan", {1, [](V v, V o) { return py_compare(">", v, o); }}},
      {">=", {1, [](V v, V o) { return py_compare(">=", v, o); }}},
      {"ge", {1, [](V v, V o) { return py_compare(">=", v, o); }}},
      {"<", {1, [](V v, V o) { return py_compare("<", v, o); }}},
      {"lt", {1, [](V v, V o) { return py_compare("<", v, o); }}},
      {"lessthan", {1, [](V v, V o) { return py_compare("<", v, o); }}},
      {"<=", {1, [](V v, V o) { return py_compare("<=", v, o); }}},
      {"le", {1, [](V v, V o) { return py_compare("<=", v, o); }}},
      {"filter",
       {0, [](V v, V) { return v.is_string() && filter_support(v.str()) != Support::kUnknown; }}},
      {"test",
       {0, [](V v, V) { return v.is_string() && test_support(v.str()) != Support::kUnknown; }}},
  };
  return table;
}

int64_t int_arg(const Value& v, const std::string& what) {
  if (v.kind() != Kind::kInt && v.kind() != Kind::kBool)
    throw RenderError(what + ": '" + v.type_name() +
                      "' object cannot be interpreted as an integer");
  return v.as_int();
}

// ---- globals ----

Value g_range(CallArgs& a) {
  if (!a.keywords.empty()) throw RenderError("range() takes no keyword arguments");
  if (a.positional.empty() || a.positional.size() > 3)
    throw RenderError("range expected 1 to 3 arguments, got " +
                      std::to_string(a.positional.size()));
  std::vector<int64_t> n;
  for (const auto& v : a.positional) n.push_back(int_arg(v, "range"));
  int64_t start = n.size() == 1 ? 0 : n[0];
  int64_t stop = n.size() == 1 ? n[0] : n[1];
  int64_t step = n.size() == 3 ? n[2] : 1;
  if (step == 0) throw RenderError("range() arg 3 must not be zero");
  // jinja2's sandbox refuses ranges past MAX_RANGE.
  const int64_t length = step > 0 ? (stop > start ? (stop - start + step - 1) / step : 0)
                                  : (start > stop ? (start - stop - step - 1) / -step : 0);
  if (length > 100000)
    throw RenderError("Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
  return Value::range(start, stop, step);
}

// dict(*args, **kwargs) and namespace(*args, **kwargs) read their arguments alike.
Dict dict_from_args(const CallArgs& a, const char* what) {
  if (a.positional.size() > 1)
    throw RenderError(std::string(what) + " expected at most 1 argument, got " +
                      std::to_string(a.positional.size()));
  Dict d;
  if (!a.positional.empty()) {
    const Value& src = a.positional[0];
    if (src.kind() == Kind::kDict) {
      d = src.dict();
    } else {
      for (const auto& pair : py_iterate(src)) {
        auto kv = py_iterate(pair);
        if (kv.size() != 2)
          throw RenderError("dictionary update sequence element has length " +
                            std::to_string(kv.size()) + "; 2 is required");
        check_hashable(kv[0]);
        d.set(kv[0], kv[1]);
      }
    }
  }
  for (const auto& [k, v] : a.keywords) d.set(Value(k), v);
  return d;
}

Value g_dict(CallArgs& a) { return Value::dict(dict_from_args(a, "dict")); }

Value g_namespace(CallArgs& a) {
  auto ns = std::make_shared<Object>();
  ns->type_name = "Namespace";
  ns->is_namespace = true;
  ns->attrs = dict_from_args(a, "namespace");
  for (const auto& [k, v] : ns->attrs.entries())
    if (k.is_string() && !k.str().empty() && k.str()[0] == '_')
      throw RenderError(
          "Chat templates cannot store underscore-prefixed attributes on a namespace, "
          "but got " +
          k.repr() + ". Please rename the attribute.");
  return Value::object(ns);
}

Value g_raise_exception(CallArgs& a) {
  ArgBinder b("raise_exception", a, {"message"});
  throw RenderError(b.get(0).to_str(), true);
}

std::string strftime_with(const std::string& format, const std::tm& tm) {
  if (format.empty()) return "";
  for (size_t size = 256; size <= (1u << 20); size *= 4) {
    std::string buf(size, '\0');
    size_t n = std::strftime(buf.data(), buf.size(), format.c_str(), &tm);
    if (n > 0) return buf.substr(0, n);
  }
  return "";
}

}  // namespace

Support test_support(const std::string& name) {
  return tests().count(name) ? Support::kSupported : Support::kUnknown;
}

bool apply_test(const std::string& name, const Value& input, const CallArgs& args) {
  auto it = tests().find(name);
  if (it == tests().end()) throw RenderError("No test named '" + name + "' found.");
  const Test& test = it->second;
  if (test.arity == 0) {
    ArgBinder(name, args, {});
    return test.fn(input, Value());
  }
  ArgBinder b(name, args, {"other"});
  if (!b.has(0)) throw RenderError(name + "() missing 1 required positional argument");
  return test.fn(input, b.get(0));
}

std::optional<Value> global_value(const std::string& name, const Clock& clock) {
  if (name == "range") return Value::callable("range", g_range);
  if (name == "dict") return Value::callable("dict", g_dict);
  if (name == "namespace") return Value::callable("namespace", g_namespace);
  if (name == "raise_exception") return Value::callable("raise_exception", g_raise_exception);
  if (name == "strftime_now")
    return Value::callable("strftime_now", [clock](CallArgs& a) {
      ArgBinder b("strftime_now", a, {"format"});
      if (!b.get(0).is_string()) throw RenderError("strftime() argument 1 must be str");
      return Value(strftime_with(b.get(0).str(), clock()));
    });
  if (name == "lipsum" || name == "cycler" || name == "joiner") {
    std::string what = "the global '" + name + "'";
    return Value::callable(name, [what](CallArgs&) -> Value { throw UnsupportedError(what); });
  }
  return std::nullopt;
}

}  // namespace retain::jinja
