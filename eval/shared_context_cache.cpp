#include "eval/shared_context_cache.h"

#include "core/error.h"

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
               " caches shared a context; after it each decodes alone (take_parts) (internal)");
  RETAIN_CHECK(parts_[0].cache != nullptr, "SharedContextCache: its cache was taken (internal)");
  return *parts_[0].cache;
}

void SharedContextCache::observe(const LayerTensors& t) {
  if (!sharing_) return only().observe(t);
  for (Part& p : parts_) {
    const int64_t n = p.copies;
    p.cache->set_identical_rows(n);  // until the step's end: votes are cast once per input row
    p.cache->observe({t.layer, repeated(t.hidden, n), repeated(t.q, n), repeated(t.k, n),
                      repeated(t.v, n), repeated(t.positions, n), repeated(t.q_before_rope, n),
                      t.kv_head_offset});
  }
}

KvEntries SharedContextCache::append(int64_t layer, const at::Tensor& keys,
                                     const at::Tensor& values, const at::Tensor& positions) {
  if (!sharing_) return only().append(layer, keys, values, positions);
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
  // attention; afterwards the cache may route decoding to its own kernel.
  if (sharing_) return KvCache::attend(layer, q, q_positions, entries, scale, window);
  return only().attend(layer, q, q_positions, entries, scale, window);
}

void SharedContextCache::end_step() {
  if (!sharing_) return only().end_step();
  for (Part& p : parts_) p.cache->end_step();
  sharing_ = false;
}

void SharedContextCache::bind_tensor_parallel(Collectives* group) {
  for (Part& p : parts_) p.cache->bind_tensor_parallel(group);
}

bool SharedContextCache::begin_static_decode() {
  RETAIN_CHECK(!sharing_, "SharedContextCache: static decode before the shared context was read");
  return only().begin_static_decode();
}

int64_t SharedContextCache::live_bytes() const {
  int64_t sum = 0;
  for (const Part& p : parts_) sum += p.cache->live_bytes();
  return sum;
}

int64_t SharedContextCache::peak_bytes() const {
  int64_t sum = 0;
  for (const Part& p : parts_) sum += p.cache->peak_bytes();
  return sum;
}

int64_t SharedContextCache::budget_bytes() const {
  int64_t sum = 0;
  for (const Part& p : parts_) sum += p.cache->budget_bytes();
  return sum;
}

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
  return copy;
}

std::vector<std::unique_ptr<KvCache>> SharedContextCache::take_parts() {
  RETAIN_CHECK(!sharing_, "SharedContextCache: its parts were taken before the context was read");
  std::vector<std::unique_ptr<KvCache>> caches;
  for (Part& p : parts_) caches.push_back(std::move(p.cache));
  parts_.clear();
  return caches;
}

}  // namespace retain
