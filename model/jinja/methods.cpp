#include "model/jinja/methods.h"

#include <algorithm>
#include <set>

#include "model/jinja/operators.h"
#include "model/jinja/text.h"

namespace retain::jinja {

namespace {

const std::set<std::string> kStrMethods = {
    "capitalize", "center",       "count",        "endswith", "find",    "format",
    "index",      "isalnum",      "isalpha",      "isdigit",  "islower", "isnumeric",
    "isspace",    "isupper",      "join",         "ljust",    "lower",   "lstrip",
    "partition",  "removeprefix", "removesuffix", "replace",  "rfind",   "rindex",
    "rjust",      "rpartition",   "rsplit",       "rstrip",   "split",   "splitlines",
    "startswith", "strip",        "swapcase",     "title",    "upper",   "zfill"};
const std::set<std::string> kStrOutside = {
    "casefold",    "encode",  "expandtabs", "format_map", "isascii", "isdecimal", "isidentifier",
    "isprintable", "istitle", "maketrans",  "translate",  "escape",  "unescape",  "striptags"};
const std::set<std::string> kListUnsafe = {"append", "clear",  "extend",  "insert",
                                           "pop",    "remove", "reverse", "sort"};
const std::set<std::string> kDictMethods = {"get", "items", "keys", "values", "copy"};
const std::set<std::string> kDictUnsafe = {"clear", "pop", "popitem", "setdefault", "update"};
const std::set<std::string> kNumberAttrs = {
    "real",       "imag",       "conjugate", "bit_length",  "bit_count",
    "to_bytes",   "from_bytes", "numerator", "denominator", "as_integer_ratio",
    "is_integer", "hex",        "fromhex"};
const std::set<std::string> kGeneratorAttrs = {"send", "throw", "close"};

const std::string& str_arg(const Value& v, const std::string& what) {
  if (!v.is_string()) throw RenderError(what + " must be str, not " + v.type_name());
  return v.str();
}

// Python's slice bounds for the optional start/end arguments of find, count, startswith.
std::pair<size_t, size_t> bounds(size_t n, const ArgBinder& b, size_t start_at) {
  auto clamp = [&](const Value& v, int64_t dflt) {
    if (v.is_undefined() || v.is_none()) return dflt;
    if (v.kind() != Kind::kInt && v.kind() != Kind::kBool)
      throw RenderError("slice indices must be integers or None");
    int64_t i = v.as_int();
    if (i < 0) i += static_cast<int64_t>(n);
    return std::clamp<int64_t>(i, 0, static_cast<int64_t>(n));
  };
  auto s = static_cast<size_t>(clamp(b.get(start_at), 0));
  auto e = static_cast<size_t>(clamp(b.get(start_at + 1), static_cast<int64_t>(n)));
  return {s, e};
}

Value markup_if(const Value& self, std::string s) { return Value(std::move(s), self.safe()); }

Value strings(const Value& self, const std::vector<std::string>& parts, SeqKind kind) {
  std::vector<Value> items;
  for (const auto& p : parts) items.push_back(markup_if(self, p));
  return Value::list(std::move(items), kind);
}

std::optional<std::string> chars_arg(const ArgBinder& b, size_t i, const std::string& what) {
  const Value& v = b.get(i);
  if (v.is_undefined() || v.is_none()) return std::nullopt;
  if (!v.is_string()) throw RenderError(what + " arg must be None or str");
  return v.str();
}

std::string padded(const std::string& s, int64_t width, const std::string& fill, int where) {
  auto n = static_cast<int64_t>(code_point_count(s));
  if (width <= n) return s;
  int64_t marg = width - n;
  int64_t left = where < 0 ? 0 : where > 0 ? marg : marg / 2 + (marg & width & 1);
  std::string out;
  for (int64_t i = 0; i < left; ++i) out += fill;
  out += s;
  for (int64_t i = 0; i < marg - left; ++i) out += fill;
  return out;
}

Value str_method(const Value& self, const std::string& name, const CallArgs& args) {
  const std::string& s = self.str();
  const std::string what = "str." + name;
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    ArgBinder b(what, args, {"chars"});
    return markup_if(self, py_strip(s, chars_arg(b, 0, name), name != "rstrip", name != "lstrip"));
  }
  if (name == "split" || name == "rsplit") {
    ArgBinder b(what, args, {"sep", "maxsplit"});
    std::optional<std::string> sep;
    if (b.has(0) && !b.get(0).is_none()) {
      sep = str_arg(b.get(0), "sep");
      if (sep->empty()) throw RenderError("empty separator");
    }
    Value maxsplit = b.get_or(1, Value(-1));
    if (maxsplit.kind() != Kind::kInt && maxsplit.kind() != Kind::kBool)
      throw RenderError("'" + maxsplit.type_name() +
                        "' object cannot be interpreted as an integer");
    return strings(self, py_split(s, sep, static_cast<long>(maxsplit.as_int()), name == "rsplit"),
                   SeqKind::kList);
  }
  if (name == "splitlines") {
    ArgBinder b(what, args, {"keepends"});
    return strings(self, py_splitlines(s, b.get_or(0, Value(false)).truthy()), SeqKind::kList);
  }
  if (name == "startswith" || name == "endswith") {
    ArgBinder b(what, args, {"prefix", "start", "end"});
    auto cps = utf8_decode(s);
    const auto range = bounds(cps.size(), b, 1);
    const size_t from = range.first, to = range.second;
    std::u32string window = from <= to ? cps.substr(from, to - from) : std::u32string();
    auto test = [&](const Value& p) {
      if (!p.is_string())
        throw RenderError(name + " first arg must be str or a tuple of str, not " + p.type_name());
      auto pre = utf8_decode(p.str());
      if (from > to) return false;
      if (pre.size() > window.size()) return false;
      return name == "startswith"
                 ? window.compare(0, pre.size(), pre) == 0
                 : window.compare(window.size() - pre.size(), pre.size(), pre) == 0;
    };
    const Value& prefix = b.get(0);
    if (prefix.kind() == Kind::kList && prefix.seq_kind() == SeqKind::kTuple) {
      for (const auto& p : prefix.items())
        if (test(p)) return Value(true);
      return Value(false);
    }
    return Value(test(prefix));
  }
  if (name == "replace") {
    ArgBinder b(what, args, {"old", "new", "count"});
    std::string old_s = str_arg(b.get(0), "replace() argument 1");
    std::string new_s = str_arg(b.get(1), "replace() argument 2");
    if (self.safe()) {
      if (!b.get(0).safe()) old_s = html_escape(old_s);
      if (!b.get(1).safe()) new_s = html_escape(new_s);
    }
    int64_t count = b.get_or(2, Value(-1)).as_int();
    std::string out;
    if (old_s.empty()) {
      // Python inserts `new` before every code point and at the end.
      auto cps = utf8_decode(s);
      int64_t done = 0;
      for (char32_t cp : cps) {
        if (count < 0 || done < count) {
          out += new_s;
          ++done;
        }
        append_utf8(out, cp);
      }
      if (count < 0 || done < count) out += new_s;
      return markup_if(self, out);
    }
    size_t start = 0;
    int64_t done = 0;
    while (count < 0 || done < count) {
      size_t at = s.find(old_s, start);
      if (at == std::string::npos) break;
      out.append(s, start, at - start);
      out += new_s;
      start = at + old_s.size();
      ++done;
    }
    out.append(s, start, std::string::npos);
    return markup_if(self, out);
  }
  if (name == "find" || name == "rfind" || name == "index" || name == "rindex" || name == "count") {
    ArgBinder b(what, args, {"sub", "start", "end"});
    auto sub = utf8_decode(str_arg(b.get(0), "must be str"));
    auto cps = utf8_decode(s);
    const auto range = bounds(cps.size(), b, 1);
    const size_t from = range.first, to = range.second;
    if (name == "count") {
      if (from > to) return Value(0);
      if (sub.empty()) return Value(static_cast<int64_t>(to - from + 1));
      int64_t n = 0;
      for (size_t i = from; i + sub.size() <= to;) {
        if (cps.compare(i, sub.size(), sub) == 0) {
          ++n;
          i += sub.size();
        } else {
          ++i;
        }
      }
      return Value(n);
    }
    int64_t found = -1;
    if (from <= to && sub.size() <= to - from) {
      if (name == "find" || name == "index") {
        for (size_t i = from; i + sub.size() <= to; ++i)
          if (cps.compare(i, sub.size(), sub) == 0) {
            found = static_cast<int64_t>(i);
            break;
          }
      } else {
        for (size_t i = to - sub.size() + 1; i-- > from;)
          if (cps.compare(i, sub.size(), sub) == 0) {
            found = static_cast<int64_t>(i);
            break;
          }
      }
    }
    if (found < 0 && (name == "index" || name == "rindex"))
      throw RenderError("substring not found");
    return Value(found);
  }
  if (name == "upper" || name == "lower" || name == "title" || name == "capitalize" ||
      name == "swapcase") {
    ArgBinder b(what, args, {});
    std::string r = name == "upper"        ? py_upper(s)
                    : name == "lower"      ? py_lower(s)
                    : name == "title"      ? py_title(s)
                    : name == "capitalize" ? py_capitalize(s)
                                           : py_swapcase(s);
    return markup_if(self, r);
  }
  if (name.rfind("is", 0) == 0) {
    ArgBinder b(what, args, {});
    if (name == "isalnum") return Value(py_isalnum(s));
    if (name == "isalpha") return Value(py_isalpha(s));
    if (name == "isdigit") return Value(py_isdigit(s));
    if (name == "isnumeric") return Value(py_isnumeric(s));
    if (name == "islower") return Value(py_islower(s));
    if (name == "isupper") return Value(py_isupper(s));
    return Value(py_isspace_str(s));
  }
  if (name == "join") {
    ArgBinder b(what, args, {"iterable"});
    std::string out;
    size_t i = 0;
    for (const auto& item : py_iterate(b.get(0))) {
      if (!item.is_string())
        throw RenderError("sequence item " + std::to_string(i) + ": expected str instance, " +
                          item.type_name() + " found");
      if (i++) out += s;
      out += self.safe() && !item.safe() ? html_escape(item.str()) : item.str();
    }
    return markup_if(self, out);
  }
  if (name == "format") {
    if (!self.safe()) return Value(str_format(s, args));
    // markupsafe's formatter escapes every argument that is not Markup itself.
    CallArgs escaped = args;
    auto escape = [](Value& v) {
      if (!(v.is_string() && v.safe())) v = Value(html_escape(v.to_str()), true);
    };
    for (auto& v : escaped.positional) escape(v);
    for (auto& kv : escaped.keywords) escape(kv.second);
    return Value(str_format(s, escaped), true);
  }
  if (name == "center" || name == "ljust" || name == "rjust") {
    ArgBinder b(what, args, {"width", "fillchar"});
    std::string fill = b.has(1) ? str_arg(b.get(1), "fillchar") : " ";
    if (code_point_count(fill) != 1)
      throw RenderError("The fill character must be exactly one character long");
    int where = name == "center" ? 0 : name == "ljust" ? -1 : 1;
    return markup_if(self, padded(s, b.get(0).as_int(), fill, where));
  }
  if (name == "zfill") {
    ArgBinder b(what, args, {"width"});
    std::string body = s;
    std::string sign;
    if (!body.empty() && (body[0] == '+' || body[0] == '-')) {
      sign = body.substr(0, 1);
      body.erase(0, 1);
    }
    auto n = static_cast<int64_t>(code_point_count(s));
    int64_t pad = std::max<int64_t>(0, b.get(0).as_int() - n);
    return markup_if(self, sign + std::string(static_cast<size_t>(pad), '0') + body);
  }
  if (name == "partition" || name == "rpartition") {
    ArgBinder b(what, args, {"sep"});
    const std::string& sep = str_arg(b.get(0), "sep");
    if (sep.empty()) throw RenderError("empty separator");
    size_t at = name == "partition" ? s.find(sep) : s.rfind(sep);
    std::vector<std::string> parts;
    if (at == std::string::npos)
      parts = name == "partition" ? std::vector<std::string>{s, "", ""}
                                  : std::vector<std::string>{"", "", s};
    else
      parts = {s.substr(0, at), sep, s.substr(at + sep.size())};
    return strings(self, parts, SeqKind::kTuple);
  }
  if (name == "removeprefix" || name == "removesuffix") {
    ArgBinder b(what, args, {"affix"});
    const std::string& a = str_arg(b.get(0), name + "() argument");
    if (name == "removeprefix" && s.rfind(a, 0) == 0) return markup_if(self, s.substr(a.size()));
    if (name == "removesuffix" && s.size() >= a.size() &&
        s.compare(s.size() - a.size(), a.size(), a) == 0)
      return markup_if(self, s.substr(0, s.size() - a.size()));
    return self;
  }
  throw UnsupportedError("the method str." + name);
}

Value list_method(const Value& self, const std::string& name, const CallArgs& args) {
  const std::string what = self.type_name() + "." + name;
  if (name == "copy") {
    ArgBinder b(what, args, {});
    return Value::list(self.items(), self.seq_kind());
  }
  ArgBinder b(what, args, {"value"});
  const auto& items = self.items();
  if (name == "count")
    return Value(static_cast<int64_t>(std::count_if(
        items.begin(), items.end(), [&](const Value& x) { return py_equal(x, b.get(0)); })));
  for (size_t i = 0; i < items.size(); ++i)
    if (py_equal(items[i], b.get(0))) return Value(static_cast<int64_t>(i));
  throw RenderError(b.get(0).repr() + " is not in " + self.type_name());
}

Value dict_method(const Value& self, const std::string& name, const CallArgs& args) {
  const std::string what = "dict." + name;
  const Dict& d = self.dict();
  if (name == "get") {
    ArgBinder b(what, args, {"key", "default"});
    const Value& key = b.get(0);
    check_hashable(key);
    const Value* found = d.find(key);
    return found ? *found : b.get_or(1, Value::none());
  }
  ArgBinder b(what, args, {});
  if (name == "copy") return self;
  std::vector<Value> out;
  for (const auto& [k, v] : d.entries()) {
    if (name == "keys")
      out.push_back(k);
    else if (name == "values")
      out.push_back(v);
    else
      out.push_back(Value::list({k, v}, SeqKind::kTuple));
  }
  return Value::dict_view(std::move(out), "dict_" + name);
}

}  // namespace

