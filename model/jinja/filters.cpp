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

// ---- helpers ----

// jinja2's soft_str: strings (Markup included) as they are, anything else through str().
Value soft_str(const Value& v) { return v.is_string() ? v : Value(v.to_str()); }

Value lower_if_string(const Value& v) {
  return v.is_string() ? Value(py_lower(v.str()), v.safe()) : v;
}

// jinja2's make_attrgetter: "a.b.0" looked up item by item (getitem, which falls back to
// attributes), optionally lower-cased for case-insensitive comparisons.
struct AttrGetter {
  std::vector<Value> parts;
  bool ignore_case = false;
  std::optional<Value> fallback;

  AttrGetter(const Value& attribute, bool ignore_case_, std::optional<Value> fallback_ = {})
      : ignore_case(ignore_case_), fallback(std::move(fallback_)) {
    if (attribute.is_undefined() || attribute.is_none()) return;
    if (!attribute.is_string()) {
      parts.push_back(attribute);
      return;
    }
    for (const auto& p : py_split(attribute.str(), std::string("."), -1, false)) {
      auto index = parse_digits(p);
      parts.push_back(index ? Value(*index) : Value(p));
    }
  }
  Value operator()(const Value& item) const {
    Value v = item;
    for (const auto& p : parts) {
      v = get_item(v, p);
      if (fallback && v.is_undefined()) {
        v = *fallback;
        break;
      }
    }
    return ignore_case ? lower_if_string(v) : v;
  }
};

// jinja2's make_multi_attrgetter (sort): "a,b" gives a key of several parts.
std::vector<AttrGetter> multi_getter(const Value& attribute, bool ignore_case) {
  std::vector<AttrGetter> getters;
  if (attribute.is_string()) {
    for (const auto& part : py_split(attribute.str(), std::string(","), -1, false))
      getters.emplace_back(Value(part), ignore_case);
  } else {
    getters.emplace_back(attribute, ignore_case);
  }
  return getters;
}

bool key_less(const std::vector<Value>& a, const std::vector<Value>& b) {
  for (size_t i = 0; i < a.size(); ++i)
    if (!py_equal(a[i], b[i])) return py_less(a[i], b[i]);
  return false;
}

int64_t int_arg(const Value& v, const std::string& what) {
  if (v.kind() != Kind::kInt && v.kind() != Kind::kBool)
    throw RenderError(what + ": '" + v.type_name() +
                      "' object cannot be interpreted as an integer");
  return v.as_int();
}

Value iterator(std::vector<Value> items) {
  return Value::list(std::move(items), SeqKind::kIterator);
}

// Python's int(str, base 10): surrounding whitespace and single underscores between digits.
std::optional<int64_t> parse_int(const std::string& text) {
  std::string s = py_strip(text, std::nullopt, true, true);
  std::string digits;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (c == '_' && i > 0 && i + 1 < s.size() && ::isdigit(s[i - 1]) && ::isdigit(s[i + 1]))
      continue;
    digits += c;
  }
  if (digits.empty()) return std::nullopt;
  size_t start = digits[0] == '+' || digits[0] == '-' ? 1 : 0;
  if (start == digits.size() ||
      !std::all_of(digits.begin() + static_cast<long>(start), digits.end(), ::isdigit))
    return std::nullopt;
  errno = 0;
  long long v = std::strtoll(digits.c_str(), nullptr, 10);
  if (errno == ERANGE) throw UnsupportedError("integers beyond 64 bits");
  return v;
}

// Python's float(str).
std::optional<double> parse_float(const std::string& text) {
  std::string s = py_strip(text, std::nullopt, true, true);
  if (s.empty()) return std::nullopt;
  std::string lower = py_lower(s);
  std::string body = lower[0] == '+' || lower[0] == '-' ? lower.substr(1) : lower;
  if (body == "inf" || body == "infinity" || body == "nan") {
    double v = body == "nan" ? NAN : INFINITY;
    return lower[0] == '-' ? -v : v;
  }
  if (body.find_first_not_of("0123456789.e+-_") != std::string::npos) return std::nullopt;
  s.erase(std::remove(s.begin(), s.end(), '_'), s.end());
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size()) return std::nullopt;
  return v;
}

