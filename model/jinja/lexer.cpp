#include "model/jinja/lexer.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "core/error.h"
#include "model/jinja/text.h"

namespace retain::jinja {

namespace {

bool is_ascii_digit(char c) { return c >= '0' && c <= '9'; }
bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_name_char(char c) { return is_name_start(c) || is_ascii_digit(c); }

// Python's unicode_escape decoding of a string literal's body (jinja2 decodes literals so).
std::string decode_string_literal(const std::string& body, const std::string& where) {
  std::string out;
  for (size_t i = 0; i < body.size(); ++i) {
    char c = body[i];
    if (c != '\\' || i + 1 == body.size()) {
      out += c;
      continue;
    }
    char e = body[++i];
    auto hex = [&](int digits) -> char32_t {
      std::string h = body.substr(i + 1, digits);
      if (static_cast<int>(h.size()) != digits || !std::all_of(h.begin(), h.end(), [](char x) {
            return std::isxdigit(static_cast<unsigned char>(x)) != 0;
          }))
        fail(where, ": truncated \\", e, " escape in a string literal");
      i += digits;
      return static_cast<char32_t>(std::strtoul(h.c_str(), nullptr, 16));
    };
    switch (e) {
      case '\n':
        break;  // a line continuation
      case '\\':
      case '\'':
      case '"':
        out += e;
        break;
      case 'a':
        out += '\a';
        break;
      case 'b':
        out += '\b';
        break;
      case 'f':
        out += '\f';
        break;
      case 'n':
        out += '\n';
        break;
      case 'r':
        out += '\r';
        break;
      case 't':
        out += '\t';
        break;
      case 'v':
        out += '\v';
        break;
      case 'x':
        append_utf8(out, hex(2));
        break;
      case 'u':
        append_utf8(out, hex(4));
        break;
      case 'U': {
        char32_t cp = hex(8);
        if (cp > 0x10FFFF) fail(where, ": illegal Unicode character in a string literal");
        append_utf8(out, cp);
        break;
      }
      case 'N':
        fail(where,
             ": \\N{...} escapes in string literals are outside the Jinja subset retain "
             "supports");
      default:
        if (e >= '0' && e <= '7') {
          int v = e - '0';
          for (int k = 0; k < 2 && i + 1 < body.size() && body[i + 1] >= '0' && body[i + 1] <= '7';
               ++k)
            v = v * 8 + (body[++i] - '0');
          append_utf8(out, static_cast<char32_t>(v));
        } else {
          out += '\\';
          out += e;
        }
    }
  }
  return out;
}

class Lexer {
 public:
  Lexer(const std::string& source, const std::string& name) : name_(name) {
    // Newlines become "\n", and one trailing newline goes (keep_trailing_newline=False).
    src_.reserve(source.size());
    for (size_t i = 0; i < source.size(); ++i) {
      if (source[i] == '\r') {
        src_ += '\n';
        if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
      } else {
        src_ += source[i];
      }
    }
    if (!src_.empty() && src_.back() == '\n') src_.pop_back();
    for (size_t i = 0; i < src_.size(); ++i)
      if (src_[i] == '\n') line_starts_.push_back(i + 1);
  }

  std::vector<Token> run() {
    while (pos_ < src_.size()) root();
    push(TokenType::kEof, "", src_.size());
    return std::move(tokens_);
  }

 private:
  int line_at(size_t pos) const {
    return static_cast<int>(std::upper_bound(line_starts_.begin(), line_starts_.end(), pos) -
                            line_starts_.begin()) +
           1;
  }
  [[noreturn]] void error(size_t pos, const std::string& what) const {
    fail(name_, ":", line_at(pos), ": ", what);
  }
  Token& push(TokenType type, std::string value, size_t at) {
    tokens_.push_back(Token{type, std::move(value), line_at(at)});
    return tokens_.back();
  }
  bool at(size_t pos, const char* s) const { return src_.compare(pos, std::strlen(s), s) == 0; }

