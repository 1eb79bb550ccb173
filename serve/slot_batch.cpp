#include "serve/slot_batch.h"

#include <algorithm>

#include "core/error.h"
#include "eval/cache_factory.h"

namespace retain {

std::string SlotBatch::unsupported(const Decoder& model, const SlotPolicy& slots) {
  const PolicySpec& p = slots.policy;
  if (!p.budgeted()) return "policy " + p.name() + " keeps every entry (no budgeted rows)";
  if (slots.budget < 1)
    return "the budget " + std::to_string(slots.budget) +
           " is a fraction of each prompt, which rows cannot share";
  if (!make_policy(p, resolve_budget(slots.budget, 1))->static_decode())
    return "policy " + p.name() + " cannot decode statically (it evicts by data read every step)";
  if (model.config().tp.size > 1) return "tensor parallelism decides eviction over ranks";
  for (int64_t w : model.config().sliding_window)
    if (w != 0) return "sliding-window layers take no eviction policy";
  return "";
}

int64_t SlotBatch::row_bytes(const Decoder& model, const SlotPolicy& slots, int64_t chunk) {
  const ModelConfig& c = model.config();
  const int64_t element = static_cast<int64_t>(c10::elementSize(model.dtype()));
  const int64_t entries = resolve_budget(slots.budget, 1) + slots.policy.buffer + chunk;
  return 2 * c.num_layers * c.num_kv_heads * c.head_dim * element * entries;
}

SlotBatch::SlotBatch(const Decoder& model, const SlotPolicy& slots, int64_t rows, int64_t chunk)
    : model_(model), slots_(slots), occupied_(static_cast<size_t>(rows), false) {
  const std::string why = unsupported(model, slots);
  RETAIN_CHECK(why.empty(), "static decode rows: ", why);
  budget_ = resolve_budget(slots.budget, 1);
  cache_ = std::make_unique<BudgetedKvCache>(model.config(), slots.policy, budget_, chunk,
                                             slots.learned);
  RETAIN_CHECK(cache_->open_rows(rows, model.device(), model.dtype()),
               "static decode rows: policy ", slots.policy.text, " cannot decode statically");
  if (DecodeGraph::available(model)) graph_ = std::make_unique<DecodeGraph>(model, *cache_, rows);
}

bool SlotBatch::accepts(const PolicySpec& policy, int64_t budget,
                        const LearnedModules& learned) const {
  return policy.text == slots_.policy.text && budget == budget_ &&
         learned.gates == slots_.learned.gates && learned.scorer == slots_.learned.scorer;
}

int64_t SlotBatch::join(const BudgetedKvCache& cache) {
  const auto free = std::find(occupied_.begin(), occupied_.end(), false);
  if (free == occupied_.end()) return -1;
  const auto row = static_cast<int64_t>(free - occupied_.begin());
  // A widened buffer is a new allocation: a captured step would still read the old one. A load
  // that failed part-way may have widened some: capture again either way (the row stays free).
  bool moved = true;
  try {
    moved = cache_->load_row(row, cache);
  } catch (...) {
    if (graph_) graph_->recapture();
    throw;
  }
  if (moved) {
    ++reallocations_;
    if (graph_) graph_->recapture();
  }
  *free = true;
  return row;
}

void SlotBatch::leave(int64_t row) {
  RETAIN_CHECK(row >= 0 && row < rows() && occupied_[row], "static decode rows: row ", row,
               " is not occupied");
  cache_->clear_row(row);
  occupied_[row] = false;
}

int64_t SlotBatch::occupied() const {
  return static_cast<int64_t>(std::count(occupied_.begin(), occupied_.end(), true));
}

at::Tensor SlotBatch::step(const std::vector<int64_t>& tokens,
                           const std::vector<int64_t>& positions) {
  const int64_t r = rows();
  RETAIN_CHECK(
      static_cast<int64_t>(tokens.size()) == r && static_cast<int64_t>(positions.size()) == r,
      "static decode rows: a step takes one token and position per row (", r, "), found ",
      tokens.size(), " and ", positions.size());
  auto token = at::zeros({r, 1}, at::kLong);
  auto position = at::full({r, 1}, -1, at::kLong);
  for (int64_t i = 0; i < r; ++i)
    if (occupied_[i]) {
      token[i][0] = tokens[i];
      position[i][0] = positions[i];
    }
  if (graph_) return graph_->step(token, position);
  // As generate()'s static decode steps.
  ForwardContext context{cache_.get()};
  context.ids_checked = true;  // the ids are the model's own picks
  auto logits = model_.logits(model_.forward_hidden(token, position, context).squeeze(1));
  cache_->end_static_step();
  return logits;
}

int64_t SlotBatch::allocated_bytes() const { return cache_->allocated_bytes(); }

int64_t SlotBatch::live_bytes() const {
  const auto rows = cache_->row_bytes();
  int64_t bytes = 0;
  for (size_t i = 0; i < rows.size(); ++i)
    if (occupied_[i]) bytes += rows[i].live;
  return bytes;
}

int64_t SlotBatch::budget_bytes() const {
  const auto rows = cache_->row_bytes();
  int64_t bytes = 0;
  for (size_t i = 0; i < rows.size(); ++i)
    if (occupied_[i]) bytes += rows[i].budget;
  return bytes;
}

}  // namespace retain
