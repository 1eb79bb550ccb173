#include "eval/math/math_equivalence.h"

#include <cctype>
#include <limits>
#include <utility>
#include <vector>

namespace retain {

namespace {

// Python's str.replace: every non-overlapping occurrence, left to right.
std::string replace_all(std::string text, const std::string& from, const std::string& to) {
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size()))
    text.replace(at, from.size(), to);
  return text;
}

// Python's str.split(sep) with a non-empty separator.
std::vector<std::string> split(const std::string& text, const std::string& sep) {
  std::vector<std::string> out;
  size_t begin = 0;
  for (size_t at = text.find(sep); at != std::string::npos; at = text.find(sep, begin)) {
    out.push_back(text.substr(begin, at - begin));
    begin = at + sep.size();
  }
  out.push_back(text.substr(begin));
  return out;
}

// The byte length of the UTF-8 code point at `at` (a stray byte counts as one), so that s[0],
// s[1] and len(s) mean what they mean in Python.
size_t code_point_length(const std::string& s, size_t at) {
  const auto lead = static_cast<unsigned char>(s[at]);
  const size_t n = lead < 0x80           ? 1
                   : (lead >> 5) == 0x6  ? 2
                   : (lead >> 4) == 0xE  ? 3
                   : (lead >> 3) == 0x1E ? 4
                                         : 1;
  return at + n <= s.size() ? n : 1;
}

size_t code_points(const std::string& s) {
  size_t n = 0;
  for (size_t at = 0; at < s.size(); at += code_point_length(s, at)) ++n;
  return n;
}

// What a step of the official normalisation does when Python raises there.
struct Raised {};

std::string remove_right_units(const std::string& s) {
  // The official comment: "\text{ " only ever describes units (in the validation set).
  if (s.find("\\text{ ") == std::string::npos) return s;
  const auto parts = split(s, "\\text{ ");
  if (parts.size() != 2) throw Raised{};  // its assert
  return parts[0];
}

std::string fix_sqrt(const std::string& s) {
  if (s.find("\\sqrt") == std::string::npos) return s;
  const auto parts = split(s, "\\sqrt");
  std::string out = parts[0];
  for (size_t i = 1; i < parts.size(); ++i) {
    const std::string& part = parts[i];
    if (part.empty()) throw Raised{};  // split[0] of an empty string
    if (part[0] != '{') {
      const size_t a = code_point_length(part, 0);
      out += "\\sqrt{" + part.substr(0, a) + "}" + part.substr(a);
    } else {
      out += "\\sqrt" + part;
    }
  }
  return out;
}

std::string fix_fracs(const std::string& s) {
  const auto parts = split(s, "\\frac");
  std::string out = parts[0];
  for (size_t i = 1; i < parts.size(); ++i) {
    const std::string& part = parts[i];
    out += "\\frac";
    if (part.empty()) throw Raised{};  // substr[0] of an empty string
    if (part[0] == '{') {
      out += part;
      continue;
    }
    if (code_points(part) < 2) return s;  // its `assert len(substr) >= 2` returns the input
    const size_t a = code_point_length(part, 0);
    const size_t b = code_point_length(part, a);
    const std::string first = part.substr(0, a), second = part.substr(a, b);
    if (second != "{")
      out += "{" + first + "}{" + second + "}" + part.substr(a + b);
    else
      out += "{" + first + "}" + second + part.substr(a + b);
  }
  return out;
}

// Whether `s` is what Python's str(int(s)) gives back: int() accepts more (signs, spaces,
// underscores, leading zeros), but the official code then asserts the string is unchanged.
bool canonical_int(const std::string& s) {
  const size_t digits = !s.empty() && s[0] == '-' ? 1 : 0;
  if (s.size() == digits) return false;
  for (size_t i = digits; i < s.size(); ++i)
    if (!std::isdigit(static_cast<unsigned char>(s[i]))) return false;
  if (s[digits] == '0') return s == "0";
  return true;
}

std::string fix_a_slash_b(const std::string& s) {
  const auto parts = split(s, "/");
  if (parts.size() != 2 || !canonical_int(parts[0]) || !canonical_int(parts[1])) return s;
  return "\\frac{" + parts[0] + "}{" + parts[1] + "}";
}

std::string strip_or_raise(std::string s) {
  s = replace_all(s, "\n", "");
  s = replace_all(s, "\\!", "");
  s = replace_all(s, "\\\\", "\\");
  s = replace_all(s, "tfrac", "frac");
  s = replace_all(s, "dfrac", "frac");
  s = replace_all(s, "\\left", "");
  s = replace_all(s, "\\right", "");
  s = replace_all(s, "^{\\circ}", "");
  s = replace_all(s, "^\\circ", "");
  s = replace_all(s, "\\$", "");
  s = remove_right_units(s);
  s = replace_all(s, "\\%", "");
  s = replace_all(s, " .", " 0.");
  s = replace_all(s, "{.", "{0.");
  if (s.empty()) return s;
  if (s[0] == '.') s = "0" + s;
  // "k = 5" -> " 5": a name of at most two characters before the only "=".
  const auto sides = split(s, "=");
  if (sides.size() == 2 && code_points(sides[0]) <= 2) s = sides[1];
  s = fix_sqrt(s);
  s = replace_all(s, " ", "");
  s = fix_fracs(s);
  if (s == "0.5") s = "\\frac{1}{2}";
  return fix_a_slash_b(s);
}

