// Gate files: the exported retention gates of a run (`retain export`), loadable onto the model
// they were trained for and nothing else.
//
// A gate file is a safetensors file with the GateBank's tensors (gates/gate_bank.h names) and
// __metadata__: format "retain-gates", format_version, gate_config (JSON), base_fingerprint
// (model config hash + vocab size), budget (M), capacity (local|global), recipe_sha256.
//
// `import_official_gates` maps the TrimKV/DBTrimKV release names
// (model.layers.{l}.self_attn.retention_gate.linear{1,2,3}.* and ...retention_gate.bias; the
// vision-language releases' model.language_model.layers.{l}...) onto ours, detecting mlp2/mlp3
// from the tensors present and tying from whether the projection is identical in every layer.
// It reads safetensors, or the trimkv_weights.pth (torch.save of the gates' state dict) the
// official code saves for Qwen3-VL / Qwen2.5-VL.
#pragma once

#include <memory>
#include <string>

#include "checkpoints/learned_file_info.h"
#include "core/fs.h"
#include "gates/gate_bank.h"
#include "model/model_config.h"

namespace retain {

std::string base_fingerprint(const ModelConfig& model);

void write_gate_file(const fs::path& path, const GateBank& gates, const GateFileInfo& info);

// Reads a gate file's metadata and checks it was made for `model`.
GateFileInfo read_gate_file_info(const fs::path& path);

// Loads the gates of a file onto a model; a file made for another model is an error naming both
// fingerprints.
std::unique_ptr<GateBank> load_gate_file(const fs::path& path, const ModelConfig& model,
                                         at::Device device, GateFileInfo* info = nullptr);

void import_official_gates(const fs::path& official, const fs::path& model_dir,
                           const fs::path& out);

}  // namespace retain