double python_round(double x, int64_t digits) {
  if (!std::isfinite(x)) return x;
  if (digits >= 0) {
    char buf[512];
    std::snprintf(buf, sizeof buf, "%.*f", static_cast<int>(std::min<int64_t>(digits, 300)), x);
    return std::strtod(buf, nullptr);
  }
  double scale = std::pow(10.0, static_cast<double>(-digits));
  return std::nearbyint(x / scale) * scale;
}

// ---- filters ----

using Filter = Value (*)(const Value&, const CallArgs&);

Value f_abs(const Value& v, const CallArgs& a) {
  ArgBinder("abs", a, {});
  if (!v.is_number()) throw RenderError("bad operand type for abs(): '" + v.type_name() + "'");
  if (v.kind() == Kind::kFloat) return Value(std::fabs(v.as_float()));
  if (v.as_int() == INT64_MIN) throw UnsupportedError("integer arithmetic beyond 64 bits");
  return Value(v.as_int() < 0 ? -v.as_int() : v.as_int());
}

Value f_attr(const Value& v, const CallArgs& a) {
  ArgBinder b("attr", a, {"name"});
  std::string name = b.get(0).to_str();
  if (v.is_undefined()) v.fail_undefined();
  switch (method_kind(v, name)) {
    case AttrKind::kNone:
      if (v.kind() == Kind::kObject)
        if (const Value* found = v.object().attrs.find(name)) return *found;
      return Value::missing(v, Value(name), true);
    default:
      return get_attr(v, name);
  }
}

Value f_batch(const Value& v, const CallArgs& a) {
  ArgBinder b("batch", a, {"linecount", "fill_with"});
  const int64_t n = int_arg(b.get(0), "batch");
  std::vector<Value> out, chunk;
  for (const auto& item : py_iterate(v)) {
    if (static_cast<int64_t>(chunk.size()) == n) {
      out.push_back(Value::list(std::move(chunk)));
      chunk.clear();
    }
    chunk.push_back(item);
  }
  if (!chunk.empty()) {
    if (b.has(1) && !b.get(1).is_none())
      while (static_cast<int64_t>(chunk.size()) < n) chunk.push_back(b.get(1));
    out.push_back(Value::list(std::move(chunk)));
  }
  return iterator(std::move(out));
}

Value f_capitalize(const Value& v, const CallArgs& a) {
  ArgBinder("capitalize", a, {});
  Value s = soft_str(v);
  return Value(py_capitalize(s.str()), s.safe());
}

Value f_center(const Value& v, const CallArgs& a) {
  ArgBinder b("center", a, {"width"});
  CallArgs m;
  m.positional.push_back(b.get_or(0, Value(80)));
  return call_method(soft_str(v), "center", m);
}

Value f_length(const Value& v, const CallArgs& a) {
  ArgBinder("length", a, {});
  return Value(py_len(v));
}

Value f_default(const Value& v, const CallArgs& a) {
  ArgBinder b("default", a, {"default_value", "boolean"});
  if (v.is_undefined() || (b.get_or(1, Value(false)).truthy() && !v.truthy()))
    return b.get_or(0, Value(""));
  return v;
}

Value f_dictsort(const Value& v, const CallArgs& a) {
  ArgBinder b("dictsort", a, {"case_sensitive", "by", "reverse"});
  if (v.kind() != Kind::kDict)
    throw RenderError("'" + v.type_name() + "' object has no attribute 'items'");
  bool case_sensitive = b.get_or(0, Value(false)).truthy();
  std::string by = b.get_or(1, Value("key")).to_str();
  if (by != "key" && by != "value")
    throw RenderError("You can only sort by either \"key\" or \"value\"");
  bool reverse = b.get_or(2, Value(false)).truthy();
  std::vector<std::pair<Value, Value>> pairs;  // (sort key, item)
  for (const auto& [k, val] : v.dict().entries()) {
    const Value& key = by == "key" ? k : val;
    pairs.emplace_back(case_sensitive ? key : lower_if_string(key),
                       Value::list({k, val}, SeqKind::kTuple));
  }
  std::stable_sort(pairs.begin(), pairs.end(), [&](const auto& x, const auto& y) {
    return reverse ? py_less(y.first, x.first) : py_less(x.first, y.first);
  });
  std::vector<Value> out;
  for (auto& p : pairs) out.push_back(std::move(p.second));
  return Value::list(std::move(out));
}

