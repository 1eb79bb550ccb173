#include "model/kv_cache.h"

#include <algorithm>

#include "core/error.h"
#include "model/attention.h"

namespace retain {

namespace {

// Reallocates `buffer` along dim 2 to `capacity`, keeping the first `length` entries.
at::Tensor grow(const at::Tensor& buffer, int64_t length, int64_t capacity, int64_t fill) {
  auto sizes = buffer.sizes().vec();
  sizes[2] = capacity;
  auto bigger = at::full(sizes, fill, buffer.options());
  if (length > 0) bigger.narrow(2, 0, length).copy_(buffer.narrow(2, 0, length));
  return bigger;
}

}  // namespace

at::Tensor KvCache::attend(int64_t /*layer*/, const at::Tensor& q, const at::Tensor& q_positions,
                           const KvEntries& entries, double scale, int64_t window) const {
  return attention(q, entries.keys, entries.values, q_positions, entries.positions, scale, window);
}

KvEntries FullKvCache::append(int64_t layer, const at::Tensor& keys, const at::Tensor& values,
                              const at::Tensor& positions) {
  RETAIN_CHECK(layer >= 0 && layer < static_cast<int64_t>(layers_.size()), "FullKvCache: layer ",
               layer, " out of range");
  Layer& l = layers_[layer];
  int64_t t = keys.size(2);
  if (static_) {
    // A fixed-shape step: the token goes to the device-side slot, and every slot is returned.
    RETAIN_CHECK(t == 1 && keys.size(0) == l.keys.size(0),
                 "FullKvCache: static decode takes one token per sequence, found ", t);
    l.keys.index_copy_(2, l.slot, keys);
    l.values.index_copy_(2, l.slot, values);
    l.positions.index_copy_(2, l.slot, positions.unsqueeze(1));
    l.slot.add_(1);
    return {l.keys, l.values, l.positions};
  }
  if (!l.keys.defined()) {
    int64_t capacity = std::max<int64_t>(t, 16);
    l.keys = at::zeros({keys.size(0), keys.size(1), capacity, keys.size(3)}, keys.options());
    l.values = at::zeros_like(l.keys);
    l.positions = at::full({keys.size(0), 1, capacity}, -1, positions.options());
  } else {
    RETAIN_CHECK(keys.size(0) == l.keys.size(0), "FullKvCache: batch size changed from ",
                 l.keys.size(0), " to ", keys.size(0));
  }
  if (l.length + t > l.keys.size(2)) {
    int64_t capacity = std::max(l.length + t, 2 * l.keys.size(2));
    l.keys = grow(l.keys, l.length, capacity, 0);
    l.values = grow(l.values, l.length, capacity, 0);
    l.positions = grow(l.positions, l.length, capacity, -1);
  }
  l.keys.narrow(2, l.length, t).copy_(keys);
  l.values.narrow(2, l.length, t).copy_(values);
  l.positions.narrow(2, l.length, t).copy_(positions.unsqueeze(1));
  l.length += t;
  return {l.keys.narrow(2, 0, l.length), l.values.narrow(2, 0, l.length),
          l.positions.narrow(2, 0, l.length)};
}

bool FullKvCache::reserve(int64_t room) {
  bool grew = false;
  for (auto& l : layers_) {
    if (l.length + room <= l.keys.size(2)) continue;
    const int64_t capacity = std::max(l.length + room, 2 * l.keys.size(2));
    l.keys = grow(l.keys, l.length, capacity, 0);
    l.values = grow(l.values, l.length, capacity, 0);
    l.positions = grow(l.positions, l.length, capacity, -1);
    grew = true;
  }
  return grew;
}

bool FullKvCache::begin_static_decode() {
  for (const auto& l : layers_)
    if (!l.keys.defined()) return false;  // nothing read yet
  // Room for every expected step (and the one past the last, which never runs but keeps the
  // check below simple); without a hint, growing by doubling.
  reserve(std::max<int64_t>(expected_steps_, 1) + 1);
  for (auto& l : layers_) l.slot = at::full({1}, l.length, l.positions.options());
  static_ = true;
  return true;
}

bool FullKvCache::end_static_step() {
  RETAIN_CHECK(static_, "FullKvCache: end_static_step outside static decode");
  // The step wrote one slot in every layer (the device advanced its slot index itself).
  for (auto& l : layers_) ++l.length;
  return reserve(1);
}

int64_t FullKvCache::live_bytes() const {
  int64_t bytes = 0;
  for (const auto& l : layers_) {
    if (!l.keys.defined()) continue;
    bytes += 2 * l.length * l.keys.size(0) * l.keys.size(1) * l.keys.size(3) *
             static_cast<int64_t>(l.keys.element_size());
  }
  return bytes;
}

std::vector<KvCache::RowBytes> FullKvCache::row_bytes() const {
  // Each row's tokens (its padding has position -1) in every head of every layer.
  std::vector<RowBytes> out;
  const Layer& l = layers_.front();
  if (!l.keys.defined()) return out;
  auto tokens = (l.positions.narrow(2, 0, l.length) >= 0).sum({1, 2}).to(at::kCPU);
  const int64_t per_token = 2 * static_cast<int64_t>(layers_.size()) * l.keys.size(1) *
                            l.keys.size(3) * static_cast<int64_t>(l.keys.element_size());
  for (int64_t r = 0; r < tokens.size(0); ++r) {
    const int64_t bytes = tokens[r].item<int64_t>() * per_token;
    out.push_back({bytes, bytes, bytes});
  }
  return out;
}

KvCache::AttendedEntries FullKvCache::attended_entries() const {
  const Layer& l = layers_.front();
  if (!l.keys.defined()) return {};
  auto counts = (l.positions.narrow(2, 0, l.length) >= 0).sum({1, 2}).to(at::kCPU);
  AttendedEntries out;
  const int64_t heads = l.keys.size(1) * static_cast<int64_t>(layers_.size());
  for (int64_t r = 0; r < counts.size(0); ++r) {
    out.per_head.push_back(counts[r].item<int64_t>());
    out.total.push_back(out.per_head.back() * heads);
  }
  return out;
}

std::unique_ptr<KvCache> FullKvCache::clone() const {
  auto copy = std::make_unique<FullKvCache>(static_cast<int64_t>(layers_.size()));
  for (size_t i = 0; i < layers_.size(); ++i) {
    const Layer& l = layers_[i];
    if (!l.keys.defined()) continue;
    copy->layers_[i] = {l.keys.clone(), l.values.clone(), l.positions.clone(), l.length, {}};
  }
  return copy;
}

}  // namespace retain
