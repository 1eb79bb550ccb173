#include "model/bench_model.h"

#include <ATen/Parallel.h>

#include "core/device.h"
#include "model/init_model.h"

namespace retain {

std::string BenchModelOptions::describe() const {
  return model_dir.empty() ? "preset " + preset + " (random weights)" : model_dir;
}

std::unique_ptr<Decoder> load_bench_model(const BenchModelOptions& o) {
  if (o.threads > 0) at::set_num_threads(o.threads);
  const c10::Device device = resolve_device(o.device);
  if (!o.model_dir.empty()) {
    ModelConfig config = ModelConfig::load(o.model_dir);
    return std::make_unique<Decoder>(
        Decoder::load(o.model_dir, {resolve_dtype(o.dtype, device, config.dtype), device}));
  }
  ModelConfig config =
      ModelConfig::from_json(preset_config(o.arch, o.preset), "preset " + o.preset);
  return std::make_unique<Decoder>(
      Decoder::random(config, {resolve_dtype(o.dtype, device, config.dtype), device}, o.seed));
}

}  // namespace retain