Value f_escape(const Value& v, const CallArgs& a) {
  ArgBinder("escape", a, {});
  if (v.is_string() && v.safe()) return v;
  return Value(html_escape(v.to_str()), true);
}

Value f_forceescape(const Value& v, const CallArgs& a) {
  ArgBinder("forceescape", a, {});
  return Value(html_escape(v.to_str()), true);
}

Value f_first(const Value& v, const CallArgs& a) {
  ArgBinder("first", a, {});
  auto items = py_iterate(v);
  if (items.empty()) return Value::undefined("first", "No first item, sequence was empty.");
  return items.front();
}

Value f_last(const Value& v, const CallArgs& a) {
  ArgBinder("last", a, {});
  if (v.kind() == Kind::kList && v.seq_kind() == SeqKind::kIterator)
    throw RenderError("'generator' object is not reversible");
  auto items = py_iterate(v);
  if (items.empty()) return Value::undefined("last", "No last item, sequence was empty.");
  return items.back();
}

Value f_float(const Value& v, const CallArgs& a) {
  ArgBinder b("float", a, {"default"});
  if (v.is_undefined()) v.fail_undefined();  // Undefined.__float__ raises
  Value fallback = b.get_or(0, Value(0.0));
  if (v.is_number()) return Value(v.as_float());
  if (v.is_string()) {
    auto f = parse_float(v.str());
    return f ? Value(*f) : fallback;
  }
  return fallback;
}

Value f_int(const Value& v, const CallArgs& a) {
  ArgBinder b("int", a, {"default", "base"});
  Value fallback = b.get_or(0, Value(0));
  if (b.has(1) && b.get(1).as_int() != 10) throw UnsupportedError("the int filter with a base");
  if (v.is_undefined()) v.fail_undefined();  // Undefined.__int__ raises
  if (v.kind() == Kind::kInt || v.kind() == Kind::kBool) return Value(v.as_int());
  if (v.kind() == Kind::kFloat) {
    if (!std::isfinite(v.as_float()))
      throw RenderError("cannot convert float infinity or NaN to integer");
    return Value(static_cast<int64_t>(std::trunc(v.as_float())));
  }
  if (v.is_string()) {
    if (auto i = parse_int(v.str())) return Value(*i);
    // jinja2 then tries int(float(value)): "42.23"|int is 42.
    if (auto f = parse_float(v.str()))
      if (std::isfinite(*f)) return Value(static_cast<int64_t>(std::trunc(*f)));
  }
  return fallback;
}

Value f_indent(const Value& v, const CallArgs& a) {
  ArgBinder b("indent", a, {"width", "first", "blank"});
  Value width = b.get_or(0, Value(4));
  std::string indention =
      width.is_string()
          ? width.str()
          : std::string(static_cast<size_t>(std::max<int64_t>(0, int_arg(width, "indent"))), ' ');
  if (v.is_undefined()) v.fail_undefined();
  if (!v.is_string())
    throw RenderError("unsupported operand type(s) for +=: '" + v.type_name() + "' and 'str'");
  std::string s = v.str() + "\n";
  auto lines = py_splitlines(s, false);
  std::string rv;
  if (b.get_or(2, Value(false)).truthy()) {
    for (size_t i = 0; i < lines.size(); ++i) rv += (i ? "\n" + indention : "") + lines[i];
  } else {
    rv = lines.empty() ? "" : lines[0];
    for (size_t i = 1; i < lines.size(); ++i)
      rv += "\n" + (lines[i].empty() ? lines[i] : indention + lines[i]);
  }
  if (b.get_or(1, Value(false)).truthy()) rv = indention + rv;
  return Value(rv, v.safe());
}

