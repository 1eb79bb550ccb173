// SHA-256 (FIPS 180-4), for fingerprints that must be stable across machines: the tokenizer hash
// in token shards, recipe hashes in gate files.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "core/fs.h"

namespace retain {

std::string sha256_hex(std::string_view data);
std::string sha256_file_hex(const fs::path& path);

// A file's identity for resume checks: its SHA-256 up to 64 MiB; above that its size and
// modification time (hashing a 16 GB checkpoint on every resume would cost minutes).
std::string file_stamp(const fs::path& path);

// {file name: file_stamp} of the regular files directly in `dir` (a model directory: weights,
// config, tokenizer).
std::map<std::string, std::string> directory_stamps(const fs::path& dir);

}  // namespace retain
