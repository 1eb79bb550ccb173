// Training recipes: a YAML file overlaid on documented defaults, then `key.sub=value` overrides.
// Every key must be one of the schema's (an unknown key is an error naming the closest valid
// one); the resolved recipe is printed at the start of a run and saved in the run directory.
#pragma once

#include <string>
#include <vector>

#include "core/config.h"

namespace retain {

struct RecipeKey {
  const char* key;       // dotted path
  std::string fallback;  // default as YAML ("~" = none)
  const char* doc;
};

// The schema: every recipe key with its default and meaning.
const std::vector<RecipeKey>& recipe_schema();

// Loads `path` (may be empty: defaults only), applies overrides, validates, returns the resolved
// recipe.
Config resolve_recipe(const std::string& path, const std::vector<std::string>& overrides);

// SHA-256 of what defines the trained weights: the resolved recipe without where it is written
// and how it is logged (run.dir, train.resume, checkpoint.*, log.*), so a resumed or relocated run
// of the same recipe gets the same hash.
std::string recipe_hash(const Config& resolved);

}  // namespace retain
