// Training recipes: a YAML file overlaid on documented defaults, then `key.sub=value` overrides.
// Every key must be one of the schema's (an unknown key is an error naming the closest valid
// one); the resolved recipe is printed at the start of a run and saved in the run directory.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "core/config.h"

namespace retain {

struct TrainSettings;

// One recipe key: its default, its meaning, and how its resolved value becomes a typed, checked
// member of TrainSettings (trainer/train_settings.h). The one table resolves recipes, reads them
// and documents them (`retain train --keys`).
struct RecipeKey {
  const char* key;       // dotted path
  std::string fallback;  // default as YAML ("~" = none)
  const char* doc;
  std::function<void(const Config& recipe, const std::string& key, TrainSettings& settings)> read;
};

// The schema: every recipe key with its default and meaning.
const std::vector<RecipeKey>& recipe_schema();

// The schema as a markdown table (key, default, meaning) for docs/training.md.
std::string recipe_keys_markdown();

// Loads `path` (may be empty: defaults only), applies overrides, validates, returns the resolved
// recipe.
Config resolve_recipe(const std::string& path, const std::vector<std::string>& overrides);

// SHA-256 of what defines the trained weights: the resolved recipe without where it is written
// and how it is logged (run.dir, train.resume, checkpoint.*, log.*), so a resumed or relocated run
// of the same recipe gets the same hash.
std::string recipe_hash(const Config& resolved);

}  // namespace retain
