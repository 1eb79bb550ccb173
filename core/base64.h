// Base64 (RFC 4648, standard alphabet) decoding, for images given inline in JSON (data: URIs).
// Strict: padding to a multiple of 4 characters, '=' only at the end, no other characters
// (whitespace included), as Python's base64.b64decode(s, validate=True).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace retain {

// The decoded bytes, or nullopt with `error` saying what is wrong and where.
std::optional<std::vector<uint8_t>> decode_base64(std::string_view text,
                                                  std::string* error = nullptr);

}  // namespace retain
