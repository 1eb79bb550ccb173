// The trainer's checkpoints: a step directory (checkpoints/step_dir.h) written by rank 0 with the
// trainable parameters, the CPU RNG state, the optimizer, the resolved recipe, the sampler's
// position and the non-finite counters (and, for gates, a ready gate file); restore reads it back
// so a resumed run continues bit for bit.
#include <torch/serialize.h>

#include <sstream>

#include "checkpoints/step_dir.h"
#include "core/error.h"
#include "core/fs.h"
#include "core/log.h"
#include "core/safetensors.h"
#include "trainer/trainer.h"

namespace retain {

void Trainer::save_checkpoint(int64_t step) {
  // Rank 0 writes while the others wait, so nobody reads a half-written step directory.
  if (!leader()) {
    comm_->barrier();
    return;
  }
  Json extra = {
      {"kind", trainable_->checkpoint_kind()},
      {"recipe_sha256", recipe_sha_},
      {"base_files", base_files_},
      {"sampler", {{"epoch", sampler_->state().epoch}, {"consumed", sampler_->state().consumed}}},
      {"nonfinite", {{"consecutive", consecutive_nonfinite_}, {"skipped", skipped_steps_}}}};
  write_step_dir(s_.run_dir, step, extra, [&](const fs::path& dir) {
    SafetensorsWriter params;
    for (const auto& [name, t] : trainable_->named_parameters())
      params.add(name, t.detach().to(at::kCPU));
    params.add("rng.cpu", at::detail::getDefaultCPUGenerator().get_state());
    params.write(dir / "params.safetensors");
    // Serialized in memory, then written as any file: LibTorch's file writer throws from its
    // destructor when the disk is full, which ends the process without a message.
    std::ostringstream optimizer_bytes;
    torch::save(*optimizer_, optimizer_bytes);
    write_text_file_atomic(dir / "optimizer.pt", optimizer_bytes.str());
    write_text_file_atomic(dir / "recipe.yaml", recipe_.dump());
    trainable_->write_artifacts(dir);
  });
  prune_step_dirs(s_.run_dir, s_.keep_last_k);
  comm_->barrier();
}

int64_t Trainer::restore() {
  if (leader())
    if (const int64_t n = remove_interrupted_writes(s_.run_dir))
      log_warn(s_.run_dir.string(), ": removed ", n,
               " checkpoint write(s) a kill interrupted (no manifest, never used)");
  std::optional<fs::path> dir;
  if (s_.resume == "auto")
    dir = latest_step_dir(s_.run_dir);
  else if (s_.resume != "never")
    dir = fs::path(s_.resume);
  if (!dir) return 0;
  Json manifest = read_manifest(*dir);
  RETAIN_CHECK(manifest.value("kind", "") == trainable_->checkpoint_kind(), dir->string(),
               ": checkpoint kind '", manifest.value("kind", ""),
               "' does not match train.trainable");
  // Gates (or a scorer) fitted to one base are no start for another: a base retrained in place
  // (the same model.path) must not resume from the old one's checkpoints. Older checkpoints lack
  // the record and resume as before.
  if (manifest.contains("base_files")) {
    const auto before = manifest.at("base_files").get<std::map<std::string, std::string>>();
    std::string changed;
    for (const auto& [name, stamp] : base_files_)
      if (!before.count(name) || before.at(name) != stamp) changed += " " + name;
    for (const auto& [name, stamp] : before)
      if (!base_files_.count(name)) changed += " " + name + " (gone)";
    RETAIN_CHECK(changed.empty(), dir->string(), ": this checkpoint was trained on another base (",
                 s_.model_dir.string(), " changed:", changed, "); use another run.dir, or delete ",
                 s_.run_dir.string(), " to train from the start");
  }
  auto params = SafetensorsFile::open(*dir / "params.safetensors");
  {
    at::NoGradGuard no_grad;
    for (const auto& [name, t] : trainable_->named_parameters()) {
      RETAIN_CHECK(params->contains(name), dir->string(), ": params.safetensors lacks '", name,
                   "' (was the run started with another gate or model config?)");
      RETAIN_CHECK(params->info(name).shape == t.sizes().vec(), dir->string(), ": '", name,
                   "' has another shape");
      t.copy_(params->tensor(name));  // in place: the optimizer holds these tensors
    }
    at::Generator cpu = at::detail::getDefaultCPUGenerator();
    cpu.set_state(params->tensor("rng.cpu").clone());
  }
  torch::load(*optimizer_, (*dir / "optimizer.pt").string());
  sampler_->restore({manifest["sampler"]["epoch"].get<int64_t>(),
                     manifest["sampler"]["consumed"].get<int64_t>()});
  consecutive_nonfinite_ = manifest["nonfinite"]["consecutive"].get<int64_t>();
  skipped_steps_ = manifest["nonfinite"]["skipped"].get<int64_t>();
  int64_t step = manifest["step"].get<int64_t>();
  log_info("resumed from ", dir->string(), " (step ", step, ")");
  return step;
}

}  // namespace retain