// p / q reduced, q > 0; nullopt when the result leaves 64 bits.
std::optional<MathNumber> reduced(__int128 p, __int128 q) {
  if (q == 0) return std::nullopt;
  if (q < 0) p = -p, q = -q;
  __int128 a = p < 0 ? -p : p, b = q;
  while (b != 0) a = std::exchange(b, a % b);
  if (a > 1) p /= a, q /= a;
  constexpr __int128 kMax = std::numeric_limits<int64_t>::max();
  if (p > kMax || p < -kMax || q > kMax) return std::nullopt;
  return MathNumber{static_cast<int64_t>(p), static_cast<int64_t>(q)};
}

// An integer or decimal: -?digits(.digits?)? or -?.digits, digits grouped by commas in threes
// allowed before the point.
std::optional<MathNumber> parse_decimal(std::string s) {
  bool negative = false;
  if (!s.empty() && s[0] == '-') negative = true, s = s.substr(1);
  const size_t point = s.find('.');
  std::string whole = s.substr(0, point);
  const std::string fraction = point == std::string::npos ? "" : s.substr(point + 1);
  if (whole.find(',') != std::string::npos) {
    const auto groups = split(whole, ",");
    if (groups[0].empty() || groups[0].size() > 3) return std::nullopt;
    for (size_t i = 1; i < groups.size(); ++i)
      if (groups[i].size() != 3) return std::nullopt;
    whole = replace_all(whole, ",", "");
  }
  if (whole.empty() && fraction.empty()) return std::nullopt;
  const std::string digits = whole + fraction;
  for (char c : digits)
    if (!std::isdigit(static_cast<unsigned char>(c))) return std::nullopt;
  const size_t first = digits.find_first_not_of('0');
  // Up to 36 digits are exact in 128 bits; reduced() then keeps what fits 64.
  if ((first != std::string::npos && digits.size() - first > 36) || fraction.size() > 36)
    return std::nullopt;
  __int128 p = 0, q = 1;
  for (char c : digits) p = p * 10 + (c - '0');
  for (size_t i = 0; i < fraction.size(); ++i) q *= 10;
  return reduced(negative ? -p : p, q);
}

std::optional<MathNumber> divide(const std::optional<MathNumber>& a,
                                 const std::optional<MathNumber>& b) {
  if (!a || !b || b->numerator == 0) return std::nullopt;
  return reduced(static_cast<__int128>(a->numerator) * b->denominator,
                 static_cast<__int128>(a->denominator) * b->numerator);
}

}  // namespace

std::optional<std::string> math_strip_string(const std::string& text) {
  try {
    return strip_or_raise(text);
  } catch (const Raised&) {
    return std::nullopt;
  }
}

bool math_is_equiv(const std::optional<std::string>& a, const std::optional<std::string>& b) {
  if (!a && !b) return true;
  if (!a || !b) return false;
  const auto sa = math_strip_string(*a), sb = math_strip_string(*b);
  if (!sa || !sb) return *a == *b;
  return *sa == *sb;
}

std::optional<MathNumber> parse_math_number(const std::string& text) {
  const size_t begin = text.find_first_not_of(" \t\r\n");
  if (begin == std::string::npos) return std::nullopt;
  std::string s = text.substr(begin, text.find_last_not_of(" \t\r\n") - begin + 1);
  if (s.starts_with("-\\frac")) {
    const auto value = parse_math_number(s.substr(1));
    if (!value) return std::nullopt;
    return MathNumber{-value->numerator, value->denominator};
  }
  if (s.starts_with("\\frac{")) {
    // \frac{a}{b} with plain numbers a and b (no nested braces).
    const size_t close = s.find('}');
    if (close == std::string::npos || close + 1 >= s.size() || s[close + 1] != '{' ||
        s.back() != '}')
      return std::nullopt;
    const std::string top = s.substr(6, close - 6);
    const std::string bottom = s.substr(close + 2, s.size() - close - 3);
    if (top.find_first_of("{}") != std::string::npos ||
        bottom.find_first_of("{}") != std::string::npos)
      return std::nullopt;
    return divide(parse_decimal(top), parse_decimal(bottom));
  }
  const size_t slash = s.find('/');
  if (slash != std::string::npos) {
    if (s.find('/', slash + 1) != std::string::npos) return std::nullopt;
    return divide(parse_decimal(s.substr(0, slash)), parse_decimal(s.substr(slash + 1)));
  }
  return parse_decimal(s);
}

bool math_answers_equal(const std::string& answer, const std::string& gold) {
  if (math_is_equiv(answer, gold)) return true;
  const auto a = parse_math_number(math_strip_string(answer).value_or(answer));
  const auto b = parse_math_number(math_strip_string(gold).value_or(gold));
  return a && b && *a == *b;
}

std::string math_vote_key(const std::string& answer) {
  const std::string stripped = math_strip_string(answer).value_or(answer);
  if (const auto number = parse_math_number(stripped))
    return number->denominator == 1
               ? std::to_string(number->numerator)
               : std::to_string(number->numerator) + "/" + std::to_string(number->denominator);
  return stripped;
}

}  // namespace retain