Value f_items(const Value& v, const CallArgs& a) {
  ArgBinder("items", a, {});
  if (v.is_undefined()) return iterator({});
  if (v.kind() != Kind::kDict) throw RenderError("Can only get item pairs from a mapping.");
  std::vector<Value> out;
  for (const auto& [k, val] : v.dict().entries())
    out.push_back(Value::list({k, val}, SeqKind::kTuple));
  return iterator(std::move(out));
}

Value f_join(const Value& v, const CallArgs& a) {
  ArgBinder b("join", a, {"d", "attribute"});
  std::string sep = b.get_or(0, Value("")).to_str();
  std::optional<AttrGetter> getter;
  if (b.has(1)) getter.emplace(b.get(1), false);
  std::string out;
  bool first = true;
  for (const auto& item : py_iterate(v)) {
    if (!first) out += sep;
    first = false;
    out += (getter ? (*getter)(item) : item).to_str();
  }
  return Value(out);
}

Value f_list(const Value& v, const CallArgs& a) {
  ArgBinder("list", a, {});
  return Value::list(py_iterate(v));
}

Value f_lower(const Value& v, const CallArgs& a) {
  ArgBinder("lower", a, {});
  Value s = soft_str(v);
  return Value(py_lower(s.str()), s.safe());
}

Value f_upper(const Value& v, const CallArgs& a) {
  ArgBinder("upper", a, {});
  Value s = soft_str(v);
  return Value(py_upper(s.str()), s.safe());
}

Value f_map(const Value& v, const CallArgs& a) {
  std::function<Value(const Value&)> fn;
  if (a.positional.empty() && !a.keywords.empty() &&
      std::any_of(a.keywords.begin(), a.keywords.end(),
                  [](const auto& k) { return k.first == "attribute"; })) {
    ArgBinder b("map", a, {"attribute", "default"});
    std::optional<Value> fallback;
    if (b.has(1) && !b.get(1).is_none()) fallback = b.get(1);
    AttrGetter getter(b.get(0), false, fallback);
    fn = getter;
  } else {
    if (a.positional.empty()) throw RenderError("map requires a filter argument");
    std::string name = a.positional[0].to_str();
    CallArgs rest;
    rest.positional.assign(a.positional.begin() + 1, a.positional.end());
    rest.keywords = a.keywords;
    fn = [name, rest](const Value& item) { return apply_filter(name, item, rest); };
  }
  std::vector<Value> out;
  if (v.truthy())
    for (const auto& item : py_iterate(v)) out.push_back(fn(item));
  return iterator(std::move(out));
}

Value min_or_max(const Value& v, const CallArgs& a, bool max) {
  ArgBinder b(max ? "max" : "min", a, {"case_sensitive", "attribute"});
  AttrGetter key(b.get(1), !b.get_or(0, Value(false)).truthy());
  auto items = py_iterate(v);
  if (items.empty())
    return Value::undefined(max ? "max" : "min", "No aggregated item, sequence was empty.");
  size_t best = 0;
  Value best_key = key(items[0]);
  for (size_t i = 1; i < items.size(); ++i) {
    Value k = key(items[i]);
    if (max ? py_less(best_key, k) : py_less(k, best_key)) {
      best = i;
      best_key = k;
    }
  }
  return items[best];
}
Value f_min(const Value& v, const CallArgs& a) { return min_or_max(v, a, false); }
Value f_max(const Value& v, const CallArgs& a) { return min_or_max(v, a, true); }

