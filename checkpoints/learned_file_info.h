// What gate and scorer files say about themselves: their safetensors __metadata__ read and checked,
// free of LibTorch (the fuzzer, fuzz/learned_file_info_fuzz.cpp, builds it alone). The formats:
// checkpoints/gate_file.h and checkpoints/scorer_file.h.
#pragma once

#include <map>
#include <string>

#include "gates/learned_config.h"

namespace retain {

inline constexpr const char* kGateFileFormat = "retain-gates";
inline constexpr const char* kScorerFileFormat = "retain-scorer";
inline constexpr int kLearnedFileFormatVersion = 1;

struct GateFileInfo {
  GateConfig config;
  std::string base_fingerprint;
  double budget = 0;
  std::string capacity;
  std::string recipe_sha256;
};

struct ScorerFileInfo {
  ScorerConfig config;
  std::string base_fingerprint;
  std::string recipe_sha256;
};

using FileMetadata = std::map<std::string, std::string>;

// Throw retain::Error naming `where` for a file of another format or version, a missing key, or a
// value that does not parse (gate_config / scorer_config JSON, a budget that is not a number >= 0).
GateFileInfo gate_file_info(const FileMetadata& metadata, const std::string& where);
ScorerFileInfo scorer_file_info(const FileMetadata& metadata, const std::string& where);

}  // namespace retain
