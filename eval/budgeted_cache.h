// A KV cache with a real memory bound: per (layer, sequence, KV head) a variable number of live
// entries in buffers of capacity budget + buffer + chunk, compacted in place when a policy evicts
// (no full-length cache hidden behind a mask). Every entry carries its key, value, absolute
// position and the policy's statistic (log beta, attention votes, key norm or a seeded random
// score). The policy (eval/policies/) says what the statistic is and how entries score; the cache
// stores, computes the attention votes a policy asks for, compacts and keeps the budget.
//
// Eviction runs after each forward step (a prefill chunk or a decoded token): a per-head policy
// cuts a head that exceeds budget + buffer back to its top-`budget` entries; dbtrimkv cuts a
// sequence whose entries over all layers and heads exceed L Hk (budget + buffer) back to the
// global top L Hk budget.
//
// Each sequence of a batch may have its own budget (a fractional budget resolves per prompt): the
// cache holds one policy per distinct budget (budget-dependent defaults such as h2o's recent
// window differ), and every count, cut and peak is per sequence, so a row of a batch keeps what
// it would keep alone.
//
// Shapes: B sequences, Hk KV heads, C capacity, D head dim, S = longest live head.
#pragma once

#include <ATen/ATen.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "eval/policies/policy_registry.h"
#include "gates/gate_bank.h"
#include "model/kv_cache.h"
#include "model/model_config.h"

namespace retain {

class BudgetedKvCache : public KvCache {
 public:
  // `learned` holds the gates trimkv / dbtrimkv need or the scorer locret / kvzap need (they must
  // outlive the cache). `chunk` is the largest number of tokens one forward appends (the prefill
  // chunk).
  BudgetedKvCache(const ModelConfig& model, const PolicySpec& policy, int64_t budget, int64_t chunk,
                  LearnedModules learned = {});
  // One budget per sequence of the batch (the batch size must then match), or one for all.
  BudgetedKvCache(const ModelConfig& model, const PolicySpec& policy, std::vector<int64_t> budgets,
                  int64_t chunk, LearnedModules learned = {});

  void observe(const LayerTensors& tensors) override;
  KvEntries append(int64_t layer, const at::Tensor& keys, const at::Tensor& values,
                   const at::Tensor& positions) override;
  // One decoded token per sequence on CUDA: the decode kernel over each head's live length
  // (kernels/decode_attention.h); anything else: the model's attention over the entries.
  at::Tensor attend(int64_t layer, const at::Tensor& q, const at::Tensor& q_positions,
                    const KvEntries& entries, double scale, int64_t window) const override;
  void end_step() override;
  int64_t live_bytes() const override;
  std::unique_ptr<KvCache> clone() const override;

  // Static decode (see KvCache): steps append into the fixed buffers and return every slot (empty
  // ones masked by position -1); eviction waits for end_static_step, which runs it exactly when
  // an eager step would have (a host-side count of each layer's longest head and of each
  // sequence's total says when, without reading the device). Not for random (it hashes on the
  // host) or threshold eviction (data-dependent every step).
  bool begin_static_decode() override;
  bool end_static_step() override;
  void end_static_decode() override;

  // Cuts back to the budget before the prompt's last token is read: per-head policies in each
  // layer once that token's entry is in (and the one-time policies have voted with it), so every
  // head holds budget + 1 entries, the token's own included; dbtrimkv globally before the step,
  // to L Hk budget (the step then adds L Hk). Decoded tokens then read at most budget + buffer + 1.
  void begin_generating_step() override;
  AttendedEntries attended_entries() const override;

  // --question-mode keep: the one-time policies vote with the context's last queries, every head
  // (dbtrimkv: the global pool) is cut back to the budget, and nothing is evicted afterwards: the
  // question and the generated tokens stay on top of the compressed context.
  void compress_context() override;
  bool frozen() const { return frozen_; }

