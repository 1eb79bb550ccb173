// UTF-8 validation (RFC 3629: no overlongs, no surrogates, nothing above U+10FFFF).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace retain {

// Returns the byte offset of the first invalid sequence, or std::string_view::npos if valid.
size_t find_invalid_utf8(std::string_view text);

// `text` with each byte that starts no valid sequence replaced by U+FFFD, so that it can go into a
// JSON reply (a library's message may quote a partial character of its input).
std::string valid_utf8(std::string_view text);

}  // namespace retain
