#include "serve/byte_size.h"

#include <cctype>

#include "core/error.h"

namespace retain {

int64_t parse_bytes(const std::string& text, const std::string& flag) {
  size_t used = 0;
  double value = -1;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  std::string unit = text.substr(used);
  for (char& c : unit) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  double scale = 0;
  if (unit.empty() || unit == "b") scale = 1;
  if (unit == "k" || unit == "kib") scale = 1024.0;
  if (unit == "m" || unit == "mib") scale = 1024.0 * 1024;
  if (unit == "g" || unit == "gib") scale = 1024.0 * 1024 * 1024;
  if (unit == "kb") scale = 1e3;
  if (unit == "mb") scale = 1e6;
  if (unit == "gb") scale = 1e9;
  RETAIN_CHECK(used > 0 && value >= 0 && scale > 0, flag, ": expected bytes such as 512, 64MiB or ",
               "2G (K/M/G are powers of 1024, KB/MB/GB of 1000), found '", text, "'");
  return static_cast<int64_t>(value * scale);
}

}  // namespace retain
