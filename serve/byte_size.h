// Byte sizes as flags take them: "512", "64MiB", "2G", "1.5GB".
#pragma once

#include <cstdint>
#include <string>

namespace retain {

// K/M/G and KiB/MiB/GiB are powers of 1024, KB/MB/GB of 1000; errors name the flag and the text.
int64_t parse_bytes(const std::string& text, const std::string& flag);

}  // namespace retain
