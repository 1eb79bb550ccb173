#include "eval/cache/ranking.h"

#include <vector>

namespace retain {

at::Tensor top_k_indices(const at::Tensor& score, int64_t k) {
  const int64_t s = score.size(-1);
  auto order = std::get<1>(score.flip(-1).sort(/*stable=*/true, -1, /*descending=*/true));
  return (s - 1) - order.narrow(-1, 0, k);
}

at::Tensor top_k_mask(const at::Tensor& score, const at::Tensor& keep) {
  const int64_t s = score.size(-1);
  auto order = std::get<1>(score.flip(-1).sort(/*stable=*/true, -1, /*descending=*/true));
  auto chosen = at::arange(s, keep.options()) < per_row(keep, score.dim());
  return at::zeros_like(score, score.options().dtype(at::kBool))
      .scatter_(-1, (s - 1) - order, chosen.expand(score.sizes()).contiguous());
}

at::Tensor per_row(const at::Tensor& counts, int64_t dims) {
  std::vector<int64_t> shape(static_cast<size_t>(dims), 1);
  shape[0] = counts.size(0);
  return counts.view(shape);
}

}  // namespace retain