  // Python's \s at `pos`: the byte length of the whitespace code point there, or 0.
  size_t space_at(size_t pos) const {
    if (pos >= src_.size()) return 0;
    auto b = static_cast<unsigned char>(src_[pos]);
    size_t len = b < 0x80 ? 1 : b >= 0xF0 ? 4 : b >= 0xE0 ? 3 : 2;
    if (pos + len > src_.size()) return 0;
    auto cps = utf8_decode(std::string_view(src_).substr(pos, len));
    return cps.size() == 1 && py_isspace(cps[0]) ? len : 0;
  }
  void skip_spaces() {
    while (size_t n = space_at(pos_)) pos_ += n;
  }

  // Text before a tag, with lstrip_blocks and the tag's `-` / `+` applied, as jinja2's
  // OptionalLStrip does. `block_like`: a {% or {# tag (lstrip_blocks leaves {{ alone).
  void data_before(size_t begin, size_t end, char sign, bool block_like) {
    std::string text = src_.substr(begin, end - begin);
    if (sign == '-') {
      text = py_strip(text, std::nullopt, false, true);
    } else if (sign != '+' && block_like) {
      size_t l_pos = text.rfind('\n');
      l_pos = l_pos == std::string::npos ? 0 : l_pos + 1;
      if ((l_pos > 0 || line_starting_) &&
          py_strip(std::string_view(text).substr(l_pos), std::nullopt, true, false).empty())
        text.resize(l_pos);
    }
    if (!text.empty()) push(TokenType::kData, std::move(text), begin);
  }

  // After a %} or #}: `-` eats all following whitespace, `+` nothing, else trim_blocks one "\n".
  void block_end_tail(char sign) {
    if (sign == '-')
      skip_spaces();
    else if (sign != '+' && pos_ < src_.size() && src_[pos_] == '\n')
      ++pos_;
  }

  // {% raw %} at `tag` (its text before already handled by the caller when it matches).
  bool raw_begin(size_t tag, size_t& after) const {
    size_t p = tag + 2;
    if (p < src_.size() && (src_[p] == '-' || src_[p] == '+')) ++p;
    auto skip = [&](size_t q) {
      while (size_t n = space_at(q)) q += n;
      return q;
    };
    p = skip(p);
    if (!at(p, "raw") || (p + 3 < src_.size() && is_name_char(src_[p + 3]))) return false;
    p = skip(p + 3);
    if (at(p, "-%}")) {
      after = skip(p + 3);
      return true;
    }
    if (at(p, "%}")) {
      after = p + 2;
      return true;
    }
    return false;
  }

  void raw_body(size_t begin_tag) {
    // The body runs to {%[-+]? endraw [-+]?%}; its tail is stripped like any text before a tag.
    size_t search = pos_;
    while (true) {
      size_t tag = src_.find("{%", search);
      if (tag == std::string::npos) error(begin_tag, "Missing end of raw directive");
      size_t p = tag + 2;
      char sign = 0;
      if (p < src_.size() && (src_[p] == '-' || src_[p] == '+')) sign = src_[p++];
      while (size_t n = space_at(p)) p += n;
      if (at(p, "endraw")) {
        p += 6;
        while (size_t n = space_at(p)) p += n;
        char end_sign = 0;
        if (at(p, "+%}") || at(p, "-%}")) end_sign = src_[p++];
        if (at(p, "%}")) {
          data_before(pos_, tag, sign, true);
          pos_ = p + 2;
          block_end_tail(end_sign);
          line_starting_ = pos_ > 0 && src_[pos_ - 1] == '\n';
          return;
        }
      }
      search = tag + 2;
    }
  }

  void root() {
    size_t tag = pos_;
    char kind = 0;
    while (true) {
      tag = src_.find('{', tag);
      if (tag == std::string::npos || tag + 1 >= src_.size()) {
        push(TokenType::kData, src_.substr(pos_), pos_);
        pos_ = src_.size();
        return;
      }
      kind = src_[tag + 1];
      if (kind == '%' || kind == '{' || kind == '#') break;
      ++tag;
    }
    char sign = 0;
    if (tag + 2 < src_.size() && (src_[tag + 2] == '-' || src_[tag + 2] == '+'))
      sign = src_[tag + 2];
    size_t raw_after = 0;
    if (kind == '%' && raw_begin(tag, raw_after)) {
      data_before(pos_, tag, sign, true);
      pos_ = raw_after;
      line_starting_ = src_[pos_ - 1] == '\n';
      raw_body(tag);
      return;
    }
    data_before(pos_, tag, sign, kind != '{');
    pos_ = tag + 2 + (sign ? 1 : 0);
    line_starting_ = false;
    if (kind == '#') {
      comment(tag);
      return;
    }
    push(kind == '%' ? TokenType::kBlockBegin : TokenType::kVarBegin, "", tag);
    inside_tag(kind == '%', tag);
  }