// select / reject / selectattr / rejectattr.
Value select_or_reject(const Value& v, const CallArgs& a, bool keep_matches, bool lookup_attr) {
  std::vector<Value> out;
  if (!v.truthy()) return iterator(std::move(out));
  size_t off = 0;
  std::optional<AttrGetter> getter;
  if (lookup_attr) {
    if (a.positional.empty()) throw RenderError("Missing parameter for attribute name");
    getter.emplace(a.positional[0], false);
    off = 1;
  }
  std::optional<std::string> test;
  CallArgs test_args;
  if (a.positional.size() > off) {
    test = a.positional[off].to_str();
    test_args.positional.assign(a.positional.begin() + static_cast<long>(off) + 1,
                                a.positional.end());
    test_args.keywords = a.keywords;
  }
  for (const auto& item : py_iterate(v)) {
    Value x = getter ? (*getter)(item) : item;
    bool hit = test ? apply_test(*test, x, test_args) : x.truthy();
    if (hit == keep_matches) out.push_back(item);
  }
  return iterator(std::move(out));
}
Value f_select(const Value& v, const CallArgs& a) { return select_or_reject(v, a, true, false); }
Value f_reject(const Value& v, const CallArgs& a) { return select_or_reject(v, a, false, false); }
Value f_selectattr(const Value& v, const CallArgs& a) { return select_or_reject(v, a, true, true); }
Value f_rejectattr(const Value& v, const CallArgs& a) {
  return select_or_reject(v, a, false, true);
}

Value f_replace(const Value& v, const CallArgs& a) {
  ArgBinder b("replace", a, {"old", "new", "count"});
  CallArgs m;
  m.positional = {Value(b.get(0).to_str()), Value(b.get(1).to_str())};
  if (b.has(2) && !b.get(2).is_none()) m.positional.push_back(b.get(2));
  return call_method(Value(v.to_str()), "replace", m);
}

Value f_reverse(const Value& v, const CallArgs& a) {
  ArgBinder("reverse", a, {});
  if (v.is_string()) {
    auto cps = utf8_decode(v.str());
    std::reverse(cps.begin(), cps.end());
    return Value(utf8_encode(cps), v.safe());
  }
  auto items = py_iterate(v);
  std::reverse(items.begin(), items.end());
  // reversed() of a list is an iterator; of anything else jinja2 builds a list.
  if (v.kind() == Kind::kList && v.seq_kind() != SeqKind::kIterator)
    return iterator(std::move(items));
  return Value::list(std::move(items));
}

Value f_round(const Value& v, const CallArgs& a) {
  ArgBinder b("round", a, {"precision", "method"});
  int64_t precision = int_arg(b.get_or(0, Value(0)), "round");
  std::string method = b.get_or(1, Value("common")).to_str();
  if (method != "common" && method != "ceil" && method != "floor")
    throw RenderError("method must be common, ceil or floor");
  if (!v.is_number())
    throw RenderError("type " + v.type_name() + " doesn't define __round__ method");
  if (method == "common") {
    if (v.kind() != Kind::kFloat) {
      if (precision >= 0) return Value(v.as_int());
      throw UnsupportedError("rounding an integer to negative digits");
    }
    return Value(python_round(v.as_float(), precision));
  }
  double scale = std::pow(10.0, static_cast<double>(precision));
  double x = v.as_float() * scale;
  return Value((method == "ceil" ? std::ceil(x) : std::floor(x)) / scale);
}

Value f_safe(const Value& v, const CallArgs& a) {
  ArgBinder("safe", a, {});
  return Value(v.to_str(), true);
}

Value f_slice(const Value& v, const CallArgs& a) {
  ArgBinder b("slice", a, {"slices", "fill_with"});
  const int64_t slices = int_arg(b.get(0), "slice");
  if (slices == 0) throw RenderError("integer division or modulo by zero");
  const auto seq = py_iterate(v);
  const auto length = static_cast<int64_t>(seq.size());
  // Python's floor division and modulo, as jinja2's do_slice computes them.
  const int64_t per = binary_op("//", Value(length), Value(slices)).as_int();
  const int64_t extra = binary_op("%", Value(length), Value(slices)).as_int();
  std::vector<Value> out;
  int64_t offset = 0;
  for (int64_t k = 0; k < slices; ++k) {
    const int64_t start = offset + k * per;
    if (k < extra) ++offset;
    const int64_t end = offset + (k + 1) * per;
    std::vector<Value> part;
    for (int64_t i = std::max<int64_t>(start, 0); i < std::min(end, length); ++i)
      part.push_back(seq[static_cast<size_t>(i)]);
    if (b.has(1) && !b.get(1).is_none() && k >= extra) part.push_back(b.get(1));
    out.push_back(Value::list(std::move(part)));
  }
  return iterator(std::move(out));
}

