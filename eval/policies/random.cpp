// Random eviction: a seeded score for each entry (the floor every informed policy must beat). The
// score is a hash of (seed, layer, KV head of the model, position), not a draw from a stream, so
// an entry gets the same score whatever the batch it runs in, however its prompt is chunked and
// however the heads are split over tensor-parallel ranks: a row of a batched evaluation keeps
// what it keeps alone.
#include "eval/policies/policy_registry.h"

namespace retain {

namespace {

// SplitMix64's finaliser: consecutive inputs give independent-looking outputs.
uint64_t mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

class RandomScores final : public EvictionPolicy {
 public:
  explicit RandomScores(uint64_t seed) : seed_(seed) {}
  std::unique_ptr<EvictionPolicy> clone() const override {
    return std::make_unique<RandomScores>(*this);
  }
  at::Tensor token_statistic(const LayerTensors& t, const LearnedModules&) const override {
    const int64_t b = t.k.size(0), hk = t.k.size(1), n = t.k.size(2);
    auto positions = t.positions.to(at::kCPU, at::kLong).contiguous();
    auto out = at::empty({b, hk, n}, at::kFloat);
    const int64_t* pos = positions.data_ptr<int64_t>();
    float* score = out.data_ptr<float>();
    for (int64_t r = 0; r < b; ++r)
      for (int64_t h = 0; h < hk; ++h)
        for (int64_t i = 0; i < n; ++i) {
          const uint64_t key = mix(mix(mix(seed_ ^ static_cast<uint64_t>(t.layer)) ^
                                       static_cast<uint64_t>(h + t.kv_head_offset)) ^
                                   static_cast<uint64_t>(pos[r * n + i]));
          score[(r * hk + h) * n + i] = static_cast<float>(key >> 40) * 0x1.0p-24f;  // [0, 1)
        }
    return out.to(t.k.device());
  }
  at::Tensor score(const ScoreContext& c) const override { return c.stat; }
  bool static_decode() const override { return false; }  // hashes on the host every step

 private:
  uint64_t seed_;
};

}  // namespace

PolicyRegistration random_policy() {
  PolicyRegistration r;
  r.name = "random";
  r.keeps = "a seeded random score of each entry (a hash of seed, layer, head and position)";
  r.options = {{"seed", PolicyOption::Type::kInteger, "0", "the scores' seed"}};
  r.make = [](const PolicyArgs& a, int64_t) -> std::unique_ptr<EvictionPolicy> {
    return std::make_unique<RandomScores>(static_cast<uint64_t>(a.integer("seed", 0)));
  };
  return r;
}

}  // namespace retain
