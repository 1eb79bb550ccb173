#include "model/jinja/operators.h"

#include <cmath>

#include "model/jinja/methods.h"
#include "model/jinja/text.h"

namespace retain::jinja {

namespace {

constexpr auto kMaxRepeatBytes = static_cast<int64_t>(kMaxTextBytes);

bool is_int_like(const Value& v) { return v.kind() == Kind::kInt || v.kind() == Kind::kBool; }

[[noreturn]] void unsupported_operands(const std::string& op, const Value& a, const Value& b) {
  throw RenderError("unsupported operand type(s) for " + op + ": '" + a.type_name() + "' and '" +
                    b.type_name() + "'");
}

// a op b on int64, refusing what would need Python's big integers.
template <typename Op>
int64_t checked(Op op, int64_t a, int64_t b) {
  int64_t r = 0;
  if (op(a, b, &r)) throw UnsupportedError("integer arithmetic beyond 64 bits");
  return r;
}
bool add_overflow(int64_t a, int64_t b, int64_t* r) { return __builtin_add_overflow(a, b, r); }
bool sub_overflow(int64_t a, int64_t b, int64_t* r) { return __builtin_sub_overflow(a, b, r); }
bool mul_overflow(int64_t a, int64_t b, int64_t* r) { return __builtin_mul_overflow(a, b, r); }

// An attribute jinja2's sandbox finds on the object itself (a method), or nothing.
std::optional<Value> python_attribute(const Value& obj, const std::string& name) {
  switch (method_kind(obj, name)) {
    case AttrKind::kMethod:
      return Value::callable(obj.type_name() + "." + name,
                             [obj, name](CallArgs& args) { return call_method(obj, name, args); });
    case AttrKind::kUnsafe:
      return Value::undefined(name, "access to attribute '" + name + "' of '" + obj.type_name() +
                                        "' object is unsafe.");
    case AttrKind::kOutside: {
      std::string what = "the method " + obj.type_name() + "." + name;
      return Value::callable(obj.type_name() + "." + name,
                             [what](CallArgs&) -> Value { throw UnsupportedError(what); });
    }
    case AttrKind::kNone:
      break;
  }
  if (obj.kind() == Kind::kObject) {
    if (const Value* v = obj.object().attrs.find(name)) return *v;
  }
  return std::nullopt;
}

Value repeat(const Value& seq, int64_t times) {
  if (times < 0) times = 0;
  if (seq.is_string()) {
    if (static_cast<int64_t>(seq.str().size()) * times > kMaxRepeatBytes)
      throw UnsupportedError("a string repeated beyond 64 MiB");
    std::string out;
    for (int64_t i = 0; i < times; ++i) out += seq.str();
    return Value(std::move(out), seq.safe());
  }
  if (static_cast<int64_t>(seq.items().size()) * times > kMaxRepeatBytes / 16)
    throw UnsupportedError("a list repeated beyond 4 Mi items");
  std::vector<Value> out;
  for (int64_t i = 0; i < times; ++i) out.insert(out.end(), seq.items().begin(), seq.items().end());
  return Value::list(std::move(out), seq.seq_kind());
}

Value add(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.kind() == Kind::kFloat || b.kind() == Kind::kFloat)
      return Value(a.as_float() + b.as_float());
    return Value(checked(add_overflow, a.as_int(), b.as_int()));
  }
  if (a.is_string() && b.is_string()) {
    if (a.str().size() + b.str().size() > kMaxTextBytes)
      throw UnsupportedError("a string beyond 64 MiB");
    // markupsafe: Markup + str escapes the str (and str + Markup the left one).
    if (a.safe() || b.safe())
      return Value(
          (a.safe() ? a.str() : html_escape(a.str())) + (b.safe() ? b.str() : html_escape(b.str())),
          true);
    return Value(a.str() + b.str());
  }
  if (a.is_string() && !a.safe())
    throw RenderError("can only concatenate str (not \"" + b.type_name() + "\") to str");
  if (a.kind() == Kind::kList && a.seq_kind() != SeqKind::kIterator && a.list_data().view.empty()) {
    if (b.kind() != Kind::kList || b.seq_kind() != a.seq_kind() || !b.list_data().view.empty())
      throw RenderError("can only concatenate " + a.type_name() + " (not \"" + b.type_name() +
                        "\") to " + a.type_name());
    std::vector<Value> out = a.items();
    out.insert(out.end(), b.items().begin(), b.items().end());
    return Value::list(std::move(out), a.seq_kind());
  }
  unsupported_operands("+", a, b);
}

