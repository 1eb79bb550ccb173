#include "trainer/train_settings.h"

#include "core/error.h"
#include "trainer/recipe.h"

namespace retain {

const char* trainable_name(TrainableKind kind) {
  switch (kind) {
    case TrainableKind::kGates:
      return "gates";
    case TrainableKind::kBase:
      return "base";
    case TrainableKind::kLocret:
      return "locret";
    case TrainableKind::kKvzap:
      return "kvzap";
  }
  return "?";
}

TrainSettings read_settings(const Config& r) {
  TrainSettings s;
  // train.trainable first: the base loss terms depend on it.
  for (const auto& k : recipe_schema())
    if (std::string(k.key) == "train.trainable") k.read(r, k.key, s);
  for (const auto& k : recipe_schema()) k.read(r, k.key, s);
  return s;
}

}  // namespace retain
