#include "trainer/train_settings.h"

#include "core/error.h"
#include "trainer/recipe.h"

namespace retain {

const char* trainable_name(TrainableKind kind) {
  switch (kind) {
    case TrainableKind::kGates:
      return "gates";
    case TrainableKind::kLocret:
      return "locret";
    case TrainableKind::kKvzap:
      return "kvzap";
  }
  return "?";
}

TrainSettings read_settings(const Config& r) {
  TrainSettings s;
  for (const auto& k : recipe_schema()) k.read(r, k.key, s);
  return s;
}

}  // namespace retain
