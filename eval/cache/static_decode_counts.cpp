#include "eval/cache/static_decode_counts.h"

#include <algorithm>

namespace retain {

void StaticDecodeCounts::sync(const CacheStorage& storage) {
  std::vector<at::Tensor> counts;
  auto total = at::zeros_like(storage.layer(0).length.select(1, 0));
  for (int64_t li = 0; li < storage.num_layers(); ++li) {
    const auto& length = storage.layer(li).length;
    counts.push_back(std::get<0>(length.max(1)));
    counts.push_back(length.sum(1));
    total += length.sum(1);
  }
  counts.push_back(total);
  auto host = at::stack(counts).to(at::kCPU).contiguous();  // the one device-to-host read
  const int64_t b = host.size(1);
  const auto* v = host.data_ptr<int64_t>();
  const int64_t nl = storage.num_layers();
  longest_.clear();
  layer_total_.clear();
  for (int64_t i = 0; i < nl; ++i) {
    longest_.emplace_back(v + 2 * i * b, v + (2 * i + 1) * b);
    layer_total_.emplace_back(v + (2 * i + 1) * b, v + (2 * i + 2) * b);
  }
  total_.assign(v + 2 * nl * b, v + (2 * nl + 1) * b);
}

void StaticDecodeCounts::add_step(int64_t kv_heads) {
  for (size_t i = 0; i < longest_.size(); ++i)
    for (size_t r = 0; r < longest_[i].size(); ++r) {
      ++longest_[i][r];
      layer_total_[i][r] += kv_heads;
    }
  for (auto& t : total_) t += layers() * kv_heads;
}

bool StaticDecodeCounts::full(const CacheStorage& storage) const {
  for (int64_t i = 0; i < layers(); ++i)
    for (int64_t longest : longest_[i])
      if (longest + 1 > storage.layer(i).capacity()) return true;
  return false;
}

bool StaticDecodeCounts::ensure_room(CacheStorage& storage) const {
  bool grew = false;
  for (int64_t i = 0; i < layers(); ++i) {
    const int64_t longest = *std::max_element(longest_[i].begin(), longest_[i].end());
    const int64_t capacity = storage.layer(i).capacity();
    if (longest + 1 <= capacity) continue;
    storage.grow(i, std::max(longest + 1, 2 * capacity));
    grew = true;
  }
  return grew;
}

}  // namespace retain