  void end_prefill() override { protect_.clear(); }
  // Under tensor parallelism each rank's cache holds its slice of the KV heads: per-head policies
  // need nothing more, dbtrimkv ranks its pool over the group (identical survivors to one process:
  // the gathered scores are ordered as one process orders them), adakv and learned scorers are
  // refused.
  void bind_tensor_parallel(Collectives* group) override;
  void protect_from(const std::vector<int64_t>& positions) override { protect_ = positions; }

  // Measured before each eviction, and now.
  int64_t peak_bytes() const override { return std::max(peak_bytes_, live_bytes()); }
  // With buffer 0, what the cache holds after every step.
  int64_t budget_bytes() const override;
  std::vector<RowBytes> row_bytes() const override;
  // Bytes of the K/V buffers as allocated (live entries plus free slots).
  int64_t allocated_bytes() const;
  // Live entries per (sequence, KV head) of `layer`: (B, Hk) int64.
  at::Tensor lengths(int64_t layer) const { return layers_.at(layer).length; }
  // Positions of the live entries of (layer, b, head), in insertion order.
  std::vector<int64_t> live_positions(int64_t layer, int64_t b, int64_t head) const;
  // The policy's score of every slot (empty slots -inf): (B, Hk, S). Exposed for tests.
  at::Tensor scores(int64_t layer) const;

 private:
  struct Layer {
    at::Tensor keys, values;  // (B, Hk, C, D)
    at::Tensor positions;     // (B, Hk, C) int64, -1 = empty
    at::Tensor stat;    // (B, Hk, C) fp32: log beta | accumulated attention | key norm | random
    at::Tensor length;  // (B, Hk) int64
    // length.max() on the host, kept by eager steps (each adds T to every head) and re-read after
    // each compaction and after static decode, so an eager step reads nothing from the device.
    int64_t longest = 0;
    at::Tensor pending_q;  // this step's queries (policies that take votes)
    // Votes::kObservationWindow: the policy's last `voters()` queries seen and their positions,
    // whatever the chunks were: the observation window they vote with.
    at::Tensor recent_q, recent_positions;
    at::Tensor pending_stat;  // this step's per-token statistic (B, Hk, T)
    // query_statistics_from() >= 0: per sequence the number of pre-RoPE queries counted (B,), their
    // mean (B, H, D) and the sum of their squared deviations (B, H, D, D), all fp32 and updated in
    // place (a captured decode step updates them).
    at::Tensor query_count, query_mean, query_m2;
  };
  // Each group's policy is copied with the cache (clone()).
  struct PolicyHandle {
    std::unique_ptr<EvictionPolicy> policy;
    explicit PolicyHandle(std::unique_ptr<EvictionPolicy> p) : policy(std::move(p)) {}
    PolicyHandle(const PolicyHandle& other) : policy(other.policy->clone()) {}
    PolicyHandle& operator=(const PolicyHandle&) = delete;
    EvictionPolicy* operator->() const { return policy.get(); }
  };
  // The sequences sharing one budget, and that budget's policy.
  struct PolicyGroup {
    PolicyHandle policy;
    int64_t budget;
    std::vector<int64_t> rows;  // empty: every row (one budget for the batch)
    at::Tensor index;           // rows on the cache's device (undefined for every row)
  };

