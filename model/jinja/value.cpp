#include "model/jinja/value.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "model/jinja/text.h"

namespace retain::jinja {

namespace {

const std::string kEmpty;

std::string json_key(const Value& k);

std::string tuple_or_list_repr(const ListData& l) {
  if (l.view == "range") {
    std::string out =
        "range(" + std::to_string(l.range_args[0]) + ", " + std::to_string(l.range_args[1]);
    if (l.range_args[2] != 1) out += ", " + std::to_string(l.range_args[2]);
    return out + ")";
  }
  if (!l.view.empty()) {
    ListData plain;
    plain.items = l.items;
    return l.view + "(" + tuple_or_list_repr(plain) + ")";
  }
  std::string out = l.kind == SeqKind::kTuple ? "(" : "[";
  for (size_t i = 0; i < l.items.size(); ++i) {
    if (i) out += ", ";
    out += l.items[i].repr();
  }
  if (l.kind == SeqKind::kTuple && l.items.size() == 1) out += ",";
  out += l.kind == SeqKind::kTuple ? ")" : "]";
  return out;
}

std::string dict_repr(const Dict& d) {
  std::string out = "{";
  bool first = true;
  for (const auto& [k, v] : d.entries()) {
    if (!first) out += ", ";
    first = false;
    out += k.repr() + ": " + v.repr();
  }
  return out + "}";
}

void json_string(std::string& out, const std::string& s, bool ensure_ascii) {
  out += '"';
  char buf[16];
  for (char32_t cp : utf8_decode(s)) {
    switch (cp) {
      case '"':
        out += "\\\"";
        continue;
      case '\\':
        out += "\\\\";
        continue;
      case '\n':
        out += "\\n";
        continue;
      case '\r':
        out += "\\r";
        continue;
      case '\t':
        out += "\\t";
        continue;
      case '\b':
        out += "\\b";
        continue;
      case '\f':
        out += "\\f";
        continue;
      default:
        break;
    }
    if (cp < 0x20 || (ensure_ascii && cp >= 0x7F)) {
      if (cp >= 0x10000) {
        char32_t v = cp - 0x10000;
        std::snprintf(buf, sizeof buf, "\\u%04x\\u%04x", static_cast<unsigned>(0xD800 + (v >> 10)),
                      static_cast<unsigned>(0xDC00 + (v & 0x3FF)));
      } else {
        std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(cp));
      }
      out += buf;
    } else {
      append_utf8(out, cp);
    }
  }
  out += '"';
}

void json_write(std::string& out, const Value& v, const JsonFormat& f, int level) {
  const bool indented = f.indent >= 0 || f.indent_text.has_value();
  const std::string item_sep = f.separators ? f.separators->first : (indented ? "," : ", ");
  const std::string key_sep = f.separators ? f.separators->second : ": ";
  const std::string unit = f.indent_text ? *f.indent_text : std::string(std::max(f.indent, 0), ' ');
  auto newline = [&](int depth) {
    out += '\n';
    for (int i = 0; i < depth; ++i) out += unit;
  };
  switch (v.kind()) {
    case Kind::kNone:
      out += "null";
      return;
    case Kind::kBool:
      out += v.as_bool() ? "true" : "false";
      return;
    case Kind::kInt:
      out += std::to_string(v.as_int());
      return;
    case Kind::kFloat: {
      double d = v.as_float();
      if (std::isnan(d))
        out += "NaN";
      else if (std::isinf(d))
        out += d > 0 ? "Infinity" : "-Infinity";
      else
        out += py_float_repr(d);
      return;
    }
    case Kind::kString:
      json_string(out, v.str(), f.ensure_ascii);
      return;
    case Kind::kList: {
      if (v.seq_kind() == SeqKind::kIterator || !v.list_data().view.empty()) break;
      const auto& items = v.items();
      if (items.empty()) {
        out += "[]";
        return;
      }
      out += '[';
      for (size_t i = 0; i < items.size(); ++i) {
        if (i) out += item_sep;
        if (indented) newline(level + 1);
        json_write(out, items[i], f, level + 1);
      }
      if (indented) newline(level);
      out += ']';
      return;
    }
    case Kind::kDict: {
      std::vector<const std::pair<Value, Value>*> entries;
      for (const auto& e : v.dict().entries()) entries.push_back(&e);
      if (entries.empty()) {
        out += "{}";
        return;
      }
      if (f.sort_keys)
        std::stable_sort(entries.begin(), entries.end(),
                         [](auto* a, auto* b) { return py_less(a->first, b->first); });
      out += '{';
      for (size_t i = 0; i < entries.size(); ++i) {
        if (i) out += item_sep;
        if (indented) newline(level + 1);
        json_string(out, json_key(entries[i]->first), f.ensure_ascii);
        out += key_sep;
        json_write(out, entries[i]->second, f, level + 1);
      }
      if (indented) newline(level);
      out += '}';
      return;
    }
    default:
      break;
  }
  throw RenderError("Object of type " + v.type_name() + " is not JSON serializable");
}

// json.dumps turns the keys of a dict into strings so.
std::string json_key(const Value& k) {
  switch (k.kind()) {
    case Kind::kString:
      return k.str();
    case Kind::kInt:
      return std::to_string(k.as_int());
    case Kind::kFloat:
      return py_float_repr(k.as_float());
    case Kind::kBool:
      return k.as_bool() ? "true" : "false";
    case Kind::kNone:
      return "null";
    default:
      throw RenderError("keys must be str, int, float, bool or None, not " + k.type_name());
  }
}

bool both_numbers(const Value& a, const Value& b) { return a.is_number() && b.is_number(); }

bool numbers_equal(const Value& a, const Value& b) {
  if (a.kind() == Kind::kFloat || b.kind() == Kind::kFloat) return a.as_float() == b.as_float();
  return a.as_int() == b.as_int();
}

}  // namespace

