// `retain export RUN/step-N --out ...`: a checkpoint's trained weights in their usable form.
// `retain export RUN --out ...` exports the run's newest complete step.
//   gate runs: the gate file (safetensors + metadata, see gate_file.h)
//   scorer runs (train.trainable: locret | kvzap): the scorer file (scorer_file.h)
#pragma once

#include "core/fs.h"

namespace retain {

void export_checkpoint(const fs::path& checkpoint, const fs::path& out);

}  // namespace retain
