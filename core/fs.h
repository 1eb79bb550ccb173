// Small filesystem helpers: whole-file reads with errors that name the file, and atomic writes
// (temp file + rename) so a crash or an error never leaves a half-written output behind.
#pragma once

#include <filesystem>
#include <functional>
#include <string>

namespace retain {

namespace fs = std::filesystem;

std::string read_text_file(const fs::path& path);

// Calls write(tmp_path) then renames tmp_path onto path. On any exception the temp file is removed
// and the exception propagates; the destination keeps its previous content (or stays absent).
void write_file_atomic(const fs::path& path, const std::function<void(const fs::path&)>& write);

// Any bytes (text or binary); a failed write is an error naming the file and the system's reason
// ("No space left on device", "File too large").
void write_text_file_atomic(const fs::path& path, const std::string& content);

// The same for a directory: write(tmp_dir) fills DIR.tmp (created empty), which then replaces
// `dir` (an existing `dir` is removed first: callers decide whether replacing is allowed). On any
// exception DIR.tmp is removed and `dir` is left as it was.
void write_dir_atomic(const fs::path& dir, const std::function<void(const fs::path&)>& write);

// Writes (then removes) a probe file in `dir`, or in the deepest part of its path that exists
// (creating nothing), so a command refuses an output place it cannot write (a file in the way, a
// read-only mount, no permission) before any work, naming `what` (the flag or key) and the reason.
void ensure_writable_dir(const fs::path& dir, const std::string& what);

}  // namespace retain
