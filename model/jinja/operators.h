// The operations an expression performs on values, as the sandboxed jinja2 environment performs
// them: attribute and item lookup (each falling back to the other), slicing, calls, and Python's
// arithmetic with its type rules (str * int, list + list, // and % flooring, Markup escaping what
// `+` joins to it).
#pragma once

#include <string>

#include "model/jinja/value.h"

namespace retain::jinja {

// obj.name: a Python attribute (method) first, then obj['name']; undefined when neither.
Value get_attr(const Value& obj, const std::string& name);
// obj[key]: the item first, then (for a str key) the attribute; undefined when neither.
Value get_item(const Value& obj, const Value& key);
// obj[start:stop:step]; an undefined bound means "not given".
Value get_slice(const Value& obj, const Value& start, const Value& stop, const Value& step,
                bool has_start, bool has_stop, bool has_step);
Value call_value(const Value& callee, CallArgs& args);
// + - * / // % ** on two values.
Value binary_op(const std::string& op, const Value& a, const Value& b);
// -x / +x.
Value unary_op(bool negate, const Value& v);

}  // namespace retain::jinja
