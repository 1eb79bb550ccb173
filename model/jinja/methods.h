// The Python methods templates call on their values (`content.strip()`, `message.get('x')`,
// `'{}'.format(x)`), with CPython's semantics, and what ImmutableSandboxedEnvironment does with
// the others: mutating methods of list and dict (append, pop, update, ...) are refused as unsafe,
// attributes starting with "__" too. A real method this engine does not implement is refused as
// outside the subset, never treated as missing.
#pragma once

#include <string>

#include "model/jinja/value.h"

namespace retain::jinja {

enum class AttrKind {
  kNone,     // not a Python attribute of this type: jinja2 then looks the name up as an item
  kMethod,   // implemented here
  kUnsafe,   // the sandbox refuses it (mutating methods, dunders)
  kOutside,  // a Python method this engine does not implement
};

AttrKind method_kind(const Value& self, const std::string& name);
Value call_method(const Value& self, const std::string& name, const CallArgs& args);
// str.format(*args, **kwargs) as the sandbox's formatter does it, for replacement fields without
// a format spec ({}, {0}, {name}, {0.attr}, {0[key]}, !r / !s).
std::string str_format(const std::string& format, const CallArgs& args);

}  // namespace retain::jinja
