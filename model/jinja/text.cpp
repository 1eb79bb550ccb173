#include "model/jinja/text.h"

#include <utf8proc.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

namespace retain::jinja {

namespace {

// Invalid bytes decode to U+DC80 + (byte - 0x80) and encode back to the byte.
constexpr char32_t kEscapeBase = 0xDC00;

bool is_escaped_byte(char32_t cp) { return cp >= 0xDC80 && cp <= 0xDCFF; }

utf8proc_category_t category(char32_t cp) {
  return utf8proc_category(static_cast<utf8proc_int32_t>(cp));
}

bool is_cased(char32_t cp) {
  auto c = category(cp);
  return c == UTF8PROC_CATEGORY_LU || c == UTF8PROC_CATEGORY_LL || c == UTF8PROC_CATEGORY_LT;
}
bool is_lower_cp(char32_t cp) { return category(cp) == UTF8PROC_CATEGORY_LL; }
bool is_upper_cp(char32_t cp) {
  auto c = category(cp);
  return c == UTF8PROC_CATEGORY_LU || c == UTF8PROC_CATEGORY_LT;
}

char32_t to_upper(char32_t cp) { return static_cast<char32_t>(utf8proc_toupper(cp)); }
char32_t to_lower(char32_t cp) { return static_cast<char32_t>(utf8proc_tolower(cp)); }
char32_t to_title(char32_t cp) { return static_cast<char32_t>(utf8proc_totitle(cp)); }

// Full (not simple) upper-casing for the one mapping templates plausibly meet: German sharp s.
void append_upper(std::u32string& out, char32_t cp) {
  if (cp == U'\u00DF') {
    out += U"SS";
    return;
  }
  out += to_upper(cp);
}

template <typename Pred>
bool all_nonempty(std::string_view text, Pred pred) {
  auto s = utf8_decode(text);
  if (s.empty()) return false;
  for (char32_t cp : s)
    if (!pred(cp)) return false;
  return true;
}

}  // namespace

void append_utf8(std::string& out, char32_t cp) {
  if (is_escaped_byte(cp)) {
    out += static_cast<char>(cp - kEscapeBase);
  } else if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

std::u32string utf8_decode(std::string_view text) {
  std::u32string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    auto b = static_cast<unsigned char>(text[i]);
    int len = b < 0x80 ? 1 : (b >> 5) == 0x6 ? 2 : (b >> 4) == 0xE ? 3 : (b >> 3) == 0x1E ? 4 : 0;
    char32_t cp = len == 1 ? b : len == 2 ? (b & 0x1F) : len == 3 ? (b & 0x0F) : (b & 0x07);
    bool ok = len > 0 && i + len <= text.size();
    for (int k = 1; ok && k < len; ++k) {
      auto c = static_cast<unsigned char>(text[i + k]);
      ok = (c & 0xC0) == 0x80;
      cp = (cp << 6) | (c & 0x3F);
    }
    // Overlong forms, surrogates and values past U+10FFFF are invalid too.
    if (ok && ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
               (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF))
      ok = false;
    if (!ok) {
      out += kEscapeBase + b;
      ++i;
      continue;
    }
    out += cp;
    i += len;
  }
  return out;
}

std::string utf8_encode(std::u32string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char32_t cp : text) append_utf8(out, cp);
  return out;
}

size_t code_point_count(std::string_view text) { return utf8_decode(text).size(); }

bool py_isspace(char32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20) || cp == 0x85 || cp == 0xA0 ||
         cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 ||
         cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

std::string py_strip(std::string_view text, const std::optional<std::string>& chars, bool left,
                     bool right) {
  auto s = utf8_decode(text);
  std::u32string set = chars ? utf8_decode(*chars) : std::u32string();
  auto strip_it = [&](char32_t cp) {
    return chars ? set.find(cp) != std::u32string::npos : py_isspace(cp);
  };
  size_t b = 0, e = s.size();
  if (left)
    while (b < e && strip_it(s[b])) ++b;
  if (right)
    while (e > b && strip_it(s[e - 1])) --e;
  return utf8_encode(std::u32string_view(s).substr(b, e - b));
}

