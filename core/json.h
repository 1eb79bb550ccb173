// JSON through nlohmann-json, with file reads whose errors name the file and the parse position.
#pragma once

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "core/error.h"
#include "core/fs.h"

namespace retain {

using Json = nlohmann::json;

Json parse_json(const std::string& text, const std::string& where);
Json read_json_file(const fs::path& path);
void write_json_file_atomic(const fs::path& path, const Json& value);

namespace json_detail {

template <typename T>
constexpr bool is_integer_v = std::is_integral_v<T> && !std::is_same_v<T, bool>;

template <typename T>
struct integer_vector : std::false_type {};
template <typename E>
struct integer_vector<std::vector<E>> : std::bool_constant<is_integer_v<E>> {};

// Whether `v` holds a whole number that T can hold. nlohmann's get<integer> static_casts: a float
// becomes the truncated integer (3.7 -> 3; undefined behaviour outside the range: the fuzzer found
// 4.4e21) and an unsigned above T's range wraps. Other kinds answer true: get<> then refuses them.
template <typename T>
bool holds_integer_of(const Json& v) {
  using Limits = std::numeric_limits<T>;
  if (v.is_number_unsigned()) return v.get<uint64_t>() <= static_cast<uint64_t>(Limits::max());
  if (v.is_number_integer()) {
    const int64_t x = v.get<int64_t>();
    return x >= static_cast<int64_t>(Limits::min()) &&
           (x < 0 || static_cast<uint64_t>(x) <= static_cast<uint64_t>(Limits::max()));
  }
  if (v.is_number_float()) {
    const double x = v.get<double>();
    // min() is 0 or -2^digits and max()+1 is 2^digits, all exact as doubles.
    return std::isfinite(x) && x == std::trunc(x) && x >= static_cast<double>(Limits::min()) &&
           x < std::ldexp(1.0, Limits::digits);
  }
  return true;
}

template <typename T>
bool holds(const Json& v) {
  if constexpr (is_integer_v<T>) {
    return holds_integer_of<T>(v);
  } else if constexpr (integer_vector<T>::value) {
    if (!v.is_array()) return true;
    for (const Json& e : v)
      if (!holds_integer_of<typename T::value_type>(e)) return false;
    return true;
  } else {
    return true;
  }
}

}  // namespace json_detail

// Typed access with errors that say which key of which source was missing or wrong. An integer
// key must hold a whole number in range (32 and 32.0 read as 32; 3.5 and 1e30 are refused).
template <typename T>
T json_get(const Json& object, const std::string& key, const std::string& where) {
  auto it = object.find(key);
  RETAIN_CHECK(it != object.end(), where, ": required key '", key, "' is missing");
  RETAIN_CHECK(json_detail::holds<T>(*it), where, ": key '", key,
               "' must be a whole number in range (found ", it->dump(), ")");
  try {
    return it->template get<T>();
  } catch (const nlohmann::json::exception& e) {
    fail(where, ": key '", key, "' has the wrong type (found ", it->type_name(), "): ", e.what());
  }
}

// Runs `parse`, which reads a JSON document the user gave, turning the library's own exceptions (a
// key read with at(), a value of the wrong type) into retain::Error naming `where`: whatever a
// parser forgot to check still fails with a clear message, never an abort.
template <typename F>
auto with_json_errors(const std::string& where, F&& parse) -> decltype(parse()) {
  try {
    return parse();
  } catch (const nlohmann::json::exception& e) {
    std::string what = e.what();
    // "[json.exception.type_error.302] type must be string, but is number" -> the message.
    const auto bracket = what.find("] ");
    if (what.rfind("[json.exception.", 0) == 0 && bracket != std::string::npos)
      what = what.substr(bracket + 2);
    fail(where, ": malformed (", what, ")");
  }
}

// Like json_get, but a missing key or an explicit null gives std::nullopt.
template <typename T>
std::optional<T> json_get_optional(const Json& object, const std::string& key,
                                   const std::string& where) {
  auto it = object.find(key);
  if (it == object.end() || it->is_null()) return std::nullopt;
  return json_get<T>(object, key, where);
}

}  // namespace retain
