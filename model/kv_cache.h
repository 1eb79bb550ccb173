// The KV-cache interface the attention talks to, and the default full cache.
//
// Keys are cached post-RoPE. Every entry carries the absolute position of its token; position -1
// marks an empty slot (padding, or a slot freed by eviction). Attention derives its mask from
// positions alone: query at position p sees entry j iff 0 <= pos_j <= p (and p - pos_j < window
// for sliding-window layers). Eviction policies (eval/) implement this interface without the
// model knowing about them.
//
// Shapes: B batch, Hk KV heads, T new tokens, S cached entries, D head dim.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "model/layer_hook.h"

namespace retain {

class Collectives;  // dist/collectives.h
class SharedVotes;  // eval/cache/shared_votes.h

struct KvEntries {
  at::Tensor keys;       // (B, Hk, S, D)
  at::Tensor values;     // (B, Hk, S, D)
  at::Tensor positions;  // (B, 1, S) shared by all heads, or (B, Hk, S) per head; int64
};

class KvCache {
 public:
  virtual ~KvCache() = default;

  // Called before append() with everything the layer computed for this step (hidden state, q, k,
  // v, positions): policies that score entries by attention or by learned gates read it here.
  virtual void observe(const LayerTensors& /*tensors*/) {}

  // Stores this step's keys/values of `layer` (B, Hk, T, D) for tokens at `positions` (B, T) and
  // returns everything this step's queries may attend to, the new entries included.
  virtual KvEntries append(int64_t layer, const at::Tensor& keys, const at::Tensor& values,
                           const at::Tensor& positions) = 0;

  // The attention of this step's queries q (B, H, T, D) at q_positions (B, T) over `entries`, what
  // append() returned. The default is model/attention.h; a cache may route it to a kernel that
  // reads its own layout (the budgeted cache's decode over per-head lengths on CUDA).
  virtual at::Tensor attend(int64_t layer, const at::Tensor& q, const at::Tensor& q_positions,
                            const KvEntries& entries, double scale, int64_t window) const;

  // Called by the model once every layer has run a step: where eviction policies act.
  virtual void end_step() {}
  // Until this step's end, each run of `rows` consecutive sequences receives identical inputs (a
  // context read once for several cache rows, eval/shared_context_cache.h): a cache may compute
  // what depends on the inputs alone once per run (the budgeted cache's attention votes).
  // `votes` is shared by every cache that receives the step: what one casts, another with the
  // same slots and queries may take (eval/cache/shared_votes.h).
  virtual void set_identical_rows(int64_t /*rows*/, const std::shared_ptr<SharedVotes>& /*votes*/) {
  }

  // Called before the forward whose last token's logits are used (generation runs the prompt's
  // last token as a step of its own): a cache with a budget cuts back to it before that token's
  // queries read it, and from then on records how many entries each generating query reads.
  virtual void begin_generating_step() {}

  // Per sequence: the most entries one generating query read in one KV head, and in all layers
  // and KV heads together (the bound dbtrimkv keeps). Empty where the cache does not record it.
  struct AttendedEntries {
    std::vector<int64_t> per_head, total;
  };
  virtual AttendedEntries attended_entries() const { return {}; }

  // Called by generation when the prompt has been read and decoding starts.
  virtual void end_prefill() {}
  // Before an eager decode step, for that step only: which rows still generate. A finished row
  // stays in the batch at position -1 and its step changes nothing, so a cache may skip the work
  // of finished rows (rows decoding under several policies skip a policy whose rows have all
  // finished, as that policy's batch alone would have stopped).
  virtual void set_running_rows(const std::vector<bool>& /*running*/) {}

  // Under tensor parallelism the model hands its group before each step: the cache holds this
  // rank's slice of the KV heads, and a policy ranking entries across heads exchanges its scores
  // through `group`. A cache that keeps heads apart needs nothing.
  virtual void bind_tensor_parallel(Collectives* /*group*/) {}

