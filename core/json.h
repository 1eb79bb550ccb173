// JSON through nlohmann-json, with file reads whose errors name the file and the parse position.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "core/error.h"
#include "core/fs.h"

namespace retain {

using Json = nlohmann::json;

Json parse_json(const std::string& text, const std::string& where);
Json read_json_file(const fs::path& path);
void write_json_file_atomic(const fs::path& path, const Json& value);

// Typed access with errors that say which key of which source was missing or wrong.
template <typename T>
T json_get(const Json& object, const std::string& key, const std::string& where) {
  auto it = object.find(key);
  RETAIN_CHECK(it != object.end(), where, ": required key '", key, "' is missing");
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