const Value* Dict::find(const Value& key) const {
  if (key.is_string()) return find(key.str());
  for (const auto& e : entries_)
    if (py_equal(e.first, key)) return &e.second;
  return nullptr;
}

const Value* Dict::find(const std::string& key) const {
  for (const auto& e : entries_)
    if (e.first.is_string() && e.first.str() == key) return &e.second;
  return nullptr;
}

void Dict::set(Value key, Value value) {
  depth_ = std::max({depth_, key.depth() + 1, value.depth() + 1});
  if (depth_ > kMaxNesting)
    throw UnsupportedError("lists, dicts or namespaces nested beyond " +
                           std::to_string(kMaxNesting) + " levels");
  for (auto& e : entries_)
    if (py_equal(e.first, key)) {
      e.second = std::move(value);
      return;
    }
  entries_.emplace_back(std::move(key), std::move(value));
}

void check_hashable(const Value& v) {
  bool ok = true;
  if (v.kind() == Kind::kDict) ok = false;
  if (v.kind() == Kind::kList) {
    if (v.seq_kind() == SeqKind::kList) ok = false;
    if (v.seq_kind() == SeqKind::kTuple)
      for (const auto& item : v.items()) check_hashable(item);
  }
  if (!ok) throw RenderError("unhashable type: '" + v.type_name() + "'");
}

Value::Value(std::string s, bool safe)
    : kind_(Kind::kString), safe_(safe), ptr_(std::make_shared<const std::string>(std::move(s))) {}

Value Value::undefined(const std::string& name, const std::string& hint) {
  Value v;
  v.undefined_ = std::make_shared<const std::pair<std::string, std::string>>(name, hint);
  return v;
}

Value Value::missing(const Value& owner, const Value& key, bool attribute) {
  std::string name = key.is_string() ? key.str() : key.repr();
  // jinja2's wording: quotes around the owner for attributes, none for elements.
  if (key.is_string() || attribute)
    return undefined(name, "'" + owner.owner_name() + "' has no attribute " + key.repr());
  return undefined(name, owner.owner_name() + " has no element " + key.repr());
}

Value Value::none() {
  Value v;
  v.kind_ = Kind::kNone;
  return v;
}

Value Value::list(std::vector<Value> items, SeqKind kind) {
  Value v;
  v.kind_ = Kind::kList;
  auto data = std::make_shared<ListData>();
  for (const auto& item : items) data->depth = std::max(data->depth, item.depth() + 1);
  if (data->depth > kMaxNesting)
    throw UnsupportedError("lists, dicts or namespaces nested beyond " +
                           std::to_string(kMaxNesting) + " levels");
  data->items = std::move(items);
  data->kind = kind;
  v.ptr_ = std::move(data);
  return v;
}

Value Value::dict_view(std::vector<Value> items, const std::string& view) {
  Value v = list(std::move(items));
  std::get<std::shared_ptr<ListData>>(v.ptr_)->view = view;
  return v;
}

