#include "model/tokenizers/unicode.h"

#include <utf8proc.h>

#include <cstdlib>
#include <memory>

#include "core/error.h"
#include "model/tokenizers/regex.h"

namespace retain {

uint32_t next_code_point(std::string_view text, size_t& i) {
  auto c = static_cast<unsigned char>(text[i]);
  uint32_t cp;
  size_t len;
  if (c < 0x80) {
    cp = c;
    len = 1;
  } else if ((c >> 5) == 0x6) {
    cp = c & 0x1F;
    len = 2;
  } else if ((c >> 4) == 0xE) {
    cp = c & 0x0F;
    len = 3;
  } else {
    cp = c & 0x07;
    len = 4;
  }
  for (size_t k = 1; k < len && i + k < text.size(); ++k) cp = (cp << 6) | (text[i + k] & 0x3F);
  i += len;
  return cp;
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

bool is_unicode_whitespace(uint32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F ||
         cp == 0x205F || cp == 0x3000;
}

bool is_word_code_point(uint32_t cp) {
  // Rust regex's \w (UTS #18 Annex C), which HF tokenizers tests with, on PCRE2's Unicode 16
  // tables: No (superscripts, fractions) is not a word character, Other_Alphabetic symbols are.
  static const Regex word("[\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}\\p{Join_Control}]",
                          "the word-character class");
  std::string utf8;
  append_utf8(utf8, cp);
  return word.matches_at_start(utf8);
}

std::string normalize_unicode(std::string_view text, NormalForm form) {
  int options = UTF8PROC_STABLE;
  switch (form) {
    case NormalForm::kNFC:
      options |= UTF8PROC_COMPOSE;
      break;
    case NormalForm::kNFD:
      options |= UTF8PROC_DECOMPOSE;
      break;
    case NormalForm::kNFKC:
      options |= UTF8PROC_COMPOSE | UTF8PROC_COMPAT;
      break;
    case NormalForm::kNFKD:
      options |= UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT;
      break;
  }
  utf8proc_uint8_t* out = nullptr;
  utf8proc_ssize_t n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()),
                                    static_cast<utf8proc_ssize_t>(text.size()), &out,
                                    static_cast<utf8proc_option_t>(options));
  RETAIN_CHECK(n >= 0, "unicode normalization failed: ", utf8proc_errmsg(n));
  std::unique_ptr<utf8proc_uint8_t, decltype(&std::free)> owned(out, &std::free);
  return std::string(reinterpret_cast<const char*>(out), static_cast<size_t>(n));
}

}  // namespace retain
