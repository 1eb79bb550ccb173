#include "eval/budget_allocation.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace retain {

const char* BudgetAllocation::name() const {
  switch (kind) {
    case Kind::kUniform:
      return "uniform";
    case Kind::kPyramid:
      return "pyramid";
    case Kind::kAdaKV:
      return "adakv";
  }
  return "?";
}

std::vector<int64_t> pyramid_layer_budgets(int64_t budget, int64_t layers, double beta) {
  RETAIN_CHECK(budget >= 1 && layers >= 1 && beta >= 1, "pyramid: budget ", budget, ", layers ",
               layers, " and pyramid_beta ", beta, " must all be >= 1");
  const double m = static_cast<double>(budget);
  const double min_num = m / beta, max_num = 2 * m - min_num;
  const double step = layers > 1 ? (max_num - min_num) / static_cast<double>(layers - 1) : 0.0;
  // Largest remainders: every layer its profile's floor, then the units left to the largest
  // fractions (ties to the earlier layer). The result sums to L M, stays within 1 of the profile
  // and falls from layer to layer as the profile does (rounding running sums would not).
  std::vector<int64_t> out(static_cast<size_t>(layers));
  std::vector<std::pair<double, int64_t>> fractions;
  int64_t left = layers * budget;
  for (int64_t l = 0; l < layers; ++l) {
    const double x = layers > 1 ? max_num - static_cast<double>(l) * step : m;
    out[l] = static_cast<int64_t>(std::floor(x));
    left -= out[l];
    fractions.emplace_back(x - std::floor(x), l);
  }
  std::stable_sort(fractions.begin(), fractions.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  // The floors sum to at most L M and to more than L M - L; float error at the margins aside.
  for (int64_t i = 0; left > 0; ++i, --left) ++out[fractions[i % layers].second];
  for (int64_t i = layers - 1; left < 0; i = (i + layers - 1) % layers, ++left) --out[i];
  // A layer left with nothing (M / beta below 1) keeps 1, taken from the last of the largest
  // layers (so the budgets still fall); a layer holds 2 or more whenever one is empty.
  for (auto& b : out)
    while (b < 1) {
      ++b;
      const int64_t largest = *std::max_element(out.begin(), out.end());
      int64_t last = layers - 1;
      while (out[last] != largest) --last;
      --out[last];
    }
  return out;
}

int64_t adakv_head_floor(int64_t budget, double safeguard) {
  const auto floor = static_cast<int64_t>(std::floor(safeguard * static_cast<double>(budget)));
  return std::min(budget, safeguard > 0 ? std::max<int64_t>(1, floor) : 0);
}

}  // namespace retain