  void comment(size_t tag) {
    size_t search = pos_;
    size_t end = src_.find("#}", search);
    if (end == std::string::npos) error(tag, "Missing end of comment tag");
    char sign = 0;
    if (end > pos_ && (src_[end - 1] == '-' || src_[end - 1] == '+')) sign = src_[end - 1];
    pos_ = end + 2;
    block_end_tail(sign);
    line_starting_ = src_[pos_ - 1] == '\n';
  }

  void inside_tag(bool block, size_t tag) {
    std::vector<char> brackets;
    while (true) {
      if (pos_ >= src_.size())
        error(tag, block ? "unexpected end of template: the {% tag is not closed"
                         : "unexpected end of template: the {{ tag is not closed");
      if (brackets.empty()) {
        char sign = 0;
        size_t p = pos_;
        if (src_[p] == '-' || (block && src_[p] == '+')) sign = src_[p++];
        if (block ? at(p, "%}") : at(p, "}}")) {
          push(block ? TokenType::kBlockEnd : TokenType::kVarEnd, "", pos_);
          pos_ = p + 2;
          if (block)
            block_end_tail(sign);
          else if (sign == '-')
            skip_spaces();
          line_starting_ = src_[pos_ - 1] == '\n';
          return;
        }
      }
      if (size_t n = space_at(pos_)) {
        pos_ += n;
        continue;
      }
      char c = src_[pos_];
      if (is_ascii_digit(c)) {
        number();
      } else if (is_name_start(c)) {
        size_t b = pos_;
        while (pos_ < src_.size() && is_name_char(src_[pos_])) ++pos_;
        push(TokenType::kName, src_.substr(b, pos_ - b), b);
      } else if (c == '\'' || c == '"') {
        string_literal();
      } else {
        op(brackets);
      }
    }
  }

  // jinja2's float_re then integer_re: digit groups joined by single underscores, floats with a
  // fraction and/or an exponent, integers in base 10 (no leading zeros but 0, 00, ...) or 0b/0o/0x.
  size_t digit_run(size_t p, int base) const {
    auto is_digit = [&](char c) {
      if (base == 16) return std::isxdigit(static_cast<unsigned char>(c)) != 0;
      return c >= '0' && c < static_cast<char>('0' + base);
    };
    size_t q = p;
    while (q < src_.size() && is_digit(src_[q])) {
      ++q;
      if (q + 1 < src_.size() && src_[q] == '_' && is_digit(src_[q + 1])) ++q;
    }
    return q;
  }

  void number() {
    size_t b = pos_;
    // No float right after a dot: `x.0.1` is two item lookups.
    if (b == 0 || src_[b - 1] != '.') {
      size_t q = digit_run(b, 10);
      bool is_float = false;
      if (q + 1 < src_.size() && src_[q] == '.' && is_ascii_digit(src_[q + 1])) {
        q = digit_run(q + 1, 10);
        is_float = true;
      }
      if (q < src_.size() && (src_[q] == 'e' || src_[q] == 'E')) {
        size_t e = q + 1;
        if (e < src_.size() && (src_[e] == '+' || src_[e] == '-')) ++e;
        if (e < src_.size() && is_ascii_digit(src_[e])) {
          q = digit_run(e, 10);
          is_float = true;
        }
      }
      if (is_float) {
        std::string text = src_.substr(b, q - b);
        text.erase(std::remove(text.begin(), text.end(), '_'), text.end());
        pos_ = q;
        push(TokenType::kFloat, text, b).float_value = std::strtod(text.c_str(), nullptr);
        return;
      }
    }
    int base = 10;
    size_t digits = b;
    if (src_[b] == '0' && b + 2 < src_.size()) {
      char k = static_cast<char>(std::tolower(static_cast<unsigned char>(src_[b + 1])));
      int prefixed = k == 'b' ? 2 : k == 'o' ? 8 : k == 'x' ? 16 : 0;
      size_t first = b + 2 + (src_[b + 2] == '_' ? 1 : 0);
      if (prefixed && digit_run(first, prefixed) > first) {
        base = prefixed;
        digits = first;
      }
    }
    size_t q;
    if (base != 10)
      q = digit_run(digits, base);
    else if (src_[b] != '0')
      q = digit_run(b, 10);
    else
      for (q = b + 1;
           q < src_.size() &&
           (src_[q] == '0' || (src_[q] == '_' && q + 1 < src_.size() && src_[q + 1] == '0'));)
        ++q;
    std::string text = src_.substr(digits, q - digits);
    text.erase(std::remove(text.begin(), text.end(), '_'), text.end());
    pos_ = q;
    errno = 0;
    long long v = std::strtoll(text.c_str(), nullptr, base);
    if (errno == ERANGE)
      error(b, "integer literal " + src_.substr(b, q - b) + " is larger than 64 bits");
    push(TokenType::kInt, src_.substr(b, q - b), b).int_value = v;
  }

