#include "checkpoints/gate_file.h"

#include <torch/serialize.h>

#include <map>

#include "core/error.h"
#include "core/fs.h"
#include "core/safetensors.h"

namespace retain {

std::string base_fingerprint(const ModelConfig& model) {
  return str_cat(model.fingerprint(), "-v", model.vocab_size);
}

void write_gate_file(const fs::path& path, const GateBank& gates, const GateFileInfo& info) {
  SafetensorsWriter writer;
  for (const auto& [name, t] : gates.named_parameters())
    writer.add(name, t.detach().to(at::kCPU).contiguous());
  writer.set_metadata("format", kGateFileFormat);
  writer.set_metadata("format_version", std::to_string(kLearnedFileFormatVersion));
  writer.set_metadata("gate_config", gates.config().to_json().dump());
  writer.set_metadata("base_fingerprint", info.base_fingerprint);
  writer.set_metadata("budget", Json(info.budget).dump());
  writer.set_metadata("capacity", info.capacity);
  writer.set_metadata("recipe_sha256", info.recipe_sha256);
  writer.write(path);
}

GateFileInfo read_gate_file_info(const fs::path& path) {
  return gate_file_info(SafetensorsFile::open(path)->metadata(), path.string());
}

std::unique_ptr<GateBank> load_gate_file(const fs::path& path, const ModelConfig& model,
                                         at::Device device, GateFileInfo* info_out) {
  GateFileInfo info = read_gate_file_info(path);
  RETAIN_CHECK(info.base_fingerprint == base_fingerprint(model), path.string(),
               ": these gates were trained for another base model (fingerprint ",
               info.base_fingerprint, ", this model's is ", base_fingerprint(model), ")");
  auto gates = std::make_unique<GateBank>(info.config, model, device, 0);
  auto file = SafetensorsFile::open(path);
  std::vector<std::pair<std::string, at::Tensor>> named;
  for (const auto& name : file->names()) named.emplace_back(name, file->tensor(name));
  gates->load(named, path.string());
  if (info_out != nullptr) *info_out = info;
  return gates;
}

namespace {

// The tensors of an official release: a safetensors file, or the trimkv_weights.pth the
// vision-language releases save with torch.save (a dict of name -> tensor, read with LibTorch's
// unpickler).
std::map<std::string, at::Tensor> read_official_tensors(const fs::path& path) {
  std::map<std::string, at::Tensor> out;
  const std::string w = path.string();
  RETAIN_CHECK(fs::is_regular_file(path), w, ": no such file");
  if (path.extension() != ".pth" && path.extension() != ".pt" && path.extension() != ".bin") {
    auto file = SafetensorsFile::open(path);
    for (const auto& name : file->names()) out.emplace(name, file->tensor(name));
    return out;
  }
  const std::string bytes = read_text_file(path);
  c10::IValue value;
  try {
    value = torch::pickle_load(std::vector<char>(bytes.begin(), bytes.end()));
  } catch (const c10::Error& e) {
    fail(w, ": not a torch.save'd file LibTorch can read (", e.what_without_backtrace(),
         "; a file of CUDA tensors needs a CUDA build and device: save it with "
         "{k: v.cpu() for k, v in d.items()})");
  }
  RETAIN_CHECK(value.isGenericDict(), w, ": expected a dict of name -> tensor, found ",
               value.tagKind());
  for (const auto& item : value.toGenericDict()) {
    RETAIN_CHECK(item.key().isString() && item.value().isTensor(), w,
                 ": expected a dict of name -> tensor, found an entry of ", item.key().tagKind(),
                 " -> ", item.value().tagKind());
    out.emplace(item.key().toStringRef(), item.value().toTensor().to(at::kCPU));
  }
  return out;
}

}  // namespace

void import_official_gates(const fs::path& official, const fs::path& model_dir,
                           const fs::path& out) {
  ModelConfig model = ModelConfig::load(model_dir);
  const std::map<std::string, at::Tensor> tensors = read_official_tensors(official);
  const std::string w = official.string();
  // The layers' prefix: "model.layers." for text models; vision-language releases keep the
  // language model's layers under "model.language_model.layers." (transformers 5's layout).
  const std::string first = "0.self_attn.retention_gate.linear1.weight";
  std::string prefix;
  for (const auto& [key, tensor] : tensors)
    if (key.size() > first.size() && key.ends_with(first) &&
        key[key.size() - first.size() - 1] == '.') {
      prefix = key.substr(0, key.size() - first.size());
      break;
    }
  RETAIN_CHECK(!prefix.empty(), w, ": no '<prefix>.", first,
               "' (not an official TrimKV/DBTrimKV gate file? expected names like "
               "model.layers.0.self_attn.retention_gate.linear1.weight, or "
               "model.language_model.layers.0... for a vision-language model)");
  auto name = [&](int64_t l, const std::string& rest) {
    return str_cat(prefix, l, ".self_attn.retention_gate.", rest);
  };
  struct Lookup {
    const std::map<std::string, at::Tensor>& t;
    const std::string& where;
    bool contains(const std::string& n) const { return t.count(n) > 0; }
    at::Tensor tensor(const std::string& n) const {
      auto it = t.find(n);
      RETAIN_CHECK(it != t.end(), where, ": missing '", n, "'");
      return it->second;
    }
  };
  const Lookup lookup{tensors, w};
  const Lookup* file = &lookup;
  const bool mlp3 = file->contains(name(0, "linear3.weight"));
  const std::string out_layer = mlp3 ? "linear3" : "linear2";
  GateConfig config;
  config.arch = mlp3 ? GateArch::kMlp3 : GateArch::kMlp2;
  const at::Tensor first_weight = file->tensor(name(0, "linear1.weight"));
  RETAIN_CHECK(first_weight.dim() == 2 && first_weight.size(1) == model.hidden_size, w, ": '",
               name(0, "linear1.weight"), "' has shape ", first_weight.sizes(),
               "; expected (width, ", model.hidden_size, ") for this model");
  config.width = first_weight.size(0);
  // Tied when every layer carries the same projection and bias values.
  bool tied = true;
  for (int64_t l = 0; l < model.num_layers; ++l) {
    std::vector<std::string> parts = {"linear1.weight", "linear1.bias", out_layer + ".weight",
                                      "bias"};
    if (mlp3) parts.insert(parts.end(), {"linear2.weight", "linear2.bias"});
    for (const std::string& part : parts)
      RETAIN_CHECK(file->contains(name(l, part)), w, ": missing '", name(l, part),
                   "' (the model has ", model.num_layers, " layers)");
    tied = tied &&
           at::equal(file->tensor(name(l, out_layer + ".weight")),
                     file->tensor(name(0, out_layer + ".weight"))) &&
           at::equal(file->tensor(name(l, "bias")), file->tensor(name(0, "bias")));
  }
  config.tie_projection = tied && model.num_layers > 1;
  GateBank gates(config, model, at::kCPU, 0);
  std::vector<std::pair<std::string, at::Tensor>> named;
  for (int64_t l = 0; l < model.num_layers; ++l) {
    const std::string p = str_cat("layers.", l, ".gate.");
    named.emplace_back(p + "linear1.weight",
                       file->tensor(name(l, "linear1.weight")).to(at::kFloat));
    named.emplace_back(p + "linear1.bias", file->tensor(name(l, "linear1.bias")).to(at::kFloat));
    if (mlp3) {
      named.emplace_back(p + "linear2.weight",
                         file->tensor(name(l, "linear2.weight")).to(at::kFloat));
      named.emplace_back(p + "linear2.bias", file->tensor(name(l, "linear2.bias")).to(at::kFloat));
    }
    if (!config.tie_projection) {
      named.emplace_back(p + out_layer + ".weight",
                         file->tensor(name(l, out_layer + ".weight")).to(at::kFloat));
      named.emplace_back(p + "bias", file->tensor(name(l, "bias")).to(at::kFloat));
    }
  }
  if (config.tie_projection) {
    named.emplace_back("tied.gate." + out_layer + ".weight",
                       file->tensor(name(0, out_layer + ".weight")).to(at::kFloat));
    named.emplace_back("tied.gate.bias", file->tensor(name(0, "bias")).to(at::kFloat));
  }
  gates.load(named, w);
  GateFileInfo info;
  info.base_fingerprint = base_fingerprint(model);
  info.capacity = tied ? "global" : "local";
  info.recipe_sha256 = "imported:" + w;
  write_gate_file(out, gates, info);
}

}  // namespace retain