AttrKind method_kind(const Value& self, const std::string& name) {
  if (name.rfind("__", 0) == 0) return AttrKind::kUnsafe;
  switch (self.kind()) {
    case Kind::kString:
      if (kStrMethods.count(name)) return AttrKind::kMethod;
      return kStrOutside.count(name) ? AttrKind::kOutside : AttrKind::kNone;
    case Kind::kList:
      if (self.seq_kind() == SeqKind::kIterator)
        return kGeneratorAttrs.count(name) ? AttrKind::kOutside : AttrKind::kNone;
      if (self.list_data().view == "range")
        return name == "count" || name == "index"                    ? AttrKind::kMethod
               : name == "start" || name == "stop" || name == "step" ? AttrKind::kOutside
                                                                     : AttrKind::kNone;
      if (!self.list_data().view.empty())
        return name == "isdisjoint" || name == "mapping" ? AttrKind::kOutside : AttrKind::kNone;
      if (name == "count" || name == "index") return AttrKind::kMethod;
      if (self.seq_kind() == SeqKind::kTuple) return AttrKind::kNone;
      if (name == "copy") return AttrKind::kMethod;
      return kListUnsafe.count(name) ? AttrKind::kUnsafe : AttrKind::kNone;
    case Kind::kDict:
      if (kDictMethods.count(name)) return AttrKind::kMethod;
      if (kDictUnsafe.count(name)) return AttrKind::kUnsafe;
      return name == "fromkeys" ? AttrKind::kOutside : AttrKind::kNone;
    case Kind::kInt:
    case Kind::kBool:
    case Kind::kFloat:
      return kNumberAttrs.count(name) ? AttrKind::kOutside : AttrKind::kNone;
    default:
      return AttrKind::kNone;
  }
}