Value Value::range(int64_t start, int64_t stop, int64_t step) {
  std::vector<Value> items;
  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) items.emplace_back(i);
  Value v = dict_view(std::move(items), "range");
  auto& data = *std::get<std::shared_ptr<ListData>>(v.ptr_);
  data.range_args[0] = start;
  data.range_args[1] = stop;
  data.range_args[2] = step;
  return v;
}

Value Value::dict(Dict d) {
  Value v;
  v.kind_ = Kind::kDict;
  v.ptr_ = std::make_shared<const Dict>(std::move(d));
  return v;
}

Value Value::object(std::shared_ptr<Object> o) {
  Value v;
  v.kind_ = Kind::kObject;
  v.ptr_ = std::move(o);
  return v;
}

Value Value::callable(std::string name, std::function<Value(CallArgs&)> fn, bool is_macro) {
  Value v;
  v.kind_ = Kind::kCallable;
  v.ptr_ = std::make_shared<const Callable>(Callable{std::move(name), std::move(fn), is_macro});
  return v;
}

Value Value::from_json(const nlohmann::ordered_json& j) { return from_json(j, 0); }

Value Value::from_json(const nlohmann::ordered_json& j, int depth) {
  if (depth > kMaxNesting)
    throw UnsupportedError("lists, dicts or namespaces nested beyond " +
                           std::to_string(kMaxNesting) + " levels");
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null:
      return none();
    case nlohmann::ordered_json::value_t::boolean:
      return Value(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer:
      return Value(j.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: {
      auto u = j.get<uint64_t>();
      if (u > static_cast<uint64_t>(INT64_MAX)) return Value(static_cast<double>(u));
      return Value(static_cast<int64_t>(u));
    }
    case nlohmann::ordered_json::value_t::number_float:
      return Value(j.get<double>());
    case nlohmann::ordered_json::value_t::string:
      return Value(j.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      std::vector<Value> items;
      items.reserve(j.size());
      for (const auto& e : j) items.push_back(from_json(e, depth + 1));
      return list(std::move(items));
    }
    case nlohmann::ordered_json::value_t::object: {
      Dict d;
      for (const auto& [k, e] : j.items()) d.set(Value(k), from_json(e, depth + 1));
      return dict(std::move(d));
    }
    default:
      throw RenderError("a JSON value of type " + std::string(j.type_name()) +
                        " cannot be given to a template");
  }
}

const std::string& Value::str() const {
  if (kind_ != Kind::kString) return kEmpty;
  return *std::get<std::shared_ptr<const std::string>>(ptr_);
}
const ListData& Value::list_data() const { return *std::get<std::shared_ptr<ListData>>(ptr_); }
const std::vector<Value>& Value::items() const { return list_data().items; }
SeqKind Value::seq_kind() const { return list_data().kind; }
const Dict& Value::dict() const { return *std::get<std::shared_ptr<const Dict>>(ptr_); }
Object& Value::object() const { return *std::get<std::shared_ptr<Object>>(ptr_); }
std::shared_ptr<Object> Value::object_ptr() const {
  return std::get<std::shared_ptr<Object>>(ptr_);
}
const Callable& Value::callable() const { return *std::get<std::shared_ptr<const Callable>>(ptr_); }
const std::string& Value::undefined_name() const { return undefined_ ? undefined_->first : kEmpty; }

std::string Value::undefined_message() const {
  if (undefined_ && !undefined_->second.empty()) return undefined_->second;
  return "'" + undefined_name() + "' is undefined";
}

void Value::fail_undefined() const { throw RenderError(undefined_message()); }

bool Value::same_as(const Value& other) const {
  if (kind_ != other.kind_) return false;
  switch (kind_) {
    case Kind::kUndefined:
    case Kind::kNone:
      return true;
    case Kind::kBool:
      return b_ == other.b_;
    case Kind::kInt:
      return i_ == other.i_;
    case Kind::kFloat:
      return false;
    default:
      return ptr_ == other.ptr_;
  }
}

bool Value::is_namespace() const { return kind_ == Kind::kObject && object().is_namespace; }

int Value::depth() const {
  switch (kind_) {
    case Kind::kList:
      return list_data().depth;
    case Kind::kDict:
      return dict().depth();
    case Kind::kObject:
      return object().attrs.depth();
    default:
      return 0;
  }
}

bool Value::truthy() const {
  switch (kind_) {
    case Kind::kUndefined:
    case Kind::kNone:
      return false;
    case Kind::kBool:
      return b_;
    case Kind::kInt:
      return i_ != 0;
    case Kind::kFloat:
      return f_ != 0;
    case Kind::kString:
      return !str().empty();
    case Kind::kList:
      return seq_kind() == SeqKind::kIterator || !items().empty();
    case Kind::kDict:
      return dict().size() > 0;
    default:
      return true;
  }
}

std::string Value::to_str() const {
  switch (kind_) {
    case Kind::kUndefined:
      return "";
    case Kind::kString:
      return str();
    case Kind::kList:
      if (seq_kind() == SeqKind::kIterator)
        throw UnsupportedError(
            "printing a generator (the result of select, map, ... without |list)");
      return tuple_or_list_repr(list_data());
    case Kind::kObject: {
      const Object& o = object();
      if (o.is_namespace) {
        // A namespace holding itself prints as Python's recursive repr does: {...}.
        static thread_local std::vector<const Object*> printing;
        if (std::find(printing.begin(), printing.end(), &o) != printing.end())
          return "<Namespace {...}>";
        printing.push_back(&o);
        std::string s;
        try {
          s = "<Namespace " + dict_repr(o.attrs) + ">";
        } catch (...) {
          printing.pop_back();
          throw;
        }
        printing.pop_back();
        return s;
      }
      const Value* index = o.attrs.find(std::string("index"));
      const Value* length = o.attrs.find(std::string("length"));
      return "<LoopContext " + (index ? index->to_str() : "?") + "/" +
             (length ? length->to_str() : "?") + ">";
    }
    case Kind::kCallable:
      throw UnsupportedError("printing " + callable().name + " (a function object)");
    default:
      return repr();
  }
}

std::string Value::repr() const {
  switch (kind_) {
    case Kind::kUndefined:
      return "Undefined";
    case Kind::kNone:
      return "None";
    case Kind::kBool:
      return b_ ? "True" : "False";
    case Kind::kInt:
      return std::to_string(i_);
    case Kind::kFloat:
      return py_float_repr(f_);
    case Kind::kString:
      return safe_ ? "Markup(" + py_repr_string(str()) + ")" : py_repr_string(str());
    case Kind::kDict:
      return dict_repr(dict());
    default:
      return to_str();
  }
}

std::string Value::type_name() const {
  switch (kind_) {
    case Kind::kUndefined:
      return "Undefined";
    case Kind::kNone:
      return "NoneType";
    case Kind::kBool:
      return "bool";
    case Kind::kInt:
      return "int";
    case Kind::kFloat:
      return "float";
    case Kind::kString:
      return safe_ ? "Markup" : "str";
    case Kind::kList:
      if (!list_data().view.empty()) return list_data().view;
      return seq_kind() == SeqKind::kList    ? "list"
             : seq_kind() == SeqKind::kTuple ? "tuple"
                                             : "generator";
    case Kind::kDict:
      return "dict";
    case Kind::kObject:
      return object().type_name;
    case Kind::kCallable:
      return callable().is_macro ? "Macro" : "function";
  }
  return "object";
}

std::string Value::owner_name() const {
  if (kind_ == Kind::kNone) return "None";
  return type_name() + " object";
}

bool py_equal(const Value& a, const Value& b) {
  if (both_numbers(a, b)) return numbers_equal(a, b);
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Kind::kUndefined:
    case Kind::kNone:
      return true;
    case Kind::kString:
      return a.str() == b.str();
    case Kind::kList: {
      if (a.seq_kind() != b.seq_kind() || a.seq_kind() == SeqKind::kIterator ||
          a.list_data().view != b.list_data().view)
        return a.same_as(b);
      const auto& x = a.items();
      const auto& y = b.items();
      if (x.size() != y.size()) return false;
      for (size_t i = 0; i < x.size(); ++i)
        if (!py_equal(x[i], y[i])) return false;
      return true;
    }
    case Kind::kDict: {
      const Dict& x = a.dict();
      const Dict& y = b.dict();
      if (x.size() != y.size()) return false;
      for (const auto& [k, v] : x.entries()) {
        const Value* other = y.find(k);
        if (other == nullptr || !py_equal(v, *other)) return false;
      }
      return true;
    }
    default:
      return a.same_as(b);
  }
}