Value arithmetic(const std::string& op, const Value& a, const Value& b) {
  if (op == "+") return add(a, b);
  if (op == "*") {
    if (a.is_number() && b.is_number()) {
      if (a.kind() == Kind::kFloat || b.kind() == Kind::kFloat)
        return Value(a.as_float() * b.as_float());
      return Value(checked(mul_overflow, a.as_int(), b.as_int()));
    }
    auto repeatable = [](const Value& v) {
      return v.is_string() || (v.kind() == Kind::kList && v.seq_kind() != SeqKind::kIterator &&
                               v.list_data().view.empty());
    };
    if (repeatable(a) && is_int_like(b)) return repeat(a, b.as_int());
    if (is_int_like(a) && repeatable(b)) return repeat(b, a.as_int());
    if (repeatable(a) || repeatable(b))
      throw RenderError("can't multiply sequence by non-int of type '" +
                        (repeatable(a) ? b : a).type_name() + "'");
    unsupported_operands("*", a, b);
  }
  if (op == "%" && a.is_string()) throw UnsupportedError("the % string formatting operator");
  if (!a.is_number() || !b.is_number()) unsupported_operands(op, a, b);
  const bool floats = a.kind() == Kind::kFloat || b.kind() == Kind::kFloat;
  if (op == "-") {
    if (floats) return Value(a.as_float() - b.as_float());
    return Value(checked(sub_overflow, a.as_int(), b.as_int()));
  }
  if (op == "/") {
    if (b.as_float() == 0) throw RenderError("division by zero");
    return Value(a.as_float() / b.as_float());
  }
  if (op == "//" || op == "%") {
    if (!floats) {
      int64_t x = a.as_int(), y = b.as_int();
      if (y == 0) throw RenderError("integer division or modulo by zero");
      if (x == INT64_MIN && y == -1) throw UnsupportedError("integer arithmetic beyond 64 bits");
      int64_t q = x / y, r = x % y;
      if (r != 0 && ((r < 0) != (y < 0))) {
        r += y;
        q -= 1;
      }
      return Value(op == "//" ? q : r);
    }
    double x = a.as_float(), y = b.as_float();
    if (y == 0) throw RenderError("float divmod()");
    // CPython's float divmod.
    double mod = std::fmod(x, y);
    double div = (x - mod) / y;
    if (mod != 0) {
      if ((y < 0) != (mod < 0)) {
        mod += y;
        div -= 1.0;
      }
    } else {
      mod = std::copysign(0.0, y);
    }
    double floordiv;
    if (div != 0) {
      floordiv = std::floor(div);
      if (div - floordiv > 0.5) floordiv += 1.0;
    } else {
      floordiv = std::copysign(0.0, x / y);
    }
    return Value(op == "//" ? floordiv : mod);
  }
  if (op == "**") {
    if (!floats && b.as_int() >= 0) {
      int64_t result = 1, base = a.as_int();
      for (int64_t e = b.as_int(); e > 0; --e)
        if (__builtin_mul_overflow(result, base, &result))
          throw UnsupportedError("integer arithmetic beyond 64 bits");
      return Value(result);
    }
    double x = a.as_float(), y = b.as_float();
    if (x == 0 && y < 0) throw RenderError("0.0 cannot be raised to a negative power");
    if (x < 0 && y != std::floor(y))
      throw UnsupportedError("complex numbers (a negative base to a fractional power)");
    double r = std::pow(x, y);
    if (std::isinf(r) && std::isfinite(x) && std::isfinite(y))
      throw RenderError("(34, 'Numerical result out of range')");
    return Value(r);
  }
  unsupported_operands(op, a, b);
}

}  // namespace

Value get_attr(const Value& obj, const std::string& name) {
  if (obj.is_undefined()) obj.fail_undefined();
  if (auto attr = python_attribute(obj, name)) return *attr;
  if (obj.kind() == Kind::kDict) {
    if (const Value* v = obj.dict().find(name)) return *v;
  }
  return Value::missing(obj, Value(name), true);
}

Value get_item(const Value& obj, const Value& key) {
  if (obj.is_undefined()) obj.fail_undefined();
  switch (obj.kind()) {
    case Kind::kList:
      if (obj.seq_kind() != SeqKind::kIterator &&
          (obj.list_data().view.empty() || obj.list_data().view == "range") && is_int_like(key)) {
        auto n = static_cast<int64_t>(obj.items().size());
        int64_t i = key.as_int() < 0 ? key.as_int() + n : key.as_int();
        if (i >= 0 && i < n) return obj.items()[static_cast<size_t>(i)];
        return Value::missing(obj, key, false);
      }
      break;
    case Kind::kString:
      if (is_int_like(key)) {
        auto cps = utf8_decode(obj.str());
        auto n = static_cast<int64_t>(cps.size());
        int64_t i = key.as_int() < 0 ? key.as_int() + n : key.as_int();
        if (i >= 0 && i < n)
          return Value(utf8_encode(cps.substr(static_cast<size_t>(i), 1)), obj.safe());
        return Value::missing(obj, key, false);
      }
      break;
    case Kind::kDict:
      check_hashable(key);
      if (const Value* v = obj.dict().find(key)) return *v;
      break;
    default:
      break;
  }
  if (key.is_string())
    if (auto attr = python_attribute(obj, key.str())) return *attr;
  return Value::missing(obj, key, false);
}

