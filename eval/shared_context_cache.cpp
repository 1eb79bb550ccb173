#include "eval/shared_context_cache.h"

#include "core/error.h"
#include "eval/cache/shared_votes.h"

namespace retain {

SharedContextCache::SharedContextCache(std::vector<Part> parts) : parts_(std::move(parts)) {
  RETAIN_CHECK(!parts_.empty(), "SharedContextCache: no parts");
  for (const Part& p : parts_) {
    RETAIN_CHECK(p.cache != nullptr, "SharedContextCache: a part has no cache");
    RETAIN_CHECK(p.copies >= 1, "SharedContextCache: copies must be >= 1, found ", p.copies);
  }
}

namespace {
std::vector<SharedContextCache::Part> one_part(std::unique_ptr<KvCache> inner, int64_t copies) {
  std::vector<SharedContextCache::Part> parts(1);
  parts[0].cache = std::move(inner);
  parts[0].copies = copies;
  return parts;
}
}  // namespace

SharedContextCache::SharedContextCache(std::unique_ptr<KvCache> inner, int64_t copies)
    : SharedContextCache(one_part(std::move(inner), copies)) {}

at::Tensor SharedContextCache::repeated(const at::Tensor& t, int64_t copies) {
  if (!t.defined() || copies == 1) return t;
  return t.repeat_interleave(copies, 0);
}

KvCache& SharedContextCache::only() const {
  RETAIN_CHECK(parts_.size() == 1, "SharedContextCache: ", parts_.size(),
               " caches shared a context; this call needs a single one (internal)");
  return *parts_[0].cache;
}

int64_t SharedContextCache::sum_rows() const {
  int64_t rows = 0;
  for (const Part& p : parts_) rows += input_rows_ * p.copies;
  return rows;
}

at::Tensor SharedContextCache::part_rows(const at::Tensor& t, size_t part) const {
  if (!t.defined()) return t;
  int64_t begin = 0;
  for (size_t i = 0; i < part; ++i) begin += input_rows_ * parts_[i].copies;
  const int64_t rows = input_rows_ * parts_[part].copies;
  RETAIN_CHECK(t.size(0) == sum_rows(), "SharedContextCache: a step of ", t.size(0),
               " rows after a context read by ", sum_rows(), " rows (internal)");
  return t.narrow(0, begin, rows);
}

void SharedContextCache::observe(const LayerTensors& t) {
  if (routing()) {
    for (size_t i = 0; i < parts_.size(); ++i)
      if (running(i))
        parts_[i].cache->observe({t.layer, part_rows(t.hidden, i), part_rows(t.q, i),
                                  part_rows(t.k, i), part_rows(t.v, i), part_rows(t.positions, i),
                                  part_rows(t.q_before_rope, i), t.kv_head_offset});
    return;
  }
  if (!sharing_) return only().observe(t);
  input_rows_ = t.k.size(0);
  // Until the step's end: votes are cast once per input row, and once for all the parts.
  if (shared_votes_ == nullptr) shared_votes_ = std::make_shared<SharedVotes>();
  for (Part& p : parts_) {
    const int64_t n = p.copies;
    p.cache->set_identical_rows(n, shared_votes_);
    p.cache->observe({t.layer, repeated(t.hidden, n), repeated(t.q, n), repeated(t.k, n),
                      repeated(t.v, n), repeated(t.positions, n), repeated(t.q_before_rope, n),
                      t.kv_head_offset});
  }
}

KvEntries SharedContextCache::append(int64_t layer, const at::Tensor& keys,
                                     const at::Tensor& values, const at::Tensor& positions) {
  if (routing()) {
    appended_.clear();
    for (size_t i = 0; i < parts_.size(); ++i)
      appended_.push_back(running(i) ? parts_[i].cache->append(layer, part_rows(keys, i),
                                                               part_rows(values, i),
                                                               part_rows(positions, i))
                                     : KvEntries{});
    appended_layer_ = layer;
    // The parts hold different numbers of entries, so there is no one tensor of them: attend
    // reads each part's own (appended_); the caller only hands this back to attend.
    return {};
  }
  if (!sharing_) return only().append(layer, keys, values, positions);
  input_rows_ = keys.size(0);
  KvEntries first_part;
  for (size_t i = 0; i < parts_.size(); ++i) {
    const int64_t n = parts_[i].copies;
    KvEntries all = parts_[i].cache->append(layer, repeated(keys, n), repeated(values, n),
                                            repeated(positions, n));
    // Every row holds the same entries until the step's end: the first row of each input row in
    // the first part is what that input row attends over.
    if (i == 0) {
      auto first = [n](const at::Tensor& t) { return t.slice(0, 0, t.size(0), n); };
      first_part = {first(all.keys), first(all.values), first(all.positions)};
    }
  }
  return first_part;
}

at::Tensor SharedContextCache::attend(int64_t layer, const at::Tensor& q,
                                      const at::Tensor& q_positions, const KvEntries& entries,
                                      double scale, int64_t window) const {
  // The shared step reads a context (many tokens), which every cache attends to with the model's
  // attention; afterwards each part may route decoding to its own kernel.
  if (sharing_) return KvCache::attend(layer, q, q_positions, entries, scale, window);
  if (!routing()) return only().attend(layer, q, q_positions, entries, scale, window);
  RETAIN_CHECK(appended_layer_ == layer && appended_.size() == parts_.size(),
               "SharedContextCache: attend on layer ", layer, " before its append (internal)");
  std::vector<at::Tensor> out;
  for (size_t i = 0; i < parts_.size(); ++i) {
    const at::Tensor rows = part_rows(q, i);
    // A finished row's output is never read; zeros keep the batch's later layers finite.
    out.push_back(running(i) ? parts_[i].cache->attend(layer, rows, part_rows(q_positions, i),
                                                       appended_[i], scale, window)
                             : at::zeros_like(rows));
  }
  return at::cat(out, 0);
}

void SharedContextCache::end_step() {
  for (size_t i = 0; i < parts_.size(); ++i)
    if (sharing_ || running(i)) parts_[i].cache->end_step();
  part_running_.clear();
  appended_.clear();
  appended_layer_ = -1;
  sharing_ = false;
  if (shared_votes_ != nullptr) votes_reused_ += shared_votes_->reused();
  shared_votes_.reset();
}

void SharedContextCache::begin_generating_step() {
  for (Part& p : parts_) p.cache->begin_generating_step();
}

void SharedContextCache::end_prefill() {
  for (Part& p : parts_) p.cache->end_prefill();
}

void SharedContextCache::set_running_rows(const std::vector<bool>& running) {
  if (sharing_) return;  // the shared step reads a context: every row runs
  if (!routing()) return only().set_running_rows(running);
  RETAIN_CHECK(static_cast<int64_t>(running.size()) == sum_rows(),
               "SharedContextCache: ", running.size(), " running flags for ", sum_rows(),
               " rows (internal)");
  part_running_.assign(parts_.size(), false);
  size_t row = 0;
  for (size_t i = 0; i < parts_.size(); ++i)
    for (int64_t r = 0; r < input_rows_ * parts_[i].copies; ++r, ++row)
      part_running_[i] = part_running_[i] || running[row];
}

void SharedContextCache::expect_decode_steps(int64_t steps) {
  for (Part& p : parts_) p.cache->expect_decode_steps(steps);
}

KvCache::AttendedEntries SharedContextCache::attended_entries() const {
  if (parts_.size() == 1) return only().attended_entries();
  AttendedEntries all;
  bool recorded = false;
  for (const Part& p : parts_) {
    AttendedEntries part = p.cache->attended_entries();
    recorded = recorded || !part.per_head.empty();
    // A part that records nothing: -1 for its rows (what generation reports for such a cache).
    if (part.per_head.empty()) {
      part.per_head.assign(static_cast<size_t>(input_rows_ * p.copies), -1);
      part.total = part.per_head;
    }
    all.per_head.insert(all.per_head.end(), part.per_head.begin(), part.per_head.end());
    all.total.insert(all.total.end(), part.total.begin(), part.total.end());
  }
  return recorded ? all : AttendedEntries{};
}

void SharedContextCache::bind_tensor_parallel(Collectives* group) {
  for (Part& p : parts_) p.cache->bind_tensor_parallel(group);
}

bool SharedContextCache::begin_static_decode() {
  RETAIN_CHECK(!sharing_, "SharedContextCache: static decode before the shared context was read");
  size_t begun = 0;
  while (begun < parts_.size() && parts_[begun].cache->begin_static_decode()) ++begun;
  if (begun == parts_.size()) return true;
  // One part cannot: the batch decodes eagerly, so the parts that switched switch back.
  for (size_t i = 0; i < begun; ++i) parts_[i].cache->end_static_decode();
  return false;
}

bool SharedContextCache::end_static_step() {
  bool reallocated = false;
  for (Part& p : parts_) reallocated = p.cache->end_static_step() || reallocated;
  return reallocated;
}

void SharedContextCache::end_static_decode() {
  for (Part& p : parts_) p.cache->end_static_decode();
}

int64_t SharedContextCache::sum_over(int64_t (KvCache::*bytes)() const) const {
  int64_t sum = 0;
  for (const Part& p : parts_) sum += ((*p.cache).*bytes)();
  return sum;
}

int64_t SharedContextCache::live_bytes() const { return sum_over(&KvCache::live_bytes); }
int64_t SharedContextCache::peak_bytes() const { return sum_over(&KvCache::peak_bytes); }
int64_t SharedContextCache::budget_bytes() const { return sum_over(&KvCache::budget_bytes); }

std::vector<KvCache::RowBytes> SharedContextCache::row_bytes() const {
  std::vector<RowBytes> rows;
  for (const Part& p : parts_) {
    const std::vector<RowBytes> part = p.cache->row_bytes();
    rows.insert(rows.end(), part.begin(), part.end());
  }
  return rows;
}

void SharedContextCache::protect_from(const std::vector<int64_t>& positions) {
  if (positions.size() <= 1) {
    for (Part& p : parts_) p.cache->protect_from(positions);
    return;
  }
  int64_t copies = 0;
  for (const Part& p : parts_) copies += p.copies;
  const auto rows = static_cast<int64_t>(positions.size());
  RETAIN_CHECK(rows % copies == 0, "SharedContextCache: ", rows, " protected positions for ",
               copies, " rows per input row (internal)");
  auto begin = positions.begin();
  for (Part& p : parts_) {
    const int64_t n = rows / copies * p.copies;
    p.cache->protect_from(std::vector<int64_t>(begin, begin + n));
    begin += n;
  }
}

void SharedContextCache::compress_context() {
  RETAIN_CHECK(!sharing_, "SharedContextCache: compress_context before the context was read");
  for (Part& p : parts_) p.cache->compress_context();
}

std::unique_ptr<KvCache> SharedContextCache::clone() const {
  std::vector<Part> parts;
  for (const Part& p : parts_) parts.push_back({p.cache->clone(), p.copies});
  auto copy = std::make_unique<SharedContextCache>(std::move(parts));
  copy->sharing_ = sharing_;
  copy->input_rows_ = input_rows_;
  return copy;
}

}  // namespace retain