std::vector<std::string> py_split(std::string_view text, const std::optional<std::string>& sep,
                                  long maxsplit, bool from_right) {
  std::vector<std::string> parts;
  if (sep) {
    if (maxsplit < 0) maxsplit = static_cast<long>(text.size()) + 1;
    if (!from_right) {
      size_t start = 0;
      while (maxsplit-- > 0) {
        size_t at = text.find(*sep, start);
        if (at == std::string_view::npos) break;
        parts.emplace_back(text.substr(start, at - start));
        start = at + sep->size();
      }
      parts.emplace_back(text.substr(start));
    } else {
      size_t end = text.size();
      while (maxsplit-- > 0 && end >= sep->size()) {
        size_t at = text.rfind(*sep, end - sep->size());
        if (at == std::string_view::npos) break;
        parts.emplace_back(text.substr(at + sep->size(), end - at - sep->size()));
        end = at;
      }
      parts.emplace_back(text.substr(0, end));
      std::reverse(parts.begin(), parts.end());
    }
    return parts;
  }
  // Runs of whitespace; leading and trailing whitespace gives no empty parts.
  auto s = utf8_decode(text);
  if (maxsplit < 0) maxsplit = static_cast<long>(s.size()) + 1;
  if (!from_right) {
    size_t i = 0;
    while (true) {
      while (i < s.size() && py_isspace(s[i])) ++i;
      if (i == s.size()) break;
      if (maxsplit-- == 0) {
        // The remainder keeps its trailing whitespace, as CPython's split does.
        parts.push_back(utf8_encode(std::u32string_view(s).substr(i)));
        break;
      }
      size_t j = i;
      while (j < s.size() && !py_isspace(s[j])) ++j;
      parts.push_back(utf8_encode(std::u32string_view(s).substr(i, j - i)));
      i = j;
    }
  } else {
    size_t i = s.size();
    while (true) {
      while (i > 0 && py_isspace(s[i - 1])) --i;
      if (i == 0) break;
      if (maxsplit-- == 0) {
        parts.push_back(utf8_encode(std::u32string_view(s).substr(0, i)));
        break;
      }
      size_t j = i;
      while (j > 0 && !py_isspace(s[j - 1])) --j;
      parts.push_back(utf8_encode(std::u32string_view(s).substr(j, i - j)));
      i = j;
    }
    std::reverse(parts.begin(), parts.end());
  }
  return parts;
}

std::vector<std::string> py_splitlines(std::string_view text, bool keepends) {
  auto s = utf8_decode(text);
  std::vector<std::string> lines;
  size_t start = 0, i = 0;
  auto is_break = [](char32_t cp) {
    return cp == '\n' || cp == '\r' || cp == 0x0B || cp == 0x0C || cp == 0x1C || cp == 0x1D ||
           cp == 0x1E || cp == 0x85 || cp == 0x2028 || cp == 0x2029;
  };
  while (i < s.size()) {
    if (!is_break(s[i])) {
      ++i;
      continue;
    }
    size_t eol = i;
    i += (s[i] == '\r' && i + 1 < s.size() && s[i + 1] == '\n') ? 2 : 1;
    lines.push_back(
        utf8_encode(std::u32string_view(s).substr(start, (keepends ? i : eol) - start)));
    start = i;
  }
  if (start < s.size()) lines.push_back(utf8_encode(std::u32string_view(s).substr(start)));
  return lines;
}

std::string py_upper(std::string_view text) {
  std::u32string out;
  for (char32_t cp : utf8_decode(text)) append_upper(out, cp);
  return utf8_encode(out);
}

std::string py_lower(std::string_view text) {
  std::u32string s = utf8_decode(text);
  for (auto& cp : s) cp = to_lower(cp);
  return utf8_encode(s);
}

std::string py_title(std::string_view text) {
  std::u32string s = utf8_decode(text);
  bool previous_cased = false;
  for (auto& cp : s) {
    cp = previous_cased ? to_lower(cp) : to_title(cp);
    previous_cased = is_cased(cp);
  }
  return utf8_encode(s);
}

std::string py_capitalize(std::string_view text) {
  std::u32string s = utf8_decode(text);
  for (size_t i = 0; i < s.size(); ++i) s[i] = i == 0 ? to_title(s[i]) : to_lower(s[i]);
  return utf8_encode(s);
}

std::string py_swapcase(std::string_view text) {
  std::u32string out;
  for (char32_t cp : utf8_decode(text)) {
    if (is_upper_cp(cp))
      out += to_lower(cp);
    else if (is_lower_cp(cp))
      append_upper(out, cp);
    else
      out += cp;
  }
  return utf8_encode(out);
}

bool py_islower(std::string_view text) {
  bool cased = false;
  for (char32_t cp : utf8_decode(text)) {
    if (is_upper_cp(cp)) return false;
    cased = cased || is_lower_cp(cp);
  }
  return cased;
}