Value call_method(const Value& self, const std::string& name, const CallArgs& args) {
  switch (self.kind()) {
    case Kind::kString:
      return str_method(self, name, args);
    case Kind::kList:
      return list_method(self, name, args);
    case Kind::kDict:
      return dict_method(self, name, args);
    default:
      throw UnsupportedError("the method " + self.type_name() + "." + name);
  }
}

std::string str_format(const std::string& format, const CallArgs& args) {
  std::string out;
  size_t auto_index = 0;
  bool manual = false, automatic = false;
  for (size_t i = 0; i < format.size(); ++i) {
    char c = format[i];
    if (c == '}') {
      if (i + 1 < format.size() && format[i + 1] == '}') {
        out += '}';
        ++i;
        continue;
      }
      throw RenderError("Single '}' encountered in format string");
    }
    if (c != '{') {
      out += c;
      continue;
    }
    if (i + 1 < format.size() && format[i + 1] == '{') {
      out += '{';
      ++i;
      continue;
    }
    size_t close = format.find('}', i + 1);
    if (close == std::string::npos) throw RenderError("Single '{' encountered in format string");
    std::string field = format.substr(i + 1, close - i - 1);
    i = close;
    if (field.find('{') != std::string::npos)
      throw UnsupportedError("a nested replacement field in str.format");
    char conversion = 0;
    size_t colon = field.find(':');
    if (colon != std::string::npos) {
      if (colon + 1 < field.size())
        throw UnsupportedError("the format spec '" + field.substr(colon + 1) + "' in str.format");
      field.resize(colon);
    }
    size_t bang = field.find('!');
    if (bang != std::string::npos) {
      if (bang + 2 != field.size()) throw RenderError("expected ':' after conversion specifier");
      conversion = field[bang + 1];
      field.resize(bang);
    }
    size_t first_end = field.find_first_of(".[");
    std::string first = field.substr(0, first_end);
    Value obj;
    if (first.empty() || parse_digits(first)) {
      size_t index;
      if (first.empty()) {
        if (manual)
          throw RenderError(
              "cannot switch from manual field specification to automatic field "
              "numbering");
        automatic = true;
        index = auto_index++;
      } else {
        if (automatic)
          throw RenderError(
              "cannot switch from automatic field numbering to manual field "
              "specification");
        manual = true;
        index = static_cast<size_t>(*parse_digits(first));
      }
      if (index >= args.positional.size())
        throw RenderError("Replacement index " + std::to_string(index) +
                          " out of range for positional args tuple");
      obj = args.positional[index];
    } else {
      auto it = std::find_if(args.keywords.begin(), args.keywords.end(),
                             [&](const auto& kw) { return kw.first == first; });
      if (it == args.keywords.end()) throw RenderError("KeyError: '" + first + "'");
      obj = it->second;
    }
    size_t p = first_end == std::string::npos ? field.size() : first_end;
    while (p < field.size()) {
      if (field[p] == '.') {
        size_t e = field.find_first_of(".[", p + 1);
        if (e == std::string::npos) e = field.size();
        obj = get_attr(obj, field.substr(p + 1, e - p - 1));
        p = e;
      } else {
        size_t e = field.find(']', p);
        if (e == std::string::npos) throw RenderError("Missing ']' in format string");
        std::string key = field.substr(p + 1, e - p - 1);
        auto index = parse_digits(key);
        obj = get_item(obj, index ? Value(*index) : Value(key));
        p = e + 1;
      }
    }
    if (conversion == 'r')
      out += obj.repr();
    else if (conversion == 's' || conversion == 0)
      out += obj.to_str();
    else
      throw UnsupportedError(std::string("the conversion !") + conversion + " in str.format");
  }
  return out;
}

}  // namespace retain::jinja
