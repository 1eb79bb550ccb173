#include "checkpoints/scorer_file.h"

#include <map>
#include <mutex>

#include "checkpoints/gate_file.h"
#include "core/error.h"
#include "core/safetensors.h"

namespace retain {

void write_scorer_file(const fs::path& path, const ScorerBank& scorer, const ScorerFileInfo& info) {
  SafetensorsWriter writer;
  for (const auto& [name, t] : scorer.named_parameters())
    writer.add(name, t.detach().to(at::kCPU).contiguous());
  writer.set_metadata("format", kScorerFileFormat);
  writer.set_metadata("format_version", std::to_string(kLearnedFileFormatVersion));
  writer.set_metadata("scorer_config", scorer.config().to_json().dump());
  writer.set_metadata("base_fingerprint", info.base_fingerprint);
  writer.set_metadata("recipe_sha256", info.recipe_sha256);
  writer.write(path);
}

ScorerFileInfo read_scorer_file_info(const fs::path& path) {
  return scorer_file_info(SafetensorsFile::open(path)->metadata(), path.string());
}

std::shared_ptr<const ScorerBank> load_scorer_file(const fs::path& path, const ModelConfig& model,
                                                   at::Device device, const std::string& kind) {
  static std::mutex mutex;
  static std::map<std::string, std::shared_ptr<const ScorerBank>> loaded;
  const std::string key =
      str_cat(fs::absolute(path).string(), "|", device.str(), "|", base_fingerprint(model));
  std::lock_guard<std::mutex> lock(mutex);
  auto check_kind = [&](ScorerKind found_kind) {
    const std::string found = scorer_kind_name(found_kind);
    RETAIN_CHECK(kind.empty() || found == kind, path.string(), ": a ", found,
                 " scorer, but the policy is ", kind);
  };
  if (auto it = loaded.find(key); it != loaded.end()) {
    check_kind(it->second->config().kind);
    return it->second;
  }
  const ScorerFileInfo info = read_scorer_file_info(path);
  check_kind(info.config.kind);
  RETAIN_CHECK(info.base_fingerprint == base_fingerprint(model), path.string(),
               ": this scorer was trained for another base model (fingerprint ",
               info.base_fingerprint, ", this model's is ", base_fingerprint(model), ")");
  auto scorer = std::make_shared<ScorerBank>(info.config, model, device, 0);
  auto file = SafetensorsFile::open(path);
  std::vector<std::pair<std::string, at::Tensor>> named;
  for (const auto& name : file->names()) named.emplace_back(name, file->tensor(name));
  scorer->load(named, path.string());
  for (auto& p : scorer->parameters()) p.requires_grad_(false);
  loaded[key] = scorer;
  return scorer;
}

}  // namespace retain
