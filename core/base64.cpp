#include "core/base64.h"

#include "core/error.h"

namespace retain {

namespace {

int base64_value(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

}  // namespace

std::optional<std::vector<uint8_t>> decode_base64(std::string_view text, std::string* error) {
  auto bad = [&](std::string message) -> std::optional<std::vector<uint8_t>> {
    if (error) *error = std::move(message);
    return std::nullopt;
  };
  if (text.size() % 4 != 0) return bad(str_cat(text.size(), " characters, not a multiple of 4"));
  size_t padding = 0;
  if (!text.empty() && text.back() == '=')
    padding = text.size() >= 2 && text[text.size() - 2] == '=' ? 2 : 1;
  std::vector<uint8_t> out;
  out.reserve(text.size() / 4 * 3);
  uint32_t group = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const bool pad = i >= text.size() - padding;
    const int v = pad ? 0 : base64_value(text[i]);
    if (v < 0)
      return bad(str_cat("character ", i, " ('", text[i], "') is not in the base64 alphabet"));
    group = (group << 6) | static_cast<uint32_t>(v);
    if (i % 4 == 3) {
      out.push_back(static_cast<uint8_t>(group >> 16));
      out.push_back(static_cast<uint8_t>(group >> 8));
      out.push_back(static_cast<uint8_t>(group));
      group = 0;
    }
  }
  out.resize(out.size() - padding);
  return out;
}

}  // namespace retain