  // Static decode: one token per sequence per step with buffers, shapes and device-side state that
  // do not change between steps, and no device-to-host reads inside a step, so the step can be
  // captured once in a CUDA graph and replayed (model/decode_graph.h). A cache that supports it
  // switches here (after the prompt has been read) and returns true; false leaves it as it was.
  virtual bool begin_static_decode() { return false; }
  // After each static step, outside any graph: host-side bookkeeping and whatever needs the host
  // (eviction, growing a buffer). Returns true when buffers were reallocated, so a captured graph
  // no longer points at them.
  virtual bool end_static_step() { return false; }
  // Leaves static decode: the cache is again what eager steps would have left.
  virtual void end_static_decode() {}
  // Before begin_static_decode: at most this many decode steps follow, so a cache can size its
  // buffers once (the full cache: prompt + max new tokens) instead of growing, which makes a
  // captured graph capture again.
  virtual void expect_decode_steps(int64_t /*steps*/) {}

  // Bytes of K/V currently held (live entries only for caches that evict).
  virtual int64_t live_bytes() const = 0;
  // The most bytes held at once so far; a cache that never evicts holds its most now.
  virtual int64_t peak_bytes() const { return live_bytes(); }
  // Bytes of exactly the budget in every (layer, sequence, KV head): what a budgeted cache holds
  // after an eviction. A cache without a budget: what it holds.
  virtual int64_t budget_bytes() const { return live_bytes(); }

  // The same three per sequence of the batch (padding never counts): what one row of a batched
  // evaluation would have measured alone.
  struct RowBytes {
    int64_t live = 0, peak = 0, budget = 0;
  };
  virtual std::vector<RowBytes> row_bytes() const = 0;

  // While the prompt is read, entries at positions >= `positions[r]` (the question) of row r are
  // never evicted (-1: nothing protected; a single position applies to every row); decoding lifts
  // the protection. A cache that evicts nothing has nothing to protect.
  virtual void protect_from(const std::vector<int64_t>& /*positions*/) {}
  // --question-mode keep (kvpress's semantics): call once the context alone has been read. A
  // budgeted cache cuts it back to the budget once and evicts nothing afterwards.
  virtual void compress_context() {}

  // An independent deep copy (multi-turn evaluation branches a conversation from a shared context).
  virtual std::unique_ptr<KvCache> clone() const = 0;
};

// Keeps every entry. Storage grows by doubling, so decode appends in amortised O(1) copies.
//
// Static decode: the buffers are sized once for the expected steps (expect_decode_steps) and each
// step writes its token at a slot index held on the device and returns the whole buffers (empty
// slots at position -1, which attention masks), so a step can be captured as a CUDA graph; the
// host advances its own count in end_static_step.
class FullKvCache : public KvCache {
 public:
  explicit FullKvCache(int64_t num_layers) : layers_(num_layers) {}

  KvEntries append(int64_t layer, const at::Tensor& keys, const at::Tensor& values,
                   const at::Tensor& positions) override;
  void expect_decode_steps(int64_t steps) override { expected_steps_ = steps; }
  bool begin_static_decode() override;
  bool end_static_step() override;
  void end_static_decode() override { static_ = false; }
  int64_t live_bytes() const override;
  std::vector<RowBytes> row_bytes() const override;
  std::unique_ptr<KvCache> clone() const override;
  // Every entry is read: the live tokens of each sequence, in every head.
  AttendedEntries attended_entries() const override;
  int64_t length(int64_t layer) const { return layers_.at(layer).length; }

 private:
  struct Layer {
    at::Tensor keys, values, positions;  // capacity-sized buffers
    int64_t length = 0;
    at::Tensor slot;  // static decode: the next slot, (1,) int64 on the buffers' device
  };
  // Static decode: grows every layer to hold `length` + `room` entries; true if one grew.
  bool reserve(int64_t room);
  std::vector<Layer> layers_;
  bool static_ = false;
  int64_t expected_steps_ = 0;
};

}  // namespace retain
