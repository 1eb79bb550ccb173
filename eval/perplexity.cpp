#include "eval/perplexity.h"

#include <c10/core/InferenceMode.h>

#include <cmath>
#include <optional>

#include "core/error.h"
#include "core/progress.h"

namespace retain {

PerplexityResult compute_perplexity(const Decoder& model, const std::vector<int64_t>& ids,
                                    const PerplexityOptions& options) {
  const auto n = static_cast<int64_t>(ids.size());
  RETAIN_CHECK(n >= 2, "perplexity: need at least 2 tokens, found ", n);
  const int64_t max_length = options.max_length > 0 ? options.max_length : n;
  const int64_t stride = options.stride > 0 ? options.stride : max_length;
  RETAIN_CHECK(stride <= max_length, "perplexity: stride ", stride, " exceeds max_length ",
               max_length, " (tokens between windows would never be scored)");
  RETAIN_CHECK(options.logit_block > 0, "perplexity: logit_block must be positive");
  c10::InferenceMode guard;

  auto all = at::tensor(ids, at::kLong);
  double total_nll = 0;  // accumulated in double: long texts sum millions of terms
  PerplexityResult result;
  ProgressBar bar("ppl", n - 1, "tok");
  int64_t scored_until = 1;  // token 0 has no prediction
  for (int64_t begin = 0; scored_until < n; begin += stride) {
    const int64_t end = std::min(begin + max_length, n);
    const int64_t len = end - begin;
    auto window = all.narrow(0, begin, len).view({1, len});
    auto positions = at::arange(len, at::kLong).view({1, len});
    auto hidden = model.forward_hidden(window, positions, nullptr).squeeze(0);  // (len, d)
    // Targets are tokens [scored_until, end); token j is predicted by hidden row j - 1 - begin.
    for (int64_t first = scored_until; first < end; first += options.logit_block) {
      const int64_t count = std::min(options.logit_block, end - first);
      auto logits = model.logits(hidden.narrow(0, first - 1 - begin, count));  // (count, V)
      auto targets = all.narrow(0, first, count).to(logits.device());
      auto logp = at::log_softmax(logits, -1).gather(1, targets.unsqueeze(1));
      total_nll -= logp.sum().to(at::kDouble).item<double>();
    }
    bar.update(end - scored_until);
    result.tokens += end - scored_until;
    scored_until = end;
    ++result.windows;
  }
  bar.finish();
  result.nll = total_nll / static_cast<double>(result.tokens);
  result.ppl = std::exp(result.nll);
  return result;
}

PerplexityResult compute_streaming_perplexity(const Decoder& model, const std::vector<int64_t>& ids,
                                              KvCache& cache, int64_t chunk,
                                              const std::vector<uint8_t>* scored, bool progress) {
  const auto n = static_cast<int64_t>(ids.size());
  RETAIN_CHECK(n >= 2, "perplexity: need at least 2 tokens, found ", n);
  RETAIN_CHECK(chunk > 0, "perplexity: --chunk must be positive");
  RETAIN_CHECK(scored == nullptr || scored->size() == ids.size(), "perplexity: ", ids.size(),
               " tokens but ", scored ? scored->size() : 0, " score flags");
  c10::InferenceMode guard;
  auto all = at::tensor(ids, at::kLong);
  // Per target token (ids[1..]): 1 where it is scored.
  at::Tensor target_scored;
  if (scored != nullptr)
    target_scored = at::tensor(std::vector<uint8_t>(scored->begin() + 1, scored->end()), at::kByte)
                        .to(at::kBool);
  double total_nll = 0;
  PerplexityResult result;
  std::optional<ProgressBar> bar;
  if (progress) bar.emplace("ppl", n - 1, "tok");
  for (int64_t begin = 0; begin < n - 1; begin += chunk) {
    const int64_t len = std::min(chunk, n - 1 - begin);  // the last token is only a target
    auto hidden =
        model
            .forward_hidden(all.narrow(0, begin, len).view({1, len}),
                            at::arange(begin, begin + len, at::kLong).view({1, len}), &cache)
            .squeeze(0);
    auto logits = model.logits(hidden);  // (len, V): row i predicts token begin + i + 1
    auto targets = all.narrow(0, begin + 1, len).to(logits.device());
    auto logp =
        at::log_softmax(logits, -1).gather(1, targets.unsqueeze(1)).squeeze(1).to(at::kDouble);
    if (target_scored.defined()) {
      auto picked = logp.masked_select(target_scored.narrow(0, begin, len).to(logp.device()));
      total_nll -= picked.sum().item<double>();
      result.tokens += picked.numel();
    } else {
      total_nll -= logp.sum().item<double>();
      result.tokens += len;
    }
    result.windows += 1;
    if (bar) bar->update(len);
  }
  if (bar) bar->finish();
  result.nll = result.tokens > 0 ? total_nll / static_cast<double>(result.tokens) : 0.0;
  result.ppl = std::exp(result.nll);
  return result;
}

}  // namespace retain
