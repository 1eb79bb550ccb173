// What the fuzz targets share: a scratch directory per process for parsers that read files, and
// the rule every target checks: bad input throws retain::Error (a clear message), nothing else.
// Any other exception escapes LLVMFuzzerTestOneInput, aborts, and libFuzzer reports it with the
// input, as it does a crash or a sanitizer finding.
#pragma once

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>

#include "core/fs.h"

namespace retain::fuzz {

// A directory private to this process (removed by nobody: it lives in /tmp and holds one file).
inline const fs::path& scratch_dir() {
  static const fs::path dir = [] {
    std::string pattern = (fs::temp_directory_path() / "retain-fuzz-XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr) std::abort();
    return fs::path(pattern);
  }();
  return dir;
}

// Writes the input as `name` in the scratch directory and returns its path.
inline fs::path write_input(const std::string& name, const uint8_t* data, size_t size) {
  const fs::path path = scratch_dir() / name;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  return path;
}

// A property the target promises: its failure stops the run like a crash (libFuzzer keeps the
// input).
inline void require(bool ok) {
  if (!ok) __builtin_trap();
}

inline std::string as_text(const uint8_t* data, size_t size) {
  return std::string(reinterpret_cast<const char*>(data), size);
}

}  // namespace retain::fuzz