Value get_slice(const Value& obj, const Value& start, const Value& stop, const Value& step,
                bool has_start, bool has_stop, bool has_step) {
  // jinja2 slices with Python's own subscript (not its getitem), so a value that cannot be sliced
  // raises rather than giving undefined.
  if (obj.is_undefined()) obj.fail_undefined();
  if (obj.kind() == Kind::kDict) throw RenderError("unhashable type: 'slice'");
  if (obj.kind() == Kind::kList && obj.list_data().view == "range")
    throw UnsupportedError("slicing a range");
  const bool sliceable =
      obj.is_string() || (obj.kind() == Kind::kList && obj.seq_kind() != SeqKind::kIterator &&
                          obj.list_data().view.empty());
  if (!sliceable) throw RenderError("'" + obj.type_name() + "' object is not subscriptable");
  auto bound_ok = [](const Value& v, bool has) { return !has || v.is_none() || is_int_like(v); };
  if (!bound_ok(start, has_start) || !bound_ok(stop, has_stop) || !bound_ok(step, has_step))
    throw RenderError("slice indices must be integers or None or have an __index__ method");
  int64_t st = has_step && !step.is_none() ? step.as_int() : 1;
  if (st == 0) throw RenderError("slice step cannot be zero");
  std::u32string cps;
  int64_t n;
  if (obj.is_string()) {
    cps = utf8_decode(obj.str());
    n = static_cast<int64_t>(cps.size());
  } else {
    n = static_cast<int64_t>(obj.items().size());
  }
  auto adjust = [&](const Value& v, bool has, int64_t dflt) {
    if (!has || v.is_none()) return dflt;
    int64_t i = v.as_int();
    if (i < 0) {
      i += n;
      if (i < 0) i = st < 0 ? -1 : 0;
    } else if (i >= n) {
      i = st < 0 ? n - 1 : n;
    }
    return i;
  };
  int64_t b = adjust(start, has_start, st < 0 ? n - 1 : 0);
  int64_t e = adjust(stop, has_stop, st < 0 ? -1 : n);
  std::vector<int64_t> picks;
  for (int64_t i = b; st > 0 ? i < e : i > e; i += st) picks.push_back(i);
  if (obj.is_string()) {
    std::u32string out;
    for (int64_t i : picks) out += cps[static_cast<size_t>(i)];
    return Value(utf8_encode(out), obj.safe());
  }
  std::vector<Value> out;
  for (int64_t i : picks) out.push_back(obj.items()[static_cast<size_t>(i)]);
  return Value::list(std::move(out), obj.seq_kind());
}

Value call_value(const Value& callee, CallArgs& args) {
  if (callee.is_undefined()) callee.fail_undefined();
  if (callee.kind() != Kind::kCallable)
    throw RenderError("'" + callee.type_name() + "' object is not callable");
  return callee.callable().call(args);
}

Value binary_op(const std::string& op, const Value& a, const Value& b) {
  if (op == "%" && a.is_string()) throw UnsupportedError("the % string formatting operator");
  auto set_view = [](const Value& v) {
    return v.kind() == Kind::kList && v.list_data().view.rfind("dict_", 0) == 0 &&
           v.list_data().view != "dict_values";
  };
  if (op == "-" && (set_view(a) || set_view(b)))
    throw UnsupportedError("set operations on dict views");
  if (a.is_undefined()) a.fail_undefined();
  if (b.is_undefined()) b.fail_undefined();
  return arithmetic(op, a, b);
}

Value unary_op(bool negate, const Value& v) {
  if (v.is_undefined()) v.fail_undefined();
  if (!v.is_number())
    throw RenderError(std::string("bad operand type for unary ") + (negate ? "-" : "+") + ": '" +
                      v.type_name() + "'");
  if (v.kind() == Kind::kFloat) return Value(negate ? -v.as_float() : v.as_float());
  if (negate && v.as_int() == INT64_MIN)
    throw UnsupportedError("integer arithmetic beyond 64 bits");
  return Value(negate ? -v.as_int() : v.as_int());
}

}  // namespace retain::jinja
