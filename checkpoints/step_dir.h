// Training-state checkpoints: RUN/step-N/ directories, written into a temp directory and renamed,
// with manifest.json written last (a step directory without a manifest is incomplete and ignored,
// with a warning). keep_last_k prunes old ones.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>

#include "core/fs.h"
#include "core/json.h"

namespace retain {

// Writes RUN/step-<step>/ atomically: `write_files(tmp_dir)` fills a temp directory, then the
// manifest (step, files with their sizes and SHA-256, `extra`) is written and the directory
// renamed.
fs::path write_step_dir(const fs::path& run_dir, int64_t step, const Json& extra,
                        const std::function<void(const fs::path&)>& write_files);

// The newest complete step directory of a run, if any.
std::optional<fs::path> latest_step_dir(const fs::path& run_dir);

// Reads and verifies a step directory's manifest (files present, sizes and hashes equal).
Json read_manifest(const fs::path& step_dir);

// Removes the temp directories (.step-N.tmp.PID) of writes that a kill interrupted; returns how
// many. Only the process that writes checkpoints may call it (rank 0), before it writes any.
int64_t remove_interrupted_writes(const fs::path& run_dir);

// Removes all but the newest `keep` complete step directories (keep <= 0: keep all).
void prune_step_dirs(const fs::path& run_dir, int64_t keep);

}  // namespace retain
