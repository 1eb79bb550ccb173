#include "checkpoints/step_dir.h"

#include <unistd.h>
#include <algorithm>

#include "core/error.h"
#include "core/log.h"
#include "core/sha256.h"

namespace retain {

namespace {

// step-N directories of a run with their step, sorted by step; incomplete ones are skipped.
std::vector<std::pair<int64_t, fs::path>> complete_steps(const fs::path& run_dir) {
  std::vector<std::pair<int64_t, fs::path>> out;
  if (!fs::is_directory(run_dir)) return out;
  for (const auto& e : fs::directory_iterator(run_dir)) {
    auto name = e.path().filename().string();
    if (!e.is_directory() || name.rfind("step-", 0) != 0) continue;
    char* end = nullptr;
    long long step = std::strtoll(name.c_str() + 5, &end, 10);
    if (end == nullptr || *end != '\0') continue;
    if (!fs::exists(e.path() / "manifest.json")) {
      log_warn(e.path().string(), ": no manifest.json (an interrupted write); ignored");
      continue;
    }
    out.emplace_back(step, e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

fs::path write_step_dir(const fs::path& run_dir, int64_t step, const Json& extra,
                        const std::function<void(const fs::path&)>& write_files) {
  fs::create_directories(run_dir);
  fs::path final_dir = run_dir / str_cat("step-", step);
  fs::path tmp = run_dir / str_cat(".step-", step, ".tmp.", ::getpid());
  fs::remove_all(tmp);
  fs::create_directories(tmp);
  try {
    write_files(tmp);
    Json files = Json::object();
    for (const auto& e : fs::directory_iterator(tmp))
      files[e.path().filename().string()] = {{"bytes", fs::file_size(e.path())},
                                             {"sha256", sha256_file_hex(e.path())}};
    Json manifest = extra;
    manifest["step"] = step;
    manifest["files"] = files;
    // The manifest is the last file: its presence marks the directory complete.
    write_json_file_atomic(tmp / "manifest.json", manifest);
    if (fs::exists(final_dir)) fs::remove_all(final_dir);
    fs::rename(tmp, final_dir);
  } catch (...) {
    std::error_code ignored;
    fs::remove_all(tmp, ignored);
    throw;
  }
  return final_dir;
}

std::optional<fs::path> latest_step_dir(const fs::path& run_dir) {
  auto steps = complete_steps(run_dir);
  if (steps.empty()) return std::nullopt;
  return steps.back().second;
}

Json read_manifest(const fs::path& step_dir) {
  fs::path path = step_dir / "manifest.json";
  RETAIN_CHECK(fs::exists(path), step_dir.string(), ": no manifest.json (incomplete checkpoint)");
  Json manifest = read_json_file(path);
  RETAIN_CHECK(manifest.contains("files") && manifest["files"].is_object(), path.string(),
               ": missing 'files'");
  for (const auto& [name, info] : manifest["files"].items()) {
    fs::path file = step_dir / name;
    RETAIN_CHECK(fs::exists(file), step_dir.string(), ": ", name,
                 " is listed in the manifest but missing");
    RETAIN_CHECK(fs::file_size(file) == info.at("bytes").get<uint64_t>() &&
                     sha256_file_hex(file) == info.at("sha256").get<std::string>(),
                 step_dir.string(), ": ", name, " does not match the manifest (corrupted)");
  }
  return manifest;
}

int64_t remove_interrupted_writes(const fs::path& run_dir) {
  if (!fs::is_directory(run_dir)) return 0;
  std::vector<fs::path> stale;
  for (const auto& e : fs::directory_iterator(run_dir)) {
    const auto name = e.path().filename().string();
    if (e.is_directory() && name.rfind(".step-", 0) == 0 && name.find(".tmp.") != std::string::npos)
      stale.push_back(e.path());
  }
  for (const auto& dir : stale) fs::remove_all(dir);
  return static_cast<int64_t>(stale.size());
}

void prune_step_dirs(const fs::path& run_dir, int64_t keep) {
  if (keep <= 0) return;
  auto steps = complete_steps(run_dir);
  for (size_t i = 0; i + static_cast<size_t>(keep) < steps.size(); ++i)
    fs::remove_all(steps[i].second);
}

}  // namespace retain
