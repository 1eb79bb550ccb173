// Python's str semantics on UTF-8 text, as the Jinja engine needs them: templates index, slice,
// strip, split and case-map strings the way CPython does (code points, str.isspace, full repr).
// Bytes that are not valid UTF-8 survive a decode/encode round trip unchanged (as U+DC80..DCFF,
// like Python's surrogateescape), so no input makes these helpers fail.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace retain::jinja {

std::u32string utf8_decode(std::string_view text);
std::string utf8_encode(std::u32string_view text);
void append_utf8(std::string& out, char32_t cp);
size_t code_point_count(std::string_view text);

// str.isspace() and re's \s for str patterns: the same set in CPython.
bool py_isspace(char32_t cp);
// str.strip/lstrip/rstrip: whitespace when `chars` is empty, else the code points of *chars.
std::string py_strip(std::string_view text, const std::optional<std::string>& chars, bool left,
                     bool right);
// str.split / str.rsplit (sep empty: runs of whitespace). maxsplit < 0: no limit.
std::vector<std::string> py_split(std::string_view text, const std::optional<std::string>& sep,
                                  long maxsplit, bool from_right);
std::vector<std::string> py_splitlines(std::string_view text, bool keepends);
std::string py_upper(std::string_view text);
std::string py_lower(std::string_view text);
std::string py_title(std::string_view text);       // str.title()
std::string py_capitalize(std::string_view text);  // str.capitalize()
std::string py_swapcase(std::string_view text);
// str.islower() / str.isupper(): at least one cased code point, all of them of that case.
bool py_islower(std::string_view text);
bool py_isupper(std::string_view text);
bool py_isdigit(std::string_view text);
bool py_isalpha(std::string_view text);
bool py_isalnum(std::string_view text);
bool py_isnumeric(std::string_view text);
bool py_isspace_str(std::string_view text);

// A run of ASCII digits as a number, or nothing when empty, not all digits, or past int64.
std::optional<int64_t> parse_digits(std::string_view text);

// repr() of a str: quotes chosen as CPython does, escapes for non-printable code points.
std::string py_repr_string(std::string_view text);
// repr() of a float: the shortest text that reads back to the same double ("1.0", "1e-05").
std::string py_float_repr(double value);
// markupsafe.escape: & < > ' " as HTML entities.
std::string html_escape(std::string_view text);

}  // namespace retain::jinja