Value f_sort(const Value& v, const CallArgs& a) {
  ArgBinder b("sort", a, {"reverse", "case_sensitive", "attribute"});
  bool reverse = b.get_or(0, Value(false)).truthy();
  auto getters = multi_getter(b.get(2), !b.get_or(1, Value(false)).truthy());
  std::vector<std::pair<std::vector<Value>, Value>> keyed;
  for (const auto& item : py_iterate(v)) {
    std::vector<Value> key;
    for (const auto& g : getters) key.push_back(g(item));
    keyed.emplace_back(std::move(key), item);
  }
  std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& x, const auto& y) {
    return reverse ? key_less(y.first, x.first) : key_less(x.first, y.first);
  });
  std::vector<Value> out;
  for (auto& k : keyed) out.push_back(std::move(k.second));
  return Value::list(std::move(out));
}

Value f_string(const Value& v, const CallArgs& a) {
  ArgBinder("string", a, {});
  return soft_str(v);
}

Value f_sum(const Value& v, const CallArgs& a) {
  ArgBinder b("sum", a, {"attribute", "start"});
  std::optional<AttrGetter> getter;
  if (b.has(0) && !b.get(0).is_none()) getter.emplace(b.get(0), false);
  Value total = b.get_or(1, Value(0));
  for (const auto& item : py_iterate(v))
    total = binary_op("+", total, getter ? (*getter)(item) : item);
  return total;
}

Value f_title(const Value& v, const CallArgs& a) {
  ArgBinder("title", a, {});
  // jinja2 splits on runs of [-\s({[<] and upper-cases the first code point of every piece.
  auto s = utf8_decode(soft_str(v).str());
  std::u32string out;
  auto is_sep = [](char32_t c) {
    return c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || py_isspace(c);
  };
  size_t i = 0;
  while (i < s.size()) {
    size_t j = i;
    bool sep = is_sep(s[i]);
    while (j < s.size() && is_sep(s[j]) == sep) ++j;
    std::string piece = utf8_encode(s.substr(i, j - i));
    auto cps = utf8_decode(piece);
    std::string head = utf8_encode(cps.substr(0, 1));
    std::string tail = utf8_encode(cps.substr(1));
    out += utf8_decode(py_upper(head) + py_lower(tail));
    i = j;
  }
  return Value(utf8_encode(out));
}

Value f_tojson(const Value& v, const CallArgs& a) {
  ArgBinder b("tojson", a, {"ensure_ascii", "indent", "separators", "sort_keys"});
  JsonFormat f;
  f.ensure_ascii = b.get_or(0, Value(false)).truthy();
  const Value& indent = b.get(1);
  if (indent.is_string())
    f.indent_text = indent.str();
  else if (indent.kind() == Kind::kInt || indent.kind() == Kind::kBool)
    f.indent = static_cast<int>(std::max<int64_t>(0, indent.as_int()));
  else if (!indent.is_undefined() && !indent.is_none())
    throw UnsupportedError("a tojson indent of type " + indent.type_name());
  const Value& seps = b.get(2);
  if (seps.kind() == Kind::kList && seps.seq_kind() != SeqKind::kIterator &&
      seps.items().size() == 2 && seps.items()[0].is_string() && seps.items()[1].is_string())
    f.separators = std::make_pair(seps.items()[0].str(), seps.items()[1].str());
  else if (!seps.is_undefined() && !seps.is_none())
    throw RenderError("tojson separators must be a pair of strings");
  f.sort_keys = b.get_or(3, Value(false)).truthy();
  return Value(to_json(v, f));
}