  void string_literal() {
    size_t b = pos_;
    char quote = src_[pos_++];
    std::string body;
    while (true) {
      if (pos_ >= src_.size()) unexpected_char(b);
      char c = src_[pos_];
      if (c == '\\' && pos_ + 1 < src_.size()) {
        body += c;
        body += src_[pos_ + 1];
        pos_ += 2;
        continue;
      }
      ++pos_;
      if (c == quote) break;
      body += c;
    }
    push(TokenType::kString, decode_string_literal(body, name_ + ":" + std::to_string(line_at(b))),
         b);
  }

  void op(std::vector<char>& brackets) {
    static const char* const kOps[] = {"//", "**", "==", "!=", ">=", "<=", "+", "-", "/",
                                       "*",  "%",  "~",  "[",  "]",  "(",  ")", "{", "}",
                                       ">",  "<",  "=",  ".",  ":",  "|",  ",", ";"};
    for (const char* o : kOps) {
      if (!at(pos_, o)) continue;
      char c = o[0];
      if (c == '(' || c == '[' || c == '{') {
        brackets.push_back(c == '(' ? ')' : c == '[' ? ']' : '}');
      } else if (o[1] == 0 && (c == ')' || c == ']' || c == '}')) {
        if (brackets.empty()) error(pos_, std::string("unexpected '") + c + "'");
        if (brackets.back() != c)
          error(pos_, std::string("unexpected '") + c + "', expected '" + brackets.back() + "'");
        brackets.pop_back();
      }
      push(TokenType::kOp, o, pos_);
      pos_ += std::strlen(o);
      return;
    }
    unexpected_char(pos_);
  }

  // jinja2's message: the character and its offset in the source (in code points).
  [[noreturn]] void unexpected_char(size_t pos) const {
    std::string ch;
    append_utf8(ch, utf8_decode(std::string_view(src_).substr(pos, 4))[0]);
    error(pos, "unexpected char " + py_repr_string(ch) + " at " +
                   std::to_string(code_point_count(std::string_view(src_).substr(0, pos))));
  }

  std::string name_;
  std::string src_;
  std::vector<size_t> line_starts_;
  std::vector<Token> tokens_;
  size_t pos_ = 0;
  bool line_starting_ = true;
};

}  // namespace

std::vector<Token> tokenize(const std::string& source, const std::string& name) {
  return Lexer(source, name).run();
}

std::string describe_token(const Token& token) {
  switch (token.type) {
    case TokenType::kData:
      return "template data / text";
    case TokenType::kBlockBegin:
      return "begin of statement block";
    case TokenType::kBlockEnd:
      return "end of statement block";
    case TokenType::kVarBegin:
      return "begin of print statement";
    case TokenType::kVarEnd:
      return "end of print statement";
    case TokenType::kEof:
      return "end of template";
    case TokenType::kString:
      return "string";
    case TokenType::kInt:
      return "integer";
    case TokenType::kFloat:
      return "float";
    default:
      return token.value;
  }
}

}  // namespace retain::jinja
