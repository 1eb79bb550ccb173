// Static decode's host-side counts (eval/budgeted_cache.h): per layer and sequence an upper bound
// of the longest head and of the layer's total, and per sequence of the total over layers and
// heads. A static step adds one entry to every head of every row (a finished row's at position -1,
// which the next eviction drops), so the counts say when an eager step would have evicted, or a
// buffer would overflow, without reading the device inside a step.
#pragma once

#include <cstdint>
#include <vector>

#include "eval/cache/cache_storage.h"

namespace retain {

class StaticDecodeCounts {
 public:
  // Reads the counts from the device (one read).
  void sync(const CacheStorage& storage);
  // One decoded token in every KV head (kv_heads per layer) of every layer of every row.
  void add_step(int64_t kv_heads);
  // Whether some layer's next step would not fit its buffers.
  bool full(const CacheStorage& storage) const;
  // Grows any layer whose next step would not fit; true if one grew.
  bool ensure_room(CacheStorage& storage) const;

  int64_t rows() const { return static_cast<int64_t>(total_.size()); }
  int64_t layers() const { return static_cast<int64_t>(longest_.size()); }
  int64_t longest(int64_t layer, int64_t row) const { return longest_[layer][row]; }
  int64_t layer_total(int64_t layer, int64_t row) const { return layer_total_[layer][row]; }
  int64_t total(int64_t row) const { return total_[row]; }

 private:
  std::vector<std::vector<int64_t>> longest_, layer_total_;  // per layer, per row
  std::vector<int64_t> total_;                               // per row
};

}  // namespace retain
