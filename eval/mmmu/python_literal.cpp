#include "eval/mmmu/python_literal.h"

#include <cstdint>

#include "core/error.h"
#include "model/tokenizers/unicode.h"

namespace retain {

namespace {

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

class Parser {
 public:
  explicit Parser(const std::string& text) : s_(text) {}

  std::vector<std::string> list() {
    skip_space();
    const char open = peek();
    RETAIN_CHECK(open == '[' || open == '(', "expected '[' at byte ", pos_, ", found ", describe());
    const char close = open == '[' ? ']' : ')';
    ++pos_;
    std::vector<std::string> items;
    for (;;) {
      skip_space();
      if (peek() == close) break;
      items.push_back(string_item());
      skip_space();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      RETAIN_CHECK(peek() == close, "expected ',' or '", close, "' at byte ", pos_, ", found ",
                   describe());
    }
    ++pos_;
    skip_space();
    RETAIN_CHECK(pos_ == s_.size(), "unexpected ", describe(), " at byte ", pos_,
                 " after the list");
    return items;
  }

 private:
  char peek() const { return pos_ < s_.size() ? s_[pos_] : '\0'; }
  std::string describe() const {
    return pos_ < s_.size() ? str_cat("'", s_[pos_], "'") : std::string("the end of the text");
  }
  void skip_space() {
    // Inside brackets Python ignores newlines and backslash continuations between tokens.
    while (pos_ < s_.size()) {
      const char c = s_[pos_];
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f')
        ++pos_;
      else if (c == '\\' && pos_ + 1 < s_.size() && s_[pos_ + 1] == '\n')
        pos_ += 2;
      else
        break;
    }
  }

  // One or more adjacent string literals, concatenated.
  std::string string_item() {
    std::string out = literal();
    for (;;) {
      const size_t save = pos_;
      skip_space();
      if (starts_literal()) {
        out += literal();
      } else {
        pos_ = save;
        return out;
      }
    }
  }

  bool starts_literal() const {
    size_t p = pos_;
    while (p < s_.size() && p < pos_ + 2 && std::string("rRuU").find(s_[p]) != std::string::npos)
      ++p;
    return p < s_.size() && (s_[p] == '\'' || s_[p] == '"');
  }

  std::string literal() {
    bool raw = false;
    const size_t start = pos_;
    while (pos_ < s_.size() && std::string("rRuUbBfF").find(s_[pos_]) != std::string::npos) {
      const char p = s_[pos_];
      RETAIN_CHECK(p != 'b' && p != 'B', "a bytes literal at byte ", pos_, " (expected strings)");
      RETAIN_CHECK(p != 'f' && p != 'F', "an f-string at byte ", pos_,
                   " (not a literal: expected strings)");
      raw = raw || p == 'r' || p == 'R';
      ++pos_;
    }
    RETAIN_CHECK(pos_ - start <= 2 && (peek() == '\'' || peek() == '"'),
                 "expected a string literal at byte ", start, ", found ", describe());
    const char quote = s_[pos_];
    const bool triple = s_.compare(pos_, 3, std::string(3, quote)) == 0;
    pos_ += triple ? 3 : 1;
    std::string out;
    for (;;) {
      RETAIN_CHECK(pos_ < s_.size(), "the string literal opened at byte ", start, " is not closed");
      const char c = s_[pos_];
      if (c == quote && (!triple || s_.compare(pos_, 3, std::string(3, quote)) == 0)) {
        pos_ += triple ? 3 : 1;
        return out;
      }
      RETAIN_CHECK(triple || c != '\n', "a newline inside the string literal opened at byte ",
                   start);
      if (c != '\\') {
        out += c;
        ++pos_;
        continue;
      }
      RETAIN_CHECK(pos_ + 1 < s_.size(), "the string literal opened at byte ", start,
                   " ends in a backslash");
      if (raw) {
        // A raw literal keeps the backslash; it only stops the next character closing it.
        out += c;
        out += s_[pos_ + 1];
        pos_ += 2;
        continue;
      }
      escape(out);
    }
  }

  void escape(std::string& out) {
    const size_t at = pos_;
    const char e = s_[pos_ + 1];
    pos_ += 2;
    switch (e) {
      case '\n':
        return;  // a line continuation
      case '\\':
        out += '\\';
        return;
      case '\'':
        out += '\'';
        return;
      case '"':
        out += '"';
        return;
      case 'a':
        out += '\a';
        return;
      case 'b':
        out += '\b';
        return;
      case 'f':
        out += '\f';
        return;
      case 'n':
        out += '\n';
        return;
      case 'r':
        out += '\r';
        return;
      case 't':
        out += '\t';
        return;
      case 'v':
        out += '\v';
        return;
      case 'x':
        append_utf8(out, hex_digits(2, at));
        return;
      case 'u':
        append_utf8(out, hex_digits(4, at));
        return;
      case 'U': {
        const uint32_t cp = hex_digits(8, at);
        RETAIN_CHECK(cp <= 0x10FFFF, "\\U escape at byte ", at, " is beyond U+10FFFF");
        append_utf8(out, cp);
        return;
      }
      case 'N':
        fail("\\N{...} escape at byte ", at, " (Unicode names are not supported)");
      default:
        break;
    }
    if (e >= '0' && e <= '7') {
      uint32_t cp = static_cast<uint32_t>(e - '0');
      for (int n = 1; n < 3 && pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '7'; ++n)
        cp = cp * 8 + static_cast<uint32_t>(s_[pos_++] - '0');
      append_utf8(out, cp);
      return;
    }
    // Python keeps an unknown escape as written (with a warning).
    out += '\\';
    out += e;
  }

  uint32_t hex_digits(int count, size_t at) {
    uint32_t value = 0;
    for (int i = 0; i < count; ++i) {
      const int h = pos_ < s_.size() ? hex_value(s_[pos_]) : -1;
      RETAIN_CHECK(h >= 0, "truncated \\", s_[at + 1], " escape at byte ", at, " (expected ", count,
                   " hex digits)");
      value = value * 16 + static_cast<uint32_t>(h);
      ++pos_;
    }
    return value;
  }

  const std::string& s_;
  size_t pos_ = 0;
};

}  // namespace

std::optional<std::vector<std::string>> parse_python_string_list(const std::string& text,
                                                                 std::string* error) {
  try {
    return Parser(text).list();
  } catch (const Error& e) {
    if (error) *error = e.what();
    return std::nullopt;
  }
}

}  // namespace retain
