#include "model/bench_model.h"

#include <ATen/Parallel.h>

#include "core/device.h"
#include "core/error.h"
#include "dist/parallel_groups.h"
#include "model/init_model.h"

namespace retain {

std::string BenchModelOptions::describe() const {
  return model_dir.empty() ? "preset " + preset + " (random weights)" : model_dir;
}

std::unique_ptr<Decoder> load_bench_model(const BenchModelOptions& o,
                                          std::shared_ptr<Collectives>* world) {
  if (o.threads > 0) at::set_num_threads(o.threads);
  c10::Device device = resolve_device(o.device);
  const ModelConfig config =
      o.model_dir.empty()
          ? ModelConfig::from_json(preset_config(o.arch, o.preset), "preset " + o.preset)
          : ModelConfig::load(o.model_dir);
  LoadOptions load{resolve_dtype(o.dtype, device, config.dtype), device};
  if (o.tensor_parallel > 1) {
    ParallelGroups groups =
        join_tensor_parallel(o.tensor_parallel, device, std::chrono::seconds(600));
    load.device = device;
    load.tensor_parallel = groups.tp;
    if (world != nullptr) *world = groups.world;
  }
  if (!o.model_dir.empty()) return std::make_unique<Decoder>(Decoder::load(o.model_dir, load));
  return std::make_unique<Decoder>(Decoder::random(config, load, o.seed));
}

}  // namespace retain
