#include "checkpoints/export.h"

#include "checkpoints/gate_file.h"
#include "checkpoints/scorer_file.h"
#include "checkpoints/step_dir.h"
#include "core/config.h"
#include "core/error.h"
#include "core/log.h"
#include "core/safetensors.h"

namespace retain {

void export_checkpoint(const fs::path& checkpoint, const fs::path& out) {
  // A run directory stands for its newest complete step.
  fs::path step_dir = checkpoint;
  if (!fs::exists(checkpoint / "manifest.json") && fs::is_directory(checkpoint) &&
      !fs::exists(checkpoint / "params.safetensors")) {
    auto latest = latest_step_dir(checkpoint);
    RETAIN_CHECK(latest.has_value(), checkpoint.string(),
                 ": neither a step directory (no manifest.json) nor a run directory with a "
                 "complete step-N");
    step_dir = *latest;
    log_info("export: newest complete step of ", checkpoint.string(), " is ", step_dir.string());
  }
  Json manifest = read_manifest(step_dir);
  const std::string kind = manifest.value("kind", "");
  if (kind == "gates") {
    read_gate_file_info(step_dir / "gates.safetensors");  // validates before copying
    write_file_atomic(
        out, [&](const fs::path& tmp) { fs::copy_file(step_dir / "gates.safetensors", tmp); });
    log_info("exported gates of ", step_dir.string(), " to ", out.string());
    return;
  }
  if (kind == "scorer") {
    read_scorer_file_info(step_dir / "scorer.safetensors");  // validates before copying
    write_file_atomic(
        out, [&](const fs::path& tmp) { fs::copy_file(step_dir / "scorer.safetensors", tmp); });
    log_info("exported the scorer of ", step_dir.string(), " to ", out.string());
    return;
  }
  RETAIN_CHECK(kind == "base", step_dir.string(), ": unknown checkpoint kind '", kind, "'");
  Config recipe = Config::load(step_dir / "recipe.yaml");
  fs::path model_dir = recipe.get<std::string>("model.path");
  RETAIN_CHECK(!fs::exists(out), out.string(), " already exists");
  fs::path tmp = out;
  tmp += ".tmp";
  fs::remove_all(tmp);
  fs::create_directories(tmp);
  try {
    for (const char* f :
         {"config.json", "tokenizer.json", "tokenizer.model", "tokenizer_config.json"})
      if (fs::exists(model_dir / f)) fs::copy_file(model_dir / f, tmp / f);
    auto params = SafetensorsFile::open(step_dir / "params.safetensors");
    SafetensorsWriter writer;
    writer.set_metadata("format", "pt");
    for (const auto& name : params->names())
      if (name.rfind("rng.", 0) != 0) writer.add(name, params->tensor(name).clone());
    writer.write(tmp / "model.safetensors");
    fs::rename(tmp, out);
  } catch (...) {
    std::error_code ignored;
    fs::remove_all(tmp, ignored);
    throw;
  }
  log_info("exported the model of ", step_dir.string(), " to ", out.string());
}

}  // namespace retain
