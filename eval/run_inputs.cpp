#include "eval/run_inputs.h"

#include <algorithm>
#include <system_error>

#include "core/error.h"
#include "core/log.h"
#include "core/sha256.h"

namespace retain {

namespace {

void stamp_into(Json& files, const fs::path& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    for (const auto& entry : fs::recursive_directory_iterator(path))
      if (entry.is_regular_file()) files[entry.path().string()] = file_stamp(entry.path());
  } else if (fs::is_regular_file(path, ec)) {
    files[path.string()] = file_stamp(path);
  }  // a path that is not there is the loaders' error to report, not ours
}

// "what: was A, now B" for every key of `before` or `now` whose values differ.
void differences(const std::string& what, const Json& before, const Json& now,
                 std::vector<std::string>& out) {
  Json keys = Json::object();
  for (const auto& [k, _] : before.items()) keys[k] = true;
  for (const auto& [k, _] : now.items()) keys[k] = true;
  for (const auto& [k, _] : keys.items()) {
    const Json a = before.contains(k) ? before.at(k) : Json("(none)");
    const Json b = now.contains(k) ? now.at(k) : Json("(none)");
    if (a != b) out.push_back(str_cat(what, " ", k, ": was ", a.dump(), ", now ", b.dump()));
  }
}

// The running executable's stamp: a rebuilt retain (its size or time) reads as another build.
std::string running_build_stamp() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return ec ? std::string("unknown") : file_stamp(exe);
}

}  // namespace

Json sweep_inputs(const Json& config, const std::vector<fs::path>& shared_files,
                  const std::map<std::string, std::vector<fs::path>>& policy_files) {
  Json options = config;
  for (const char* key : {"policies", "budgets", "limit", "batch_size", "workers"})
    options.erase(key);
  Json files = Json::object();
  for (const auto& path : shared_files) stamp_into(files, path);
  Json per_policy = Json::object();
  for (const auto& [spec, paths] : policy_files) {
    Json own = Json::object();
    for (const auto& path : paths) stamp_into(own, path);
    per_policy[spec] = own;
  }
  return {{"options", options},
          {"files", files},
          {"policy_files", per_policy},
          {"retain_builds", Json::array({running_build_stamp()})}};
}

void check_and_record_sweep_inputs(const fs::path& out, const Json& inputs, bool check_options) {
  const fs::path record = out / "inputs.json";
  const fs::path predictions = out / "predictions.jsonl";
  Json merged = inputs;
  std::error_code ec;
  const bool resuming = fs::exists(predictions, ec) && fs::file_size(predictions, ec) > 0;
  if (resuming && !fs::exists(record, ec)) {
    log_warn(predictions.string(), ": no inputs.json beside it (a run of an older retain), so ",
             "whether its predictions came from this model, data and gates is not checked");
  } else if (resuming) {
    const Json before = parse_json(read_text_file(record), record.string());
    std::vector<std::string> changed;
    if (check_options)
      differences("option", before.value("options", Json::object()), inputs.at("options"), changed);
    differences("file", before.value("files", Json::object()), inputs.at("files"), changed);
    const Json old_policies = before.value("policy_files", Json::object());
    for (const auto& [spec, files] : inputs.at("policy_files").items())
      if (old_policies.contains(spec))
        differences("file of " + spec, old_policies.at(spec), files, changed);
    std::string list;
    for (const auto& line : changed) list += "\n  " + line;
    RETAIN_CHECK(changed.empty(), predictions.string(),
                 " holds predictions made with other inputs, and resuming would mix them with "
                 "this run's:",
                 list, "\nwrite to another --out, or delete ", predictions.string(),
                 " to redo every prediction");
    for (const auto& [spec, files] : old_policies.items())
      if (!merged["policy_files"].contains(spec)) merged["policy_files"][spec] = files;
    // Another build's predictions stay (most rebuilds change no answer), said every time they do.
    Json builds = before.value("retain_builds", Json::array());
    for (const auto& build : inputs.at("retain_builds"))
      if (std::find(builds.begin(), builds.end(), build) == builds.end()) builds.push_back(build);
    if (builds.size() > 1)
      log_warn(predictions.string(), ": resuming keeps predictions written by ", builds.size() - 1,
               " other build(s) of retain; a changed policy default or metric would give other ",
               "answers: delete it to redo every prediction with this build");
    merged["retain_builds"] = builds;
  }
  write_text_file_atomic(record, merged.dump(1) + "\n");
}

}  // namespace retain