Value f_trim(const Value& v, const CallArgs& a) {
  ArgBinder b("trim", a, {"chars"});
  Value s = soft_str(v);
  std::optional<std::string> chars;
  if (b.has(0) && !b.get(0).is_none()) {
    if (!b.get(0).is_string()) throw RenderError("strip arg must be None or str");
    chars = b.get(0).str();
  }
  return Value(py_strip(s.str(), chars, true, true), s.safe());
}

Value f_unique(const Value& v, const CallArgs& a) {
  ArgBinder b("unique", a, {"case_sensitive", "attribute"});
  AttrGetter key(b.get(1), !b.get_or(0, Value(false)).truthy());
  std::vector<Value> seen, out;
  for (const auto& item : py_iterate(v)) {
    Value k = key(item);
    if (k.kind() == Kind::kDict || (k.kind() == Kind::kList && k.seq_kind() != SeqKind::kTuple))
      throw RenderError("unhashable type: '" + k.type_name() + "'");
    if (std::any_of(seen.begin(), seen.end(), [&](const Value& s) { return py_equal(s, k); }))
      continue;
    seen.push_back(k);
    out.push_back(item);
  }
  return iterator(std::move(out));
}

Value f_wordcount(const Value& v, const CallArgs& a) {
  ArgBinder("wordcount", a, {});
  int64_t words = 0;
  bool in_word = false;
  for (char32_t cp : utf8_decode(soft_str(v).str())) {
    std::string one = utf8_encode(std::u32string(1, cp));
    bool w = cp == '_' || py_isalnum(one);
    if (w && !in_word) ++words;
    in_word = w;
  }
  return Value(words);
}

const std::map<std::string, Filter>& filters() {
  static const std::map<std::string, Filter> table = {{"abs", f_abs},
                                                      {"batch", f_batch},
                                                      {"attr", f_attr},
                                                      {"capitalize", f_capitalize},
                                                      {"center", f_center},
                                                      {"count", f_length},
                                                      {"d", f_default},
                                                      {"default", f_default},
                                                      {"dictsort", f_dictsort},
                                                      {"e", f_escape},
                                                      {"escape", f_escape},
                                                      {"first", f_first},
                                                      {"float", f_float},
                                                      {"forceescape", f_forceescape},
                                                      {"indent", f_indent},
                                                      {"int", f_int},
                                                      {"items", f_items},
                                                      {"join", f_join},
                                                      {"last", f_last},
                                                      {"length", f_length},
                                                      {"list", f_list},
                                                      {"lower", f_lower},
                                                      {"map", f_map},
                                                      {"max", f_max},
                                                      {"min", f_min},
                                                      {"reject", f_reject},
                                                      {"rejectattr", f_rejectattr},
                                                      {"replace", f_replace},
                                                      {"reverse", f_reverse},
                                                      {"round", f_round},
                                                      {"safe", f_safe},
                                                      {"select", f_select},
                                                      {"selectattr", f_selectattr},
                                                      {"slice", f_slice},
                                                      {"sort", f_sort},
                                                      {"string", f_string},
                                                      {"sum", f_sum},
                                                      {"title", f_title},
                                                      {"tojson", f_tojson},
                                                      {"trim", f_trim},
                                                      {"unique", f_unique},
                                                      {"upper", f_upper},
                                                      {"wordcount", f_wordcount}};
  return table;
}

const std::set<std::string> kFiltersOutside = {
    "filesizeformat", "format",    "groupby", "pprint",   "random", "striptags",
    "truncate",       "urlencode", "urlize",  "wordwrap", "xmlattr"};

}  // namespace

Support filter_support(const std::string& name) {
  if (filters().count(name)) return Support::kSupported;
  return kFiltersOutside.count(name) ? Support::kOutsideSubset : Support::kUnknown;
}

Value apply_filter(const std::string& name, const Value& input, const CallArgs& args) {
  auto it = filters().find(name);
  if (it == filters().end()) {
    if (kFiltersOutside.count(name)) throw UnsupportedError("the filter '" + name + "'");
    throw RenderError("No filter named '" + name + "' found.");
  }
  return it->second(input, args);
}

}  // namespace retain::jinja
