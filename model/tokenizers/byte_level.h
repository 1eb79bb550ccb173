// GPT-2's byte-level alphabet: every byte maps to a printable Unicode character (printable ASCII
// and Latin-1 map to themselves, the rest to U+0100 upwards), so any byte string becomes a string
// of "characters" that BPE can merge, and decoding maps them back.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace retain {

// UTF-8 of the character standing for `byte`.
const std::string& byte_to_char(uint8_t byte);
// The byte a byte-level character stands for, if `utf8_char` (one character) is one of the 256.
std::optional<uint8_t> char_to_byte(std::string_view utf8_char);
// Maps every byte of `text` to its character.
std::string bytes_to_byte_level(std::string_view text);

// The length in bytes of the UTF-8 character starting with `lead`.
inline size_t utf8_length(unsigned char lead) {
  return lead < 0x80 ? 1 : (lead >> 5) == 0x6 ? 2 : (lead >> 4) == 0xE ? 3 : 4;
}
// Replaces invalid UTF-8 sequences with U+FFFD, as Rust's String::from_utf8_lossy.
std::string utf8_lossy(std::string_view bytes);

}  // namespace retain
