// What a sweep's predictions depend on besides their (policy, budget, unit) key: the options that
// change an answer and the content of the files the sweep reads (the model directory, the data,
// gate and scorer files). A resumed sweep reuses predictions.jsonl only while these match, so a
// base retrained in place (same path, new weights) or a re-exported gate file cannot leave the
// old run's answers among the new ones.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/fs.h"
#include "core/json.h"

namespace retain {

// {"options": `config` without what only extends a sweep (policies, budgets, limit, batch size),
//  "files": {path: stamp} of `shared_files` (a directory: every regular file under it),
//  "policy_files": {policy spec: {path: stamp}} of each policy's own gates= and scorer= files,
//  "retain_builds": [the stamp of the running retain executable]}.
Json sweep_inputs(const Json& config, const std::vector<fs::path>& shared_files,
                  const std::map<std::string, std::vector<fs::path>>& policy_files);

// When out/predictions.jsonl holds predictions, checks them against out/inputs.json: a changed
// shared file, a changed file of a policy both runs name, or (with `check_options`) a changed
// option is an error that says what changed and how to go on. Predictions of another retain build
// are kept with a warning (a rebuild need not change an answer, but a changed policy default or
// metric does; the record lists every build that wrote to the run). Then writes out/inputs.json
// (with the policies and builds of both runs). A benchmark whose resume keys carry its settings
// passes `check_options` false: other settings are other keys there.
void check_and_record_sweep_inputs(const fs::path& out, const Json& inputs,
                                   bool check_options = true);

}  // namespace retain
