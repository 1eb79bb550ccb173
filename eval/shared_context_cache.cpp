#include "eval/shared_context_cache.h"

#include "core/error.h"

namespace retain {

SharedContextCache::SharedContextCache(std::unique_ptr<KvCache> inner, int64_t copies)
    : inner_(std::move(inner)), copies_(copies) {
  RETAIN_CHECK(inner_ != nullptr, "SharedContextCache: no inner cache");
  RETAIN_CHECK(copies_ >= 1, "SharedContextCache: copies must be >= 1, found ", copies_);
}

at::Tensor SharedContextCache::repeated(const at::Tensor& t) const {
  if (!t.defined() || copies_ == 1) return t;
  return t.repeat_interleave(copies_, 0);
}

void SharedContextCache::observe(const LayerTensors& t) {
  if (!sharing_) return inner_->observe(t);
  const at::Tensor hidden = repeated(t.hidden), q = repeated(t.q), k = repeated(t.k),
                   v = repeated(t.v), positions = repeated(t.positions),
                   q_before_rope = repeated(t.q_before_rope);
  inner_->observe({t.layer, hidden, q, k, v, positions, q_before_rope, t.kv_head_offset});
}

KvEntries SharedContextCache::append(int64_t layer, const at::Tensor& keys,
                                     const at::Tensor& values, const at::Tensor& positions) {
  if (!sharing_) return inner_->append(layer, keys, values, positions);
  KvEntries all = inner_->append(layer, repeated(keys), repeated(values), repeated(positions));
  // The copies of an input row hold the same entries until the step's end: its first one is what
  // the row attends over.
  auto first = [&](const at::Tensor& t) { return t.slice(0, 0, t.size(0), copies_); };
  return {first(all.keys), first(all.values), first(all.positions)};
}

at::Tensor SharedContextCache::attend(int64_t layer, const at::Tensor& q,
                                      const at::Tensor& q_positions, const KvEntries& entries,
                                      double scale, int64_t window) const {
  // The shared step reads a context (many tokens), which every cache attends to with the model's
  // attention; afterwards the inner cache may route decoding to its own kernel.
  if (sharing_) return KvCache::attend(layer, q, q_positions, entries, scale, window);
  return inner_->attend(layer, q, q_positions, entries, scale, window);
}

void SharedContextCache::end_step() {
  inner_->end_step();
  sharing_ = false;
}

bool SharedContextCache::begin_static_decode() {
  RETAIN_CHECK(!sharing_, "SharedContextCache: static decode before the shared context was read");
  return inner_->begin_static_decode();
}

void SharedContextCache::protect_from(const std::vector<int64_t>& positions) {
  inner_->protect_from(positions);
}

void SharedContextCache::compress_context() {
  RETAIN_CHECK(!sharing_, "SharedContextCache: compress_context before the context was read");
  inner_->compress_context();
}

std::unique_ptr<KvCache> SharedContextCache::clone() const {
  auto copy = std::make_unique<SharedContextCache>(inner_->clone(), copies_);
  copy->sharing_ = sharing_;
  return copy;
}

}  // namespace retain
