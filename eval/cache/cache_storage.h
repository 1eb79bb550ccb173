// The budgeted cache's buffers (eval/budgeted_cache.h): per layer the key, value, absolute
// position and policy statistic of every entry, in buffers of (B, Hk, C, ...) with a live length
// per (sequence, KV head). New entries go after each head's live ones; eviction compacts the kept
// ones to the front in insertion order, in place. Position -1 marks an empty slot.
//
// Shapes: B sequences, Hk KV heads, C capacity, D head dim, T new tokens.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

namespace retain {

struct CacheLayer {
  at::Tensor keys, values;  // (B, Hk, C, D)
  at::Tensor positions;     // (B, Hk, C) int64, -1 = empty
  at::Tensor stat;          // (B, Hk, C) fp32: the policy's statistic (log beta, votes, ...)
  at::Tensor length;        // (B, Hk) int64
  // length.max() on the host, kept by eager steps (each adds T to every head) and re-read after
  // each compaction and after static decode, so an eager step reads nothing from the device.
  int64_t longest = 0;

  bool allocated() const { return keys.defined(); }
  int64_t capacity() const { return keys.size(2); }
};

class CacheStorage {
 public:
  CacheStorage(int64_t num_layers, int64_t capacity)
      : layers_(static_cast<size_t>(num_layers)), capacity_(capacity) {}

  int64_t num_layers() const { return static_cast<int64_t>(layers_.size()); }
  CacheLayer& layer(int64_t i) { return layers_.at(static_cast<size_t>(i)); }
  const CacheLayer& layer(int64_t i) const { return layers_.at(static_cast<size_t>(i)); }
  // Every layer has stored a step.
  bool all_allocated() const;

  // Stores keys/values (B, Hk, T, D) of tokens at positions (B, T) with their statistic
  // (B, Hk, T) after each head's live entries. Returns the slots this step's queries must see:
  // up to the longest head after the append, or with `fixed_shape` (static decode, where the
  // caller made room) every slot, and then the host-side longest is left as it was.
  int64_t append(int64_t layer, const at::Tensor& keys, const at::Tensor& values,
                 const at::Tensor& positions, const at::Tensor& stat, bool fixed_shape);
  // Widens a layer's buffers to `capacity` slots, keeping its entries.
  void grow(int64_t layer, int64_t capacity);

  // Continuous batching (serve/slot_batch.h), between steps only. allocate_rows: every layer gets
  // `batch` empty rows of `kv_heads` heads of `head_dim` before any step. load_row: row `row`
  // becomes `source`'s row `source_row`, every slot of it (the slots past its entries zeroed at
  // position -1, so nothing of an earlier request stays where attention reads); a layer too
  // narrow for it widens, and then it returns true. clear_row: row `row` holds nothing.
  void allocate_rows(int64_t batch, int64_t kv_heads, int64_t head_dim,
                     const at::TensorOptions& options);
  bool load_row(int64_t row, const CacheStorage& source, int64_t source_row);
  void clear_row(int64_t row);
  // Keeps the entries of the first keep.size(2) slots where keep (B, Hk, S) is true.
  void compact(int64_t layer, const at::Tensor& keep);
  // Padding (position -1: a batched prompt's left padding, a finished row's steps) stored like a
  // token is dropped, in every layer holding some.
  void drop_padding();
  // Re-reads each layer's longest head from the device (after static decode).
  void refresh_longest();

  // Live entries per sequence, all layers and heads (one device read); empty before a step.
  std::vector<int64_t> row_entries() const;
  // A key and a value; 0 before the first step.
  int64_t bytes_per_entry() const;
  // Positions of the live entries of (layer, b, head), in insertion order.
  std::vector<int64_t> live_positions(int64_t layer, int64_t b, int64_t head) const;

  // After a copy: owns its buffers (a copy shares the tensors).
  void deepen();

 private:
  void allocate(CacheLayer& l, int64_t batch, int64_t kv_heads, int64_t head_dim,
                const at::TensorOptions& options) const;

  std::vector<CacheLayer> layers_;
  int64_t capacity_;  // of a layer's first allocation
};

}  // namespace retain
