// How a per-head policy's budget M is split over layers and heads. The policy scores entries; the
// allocation says how many of the best each (layer, head) keeps:
//   - `uniform`: every (layer, KV head) keeps its own top M (SnapKV, H2O, TrimKV as published);
//   - `pyramid` (PyramidKV, Cai et al. 2024): layer l keeps M_l per head, M_l falling linearly from
//     the first layer to the last, sum over layers = L M exactly;
//   - `adakv` (AdaKV, Feng et al. 2024): each layer keeps its top Hk M over all its heads (one pool
//     per layer, per-head lengths vary), every head its best floor(safeguard M) at least.
// All three hold L Hk M entries per sequence in all, so a sweep compares them at equal memory.
// (dbtrimkv's one pool over all layers and heads is its own registration: `global`.)
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace retain {

struct BudgetAllocation {
  enum class Kind { kUniform, kPyramid, kAdaKV };
  Kind kind = Kind::kUniform;
  double pyramid_beta =
      20;                  // PyramidKV's beta: the last layer keeps M / beta, the first 2M - M/beta
  double safeguard = 0.2;  // AdaKV's alpha_safeguard: each head's floor as a fraction of M

  const char* name() const;
};

// The per-head budget of every layer under `pyramid`: PyramidKV's linear profile (kvpress's
// get_layer_budget: min M / beta, max 2M - min, step (max - min) / (L - 1)), rounded so the sum is
// exactly L M (cumulative rounding, so each layer is within 1 of the profile) and every layer keeps
// at least 1 (a layer raised to 1 is paid for by the largest ones).
std::vector<int64_t> pyramid_layer_budgets(int64_t budget, int64_t layers, double beta);

// AdaKV's per-head floor for a budget of M per head: floor(safeguard M), at least 1 when
// safeguard > 0 (kvpress's AdaKVPress), at most M.
int64_t adakv_head_floor(int64_t budget, double safeguard);

}  // namespace retain
