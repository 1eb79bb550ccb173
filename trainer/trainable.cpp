#include "trainer/trainable.h"

namespace retain {

// Each in its own file (trainer/<kind>_trainable.cpp).
std::unique_ptr<Trainable> make_gate_trainable(const TrainSettings& settings, const Decoder& model,
                                               const std::string& recipe_sha);
std::unique_ptr<Trainable> make_scorer_trainable(const TrainSettings& settings,
                                                 const Decoder& model,
                                                 const std::string& recipe_sha);

void StepStats::all_reduce(Collectives& comm) {
  auto values = at::tensor({loss, capacity, kl, ntp, mean_beta, live, tokens}, at::kDouble);
  comm.all_reduce_sum(values);
  const double w = static_cast<double>(comm.world());
  loss = values[0].item<double>();
  capacity = values[1].item<double>();
  kl = values[2].item<double>();
  ntp = values[3].item<double>();
  mean_beta = values[4].item<double>() / w;
  live = values[5].item<double>() / w;
  tokens = values[6].item<double>();
}

std::vector<at::Tensor> Trainable::parameters() const {
  std::vector<at::Tensor> out;
  for (const auto& [name, p] : named_parameters()) out.push_back(p);
  return out;
}

std::unique_ptr<Trainable> make_trainable(const TrainSettings& settings, const Decoder& model,
                                          const std::string& recipe_sha) {
  switch (settings.trainable) {
    case TrainableKind::kGates:
      return make_gate_trainable(settings, model, recipe_sha);
    case TrainableKind::kLocret:
    case TrainableKind::kKvzap:
      return make_scorer_trainable(settings, model, recipe_sha);
  }
  return nullptr;
}

}  // namespace retain