bool py_compare(const std::string& op, const Value& a, const Value& b) {
  if (a.is_undefined()) a.fail_undefined();
  if (b.is_undefined()) b.fail_undefined();
  auto ordered = [&](auto x, auto y) {
    return op == "<" ? x < y : op == "<=" ? x <= y : op == ">" ? x > y : x >= y;
  };
  if (both_numbers(a, b)) {
    if (a.kind() == Kind::kFloat || b.kind() == Kind::kFloat)
      return ordered(a.as_float(), b.as_float());
    return ordered(a.as_int(), b.as_int());
  }
  if (a.is_string() && b.is_string()) return ordered(a.str(), b.str());
  if (a.kind() == Kind::kList && b.kind() == Kind::kList) {
    const ListData& x = a.list_data();
    const ListData& y = b.list_data();
    if (x.view.rfind("dict_", 0) == 0 && x.view == y.view)
      throw UnsupportedError("ordering dict views (set comparisons)");
    // Sequences: the first items that differ decide, else the lengths.
    if (x.kind == y.kind && x.kind != SeqKind::kIterator && x.view.empty() && y.view.empty()) {
      for (size_t i = 0; i < x.items.size() && i < y.items.size(); ++i)
        if (!py_equal(x.items[i], y.items[i])) return py_compare(op, x.items[i], y.items[i]);
      return ordered(x.items.size(), y.items.size());
    }
  }
  throw RenderError("'" + op + "' not supported between instances of '" + a.type_name() +
                    "' and '" + b.type_name() + "'");
}

