// Small Unicode helpers for the tokenizer: code point iteration, White_Space, word characters
// (PCRE2's Unicode 16 tables), and normalization forms through utf8proc.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace retain {

// Decodes the code point at text[i] (valid UTF-8 assumed) and advances i past it.
uint32_t next_code_point(std::string_view text, size_t& i);
// Appends the UTF-8 encoding of `cp`.
void append_utf8(std::string& out, uint32_t cp);
// Unicode White_Space (what Rust's char::is_whitespace and regex \s accept).
bool is_unicode_whitespace(uint32_t cp);
// Rust regex \w: Alphabetic, marks, decimal digits, connector punctuation, joiners.
bool is_word_code_point(uint32_t cp);

enum class NormalForm { kNFC, kNFD, kNFKC, kNFKD };
std::string normalize_unicode(std::string_view text, NormalForm form);

}  // namespace retain