bool py_isupper(std::string_view text) {
  bool cased = false;
  for (char32_t cp : utf8_decode(text)) {
    if (is_lower_cp(cp)) return false;
    cased = cased || is_upper_cp(cp);
  }
  return cased;
}

bool py_isdigit(std::string_view text) {
  return all_nonempty(text, [](char32_t cp) { return category(cp) == UTF8PROC_CATEGORY_ND; });
}
bool py_isalpha(std::string_view text) {
  return all_nonempty(text, [](char32_t cp) {
    auto c = category(cp);
    return c >= UTF8PROC_CATEGORY_LU && c <= UTF8PROC_CATEGORY_LO;
  });
}
bool py_isnumeric(std::string_view text) {
  return all_nonempty(text, [](char32_t cp) {
    auto c = category(cp);
    return c == UTF8PROC_CATEGORY_ND || c == UTF8PROC_CATEGORY_NL || c == UTF8PROC_CATEGORY_NO;
  });
}
bool py_isalnum(std::string_view text) {
  return all_nonempty(text, [](char32_t cp) {
    auto c = category(cp);
    return (c >= UTF8PROC_CATEGORY_LU && c <= UTF8PROC_CATEGORY_LO) ||
           (c >= UTF8PROC_CATEGORY_ND && c <= UTF8PROC_CATEGORY_NO);
  });
}
bool py_isspace_str(std::string_view text) { return all_nonempty(text, py_isspace); }

std::string py_repr_string(std::string_view text) {
  auto s = utf8_decode(text);
  bool has_single = s.find(U'\'') != std::u32string::npos;
  bool has_double = s.find(U'"') != std::u32string::npos;
  char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  char buf[16];
  for (char32_t cp : s) {
    if (cp == static_cast<char32_t>(quote) || cp == '\\') {
      out += '\\';
      out += static_cast<char>(cp);
    } else if (cp == '\t') {
      out += "\\t";
    } else if (cp == '\n') {
      out += "\\n";
    } else if (cp == '\r') {
      out += "\\r";
    } else if (cp < 0x20 || cp == 0x7F) {
      std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned>(cp));
      out += buf;
    } else if (cp < 0x7F) {
      out += static_cast<char>(cp);
    } else {
      auto c = category(cp);
      bool printable =
          !(c == UTF8PROC_CATEGORY_CN || c == UTF8PROC_CATEGORY_CC || c == UTF8PROC_CATEGORY_CF ||
            c == UTF8PROC_CATEGORY_CS || c == UTF8PROC_CATEGORY_CO || c == UTF8PROC_CATEGORY_ZL ||
            c == UTF8PROC_CATEGORY_ZP || c == UTF8PROC_CATEGORY_ZS);
      if (printable && !is_escaped_byte(cp)) {
        append_utf8(out, cp);
      } else {
        if (cp <= 0xFF)
          std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned>(cp));
        else if (cp <= 0xFFFF)
          std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(cp));
        else
          std::snprintf(buf, sizeof buf, "\\U%08x", static_cast<unsigned>(cp));
        out += buf;
      }
    }
  }
  out += quote;
  return out;
}

std::optional<int64_t> parse_digits(std::string_view text) {
  if (text.empty() || text.size() > 18) return std::nullopt;
  int64_t v = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + (c - '0');
  }
  return v;
}

std::string py_float_repr(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  if (value == 0) return std::signbit(value) ? "-0.0" : "0.0";
  // The shortest round-trip digits, then CPython's layout: scientific when the decimal exponent is
  // below -4 or at least 16, fixed (with ".0" for whole numbers) otherwise.
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, value, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  bool negative = sci[0] == '-';
  if (negative) sci.erase(0, 1);
  size_t e = sci.find('e');
  std::string digits = sci.substr(0, e);
  digits.erase(std::remove(digits.begin(), digits.end(), '.'), digits.end());
  int exponent = std::stoi(sci.substr(e + 1));
  std::string out = negative ? "-" : "";
  if (exponent < -4 || exponent >= 16) {
    out += digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    std::snprintf(buf, sizeof buf, "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
    out += buf;
  } else if (exponent < 0) {
    out += "0." + std::string(static_cast<size_t>(-exponent - 1), '0') + digits;
  } else {
    auto point = static_cast<size_t>(exponent) + 1;
    if (digits.size() <= point) {
      out += digits + std::string(point - digits.size(), '0') + ".0";
    } else {
      out += digits.substr(0, point) + "." + digits.substr(point);
    }
  }
  return out;
}

std::string html_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '\'':
        out += "&#39;";
        break;
      case '"':
        out += "&#34;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

}  // namespace retain::jinja
