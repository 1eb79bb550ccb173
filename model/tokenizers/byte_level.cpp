#include "model/tokenizers/byte_level.h"

#include <unordered_map>
#include <vector>

#include "core/utf8.h"
#include "model/tokenizers/unicode.h"

namespace retain {

namespace {

struct Tables {
  std::array<std::string, 256> to_char;
  std::unordered_map<std::string, uint8_t> to_byte;
  Tables() {
    // Bytes that are printable keep their code point; the others get 256, 257, ... in order.
    uint32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      bool printable =
          (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      uint32_t cp = printable ? static_cast<uint32_t>(b) : next++;
      append_utf8(to_char[b], cp);
      to_byte[to_char[b]] = static_cast<uint8_t>(b);
    }
  }
};

const Tables& tables() {
  static const Tables t;
  return t;
}

}  // namespace

const std::string& byte_to_char(uint8_t byte) { return tables().to_char[byte]; }

std::optional<uint8_t> char_to_byte(std::string_view utf8_char) {
  const auto& m = tables().to_byte;
  auto it = m.find(std::string(utf8_char));
  if (it == m.end()) return std::nullopt;
  return it->second;
}

std::string bytes_to_byte_level(std::string_view text) {
  std::string out;
  out.reserve(text.size() * 2);
  for (unsigned char c : text) out += tables().to_char[c];
  return out;
}

std::string utf8_lossy(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  while (!bytes.empty()) {
    size_t bad = find_invalid_utf8(bytes);
    if (bad == std::string_view::npos) {
      out.append(bytes);
      break;
    }
    out.append(bytes.substr(0, bad));
    out += "\xEF\xBF\xBD";  // U+FFFD
    // Skip the maximal invalid prefix the way Rust does: the lead byte plus any continuation
    // bytes that would have been valid for it.
    size_t skip = 1;
    auto lead = static_cast<unsigned char>(bytes[bad]);
    size_t want = lead >= 0xC2 && lead <= 0xF4 ? utf8_length(lead) : 1;
    while (skip < want && bad + skip < bytes.size() &&
           (static_cast<unsigned char>(bytes[bad + skip]) & 0xC0) == 0x80) {
      // Second-byte ranges that Rust's validator accepts for E0/ED/F0/F4 leads.
      if (skip == 1) {
        auto second = static_cast<unsigned char>(bytes[bad + 1]);
        if ((lead == 0xE0 && second < 0xA0) || (lead == 0xED && second > 0x9F) ||
            (lead == 0xF0 && second < 0x90) || (lead == 0xF4 && second > 0x8F))
          break;
      }
      ++skip;
    }
    bytes.remove_prefix(bad + skip);
  }
  return out;
}

}  // namespace retain
