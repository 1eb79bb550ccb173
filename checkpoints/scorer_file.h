// Scorer files: the exported learned scorers of a run (`retain export` of a locret / kvzap run),
// loadable onto the model they were trained for and nothing else. A safetensors file with the
// ScorerBank's tensors (gates/scorer_bank.h names) and __metadata__: format "retain-scorer",
// format_version, scorer_config (JSON), base_fingerprint, recipe_sha256.
#pragma once

#include <memory>
#include <string>

#include "checkpoints/learned_file_info.h"
#include "core/fs.h"
#include "gates/scorer_bank.h"
#include "model/model_config.h"

namespace retain {

void write_scorer_file(const fs::path& path, const ScorerBank& scorer, const ScorerFileInfo& info);
ScorerFileInfo read_scorer_file_info(const fs::path& path);

// The scorer of a file on `device`, checked against `model`; a file made for another model, or
// of another kind than `kind` when given, is an error naming both. Loaded once per (file, device)
// in a process: the eval harness asks again for every cache it makes.
std::shared_ptr<const ScorerBank> load_scorer_file(const fs::path& path, const ModelConfig& model,
                                                   at::Device device, const std::string& kind = "");

}  // namespace retain
