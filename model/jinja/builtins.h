// jinja2's filters and tests (with transformers' tojson in place of jinja2's), and the globals
// transformers' environment defines: range, dict, namespace, raise_exception, strftime_now.
// Filters jinja2 has but this engine does not implement are reported as outside the subset: a
// template using one fails when the filter runs, naming it, instead of rendering differently.
#pragma once

#include <ctime>
#include <functional>
#include <optional>
#include <string>

#include "model/jinja/value.h"

namespace retain::jinja {

enum class Support { kSupported, kOutsideSubset, kUnknown };

Support filter_support(const std::string& name);
Support test_support(const std::string& name);

Value apply_filter(const std::string& name, const Value& input, const CallArgs& args);
bool apply_test(const std::string& name, const Value& input, const CallArgs& args);

// The local time strftime_now formats (datetime.now()); tests fix it.
using Clock = std::function<std::tm()>;
// A global of transformers' environment, or nothing when `name` is not one.
std::optional<Value> global_value(const std::string& name, const Clock& clock);

}  // namespace retain::jinja