bool py_less(const Value& a, const Value& b) { return py_compare("<", a, b); }

std::vector<Value> py_iterate(const Value& v) {
  switch (v.kind()) {
    case Kind::kUndefined:
      return {};
    case Kind::kList: {
      const ListData& l = v.list_data();
      if (l.kind != SeqKind::kIterator) return l.items;
      if (l.consumed) return {};
      l.consumed = true;
      return l.items;
    }
    case Kind::kString: {
      std::vector<Value> out;
      for (char32_t cp : utf8_decode(v.str())) {
        std::string s;
        append_utf8(s, cp);
        out.emplace_back(std::move(s));
      }
      return out;
    }
    case Kind::kDict: {
      std::vector<Value> out;
      for (const auto& e : v.dict().entries()) out.emplace_back(e.first);
      return out;
    }
    default:
      throw RenderError("'" + v.type_name() + "' object is not iterable");
  }
}

int64_t py_len(const Value& v) {
  switch (v.kind()) {
    case Kind::kUndefined:
      return 0;
    case Kind::kString:
      return static_cast<int64_t>(code_point_count(v.str()));
    case Kind::kList:
      if (v.seq_kind() != SeqKind::kIterator) return static_cast<int64_t>(v.items().size());
      break;
    case Kind::kDict:
      return static_cast<int64_t>(v.dict().size());
    default:
      break;
  }
  throw RenderError("object of type '" + v.type_name() + "' has no len()");
}

bool py_contains(const Value& haystack, const Value& needle) {
  switch (haystack.kind()) {
    case Kind::kUndefined:
      return false;
    case Kind::kString:
      if (!needle.is_string())
        throw RenderError("'in <string>' requires string as left operand, not " +
                          needle.type_name());
      return haystack.str().find(needle.str()) != std::string::npos;
    case Kind::kList:
      for (const auto& item : py_iterate(haystack))
        if (py_equal(item, needle)) return true;
      return false;
    case Kind::kDict:
      check_hashable(needle);
      return haystack.dict().find(needle) != nullptr;
    default:
      throw RenderError("argument of type '" + haystack.type_name() + "' is not iterable");
  }
}

ArgBinder::ArgBinder(const std::string& what, const CallArgs& args, std::vector<std::string> params)
    : values_(params.size()), given_(params.size(), false) {
  if (args.positional.size() > params.size())
    throw RenderError(what + "() takes at most " + std::to_string(params.size()) +
                      " argument(s) (" + std::to_string(args.positional.size()) + " given)");
  for (size_t i = 0; i < args.positional.size(); ++i) {
    values_[i] = args.positional[i];
    given_[i] = true;
  }
  for (const auto& [key, value] : args.keywords) {
    auto it = std::find(params.begin(), params.end(), key);
    if (it == params.end())
      throw RenderError(what + "() got an unexpected keyword argument '" + key + "'");
    auto i = static_cast<size_t>(it - params.begin());
    if (given_[i]) throw RenderError(what + "() got multiple values for argument '" + key + "'");
    values_[i] = value;
    given_[i] = true;
  }
}

std::string to_json(const Value& v, const JsonFormat& format) {
  std::string out;
  json_write(out, v, format, 0);
  return out;
}

}  // namespace retain::jinja