  void allocate(Layer& l, const at::Tensor& keys);
  void grow(Layer& l, int64_t capacity);
  // Fixes the batch size and device on the first step: per-row budgets and group indices.
  void bind_rows(int64_t batch, const at::Device& device);
  // f(group, rows) for each policy group; `rows` selects the group's sequences of a (B, ...)
  // tensor. The groups' results (B_g, ...) are put back in batch order.
  template <typename F>
  at::Tensor by_group(F&& f) const;
  // The properties every group shares (they do not depend on the budget).
  const EvictionPolicy& policy() const { return *groups_.front().policy.policy; }
  // Keeps the entries where keep (B, Hk, S) is true, packed to the front in insertion order.
  void compact(Layer& l, const at::Tensor& keep);
  // The eager end of a step: drop padding, evict what the policy says, record the peak.
  void evict_now();
  // Live entries per sequence, all layers and heads (one device read).
  std::vector<int64_t> row_entries() const;
  int64_t bytes_per_entry() const;
  // Static decode: reads each layer's longest head and each sequence's total to the host.
  void sync_host_counts();
  // Static decode: grows any layer whose next step would not fit; true if one grew.
  bool ensure_room();
  // Per-head policies (uniform, pyramid and adakv allocations): each layer cut to its per-head
  // budget (layer_budget) + keep_extra when over its budget + trigger_extra.
  void evict_per_head(int64_t keep_extra, int64_t trigger_extra);
  // uniform / pyramid: a head of sequence b holding more than trigger[b] entries keeps its top
  // keep[b]; adakv: a layer of sequence b holding more than Hk trigger[b] keeps its top Hk keep[b]
  // over all its heads, each head its best adakv floor first.
  void evict_layer(int64_t layer, const at::Tensor& keep, const at::Tensor& trigger);
  // The per-head budget of `layer` for each sequence (B,): the sequence's budget, or its pyramid
  // share.
  const at::Tensor& layer_budget(int64_t layer) const;
  // Adds this step's pre-RoPE queries at positions >= query_statistics_from() to the layer's
  // running mean and covariance.
  void add_query_statistics(Layer& l, const at::Tensor& q_before_rope, const at::Tensor& positions);
  // dbtrimkv: a sequence holding more than L Hk trigger[b] entries keeps its top L Hk keep[b].
  void evict_global(const at::Tensor& keep, const at::Tensor& trigger);
  // The policy's votes of the queries q (B, H, V, D) at q_positions (B, V) on the first `s` slots
  // of `layer`: their attention mass summed over them and the group's heads, as the policy shapes
  // it (B, Hk, S). `window`: q is the observation window, of which each group's policy takes its
  // last voters().
  at::Tensor votes(int64_t layer, const at::Tensor& q, const at::Tensor& q_positions, int64_t s,
                   bool window) const;
  void evict_below_threshold();

  ModelConfig model_;  // this rank's shapes (a tensor-parallel slice of the KV heads)
  PolicySpec spec_;
  Collectives* tp_ = nullptr;     // the tensor-parallel group, bound by the model
  std::vector<int64_t> budgets_;  // per sequence, or one for all
  std::vector<PolicyGroup> groups_;
  int64_t capacity_;
  LearnedModules learned_;
  at::Tensor budget_rows_;  // (B,) int64 on the device, from the first step
  // Per layer the per-head budget of each sequence (B,): budget_rows_ but under alloc=pyramid, and
  // on the host for static decode.
  std::vector<at::Tensor> layer_budget_rows_;
  std::vector<std::vector<int64_t>> host_layer_budgets_;
  at::Tensor adakv_floor_rows_;  // alloc=adakv: each sequence's per-head floor (B,)
  // Per sequence the first position its query statistics count (its group's policy's) (B,).
  at::Tensor query_statistics_from_rows_;
  std::vector<int64_t> protect_;  // per sequence (or one for all) the first protected position
  std::vector<Layer> layers_;
  // Per sequence, the next token's position (last position seen + 1): rows of a padded batch
  // differ. (B,) int64, undefined until the first step.
  at::Tensor seen_;
  at::Tensor step_positions_;  // the last append's positions (B, T)
  int64_t peak_bytes_ = 0;
  std::vector<int64_t> row_peaks_;  // per sequence, measured before each eviction
  bool static_ = false;
  bool frozen_ = false;      // compress_context ran: no policy eviction from then on
  bool final_step_ = false;  // the running step's last token generates (begin_generating_step)
  bool generating_ = false;  // steps record what their queries read (until a new prompt chunk)
  int64_t static_step_count_ = 0;  // static steps since the last eviction
  // (B,) int64 on the device: per sequence the most entries one generating query read in one
  // head, and in all layers and heads.
  at::Tensor attended_max_, attended_total_max_;
  // Static decode: per layer and sequence an upper bound of the longest head and of the layer's
  // total, and per sequence of the total over layers and heads.
  std::vector<std::vector<int64_t>> host_longest_, host_layer_total_;
  std::vector<int64_t> host_total_;
};

}  // namespace retain
