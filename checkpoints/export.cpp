#include "checkpoints/export.h"

#include "checkpoints/gate_file.h"
#include "checkpoints/scorer_file.h"
#include "checkpoints/step_dir.h"
#include "core/error.h"
#include "core/fs.h"
#include "core/log.h"

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
    // Read whole and written (a gate file is small): a failed write names its reason, where
    // fs::copy_file reports "Input/output error" for a full disk.
    write_text_file_atomic(out, read_text_file(step_dir / "gates.safetensors"));
    log_info("exported gates of ", step_dir.string(), " to ", out.string());
    return;
  }
  if (kind == "scorer") {
    read_scorer_file_info(step_dir / "scorer.safetensors");  // validates before copying
    write_text_file_atomic(out, read_text_file(step_dir / "scorer.safetensors"));
    log_info("exported the scorer of ", step_dir.string(), " to ", out.string());
    return;
  }
  throw Error(str_cat(step_dir.string(), ": unknown checkpoint kind '", kind,
                      "' (expected gates or scorer)"));
}

}  // namespace retain
