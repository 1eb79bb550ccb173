// SharedContextCache: several policies' caches read a context once and then decode as one batch,
// each over its own rows; every row generates what its cell generates reading the context alone,
// eagerly and in static (CUDA-graph) decode.
#include <c10/core/InferenceMode.h>

#include "eval/cache_factory.h"
#include "eval/shared_context_cache.h"
#include "eviction_fixtures.h"
#include "model/decoder.h"
#include "model/generate.h"
#include "test_util.h"

namespace retain {
namespace {

using namespace eviction_testing;

struct Cell {
  std::string policy;
  std::vector<double> budgets;  // one row per budget for each context
  int64_t max_new_tokens = 8;
};

struct SharedRead {
  int64_t votes_reused = 0;  // SharedContextCache::votes_reused
  int64_t layers = 0;
};

// Two contexts of different lengths, each with its question, read under every cell at once, then
// decoded in `mode`; each row is compared with its cell reading its context alone.
SharedRead expect_rows_equal_cells_alone(const std::vector<Cell>& cells, DecodeMode mode,
                                         const std::string& want_mode) {
  c10::InferenceMode guard;
  Decoder model = Decoder::load(testing::fixture_dir("hf") / "llama_gqa4_llama3", {});
  const ModelConfig& c = model.config();
  auto gates = probe_gates(c, true);
  std::vector<std::vector<int64_t>> contexts(2), questions = {{7, 8, 9, 10, 11, 12}, {40, 41, 42}};
  for (int i = 0; i < 40; ++i) contexts[0].push_back(3 + (i * 37) % 500);
  for (int i = 0; i < 27; ++i) contexts[1].push_back(5 + (i * 53) % 480);
  const int64_t step = 40;  // the longest context: each is read in one step
  const std::vector<int64_t> lengths = {40, 27};

  std::vector<SharedContextCache::Part> parts;
  std::vector<std::vector<int64_t>> prompts;
  std::vector<RowOptions> rows;
  struct Row {
    size_t cell, context;
    double budget;
  };
  std::vector<Row> order;
  for (size_t i = 0; i < cells.size(); ++i) {
    const Cell& cell = cells[i];
    std::vector<double> budgets;
    std::vector<int64_t> tokens;
    for (size_t u = 0; u < contexts.size(); ++u)
      for (double b : cell.budgets) {
        budgets.push_back(b);
        tokens.push_back(lengths[u]);
        prompts.push_back(questions[u]);
        RowOptions row;
        row.start_position = lengths[u];
        row.max_new_tokens = cell.max_new_tokens;
        rows.push_back(row);
        order.push_back({i, u, b});
      }
    parts.push_back(
        {make_batch_kv_cache(c, parse_policy(cell.policy), budgets, tokens, step, gates.get()),
         static_cast<int64_t>(cell.budgets.size())});
  }
  SharedContextCache shared(std::move(parts));
  prefill_batch(model, contexts, shared, {0, 0}, 0);
  EXPECT_FALSE(shared.sharing());
  shared.compress_context();
  SamplingOptions options;
  options.max_new_tokens = 8;
  options.decode = mode;
  // A row that ends early runs on at position -1; a cell whose rows have all ended sits out.
  rows[1].max_new_tokens = 3;
  const auto batch = generate_batch(model, prompts, shared, options, rows);
  const auto bytes = shared.row_bytes();
  const SharedRead read{shared.votes_reused(), c.num_layers};
  if (batch.size() != order.size() || bytes.size() != order.size()) {
    ADD_FAILURE() << batch.size() << " results and " << bytes.size() << " byte counts for "
                  << order.size() << " rows";
    return read;
  }
  for (size_t r = 0; r < order.size(); ++r) {
    const Row& row = order[r];
    SCOPED_TRACE(cells[row.cell].policy + " budget " + std::to_string(row.budget) + " context " +
                 std::to_string(row.context));
    EXPECT_EQ(batch[r].decode_mode, want_mode);
    auto alone = make_kv_cache(c, parse_policy(cells[row.cell].policy), row.budget,
                               lengths[row.context], step, gates.get());
    prefill(model, contexts[row.context], *alone, 0, 0);
    alone->compress_context();
    SamplingOptions alone_options = options;
    alone_options.start_position = lengths[row.context];
    alone_options.max_new_tokens = rows[r].max_new_tokens;
    const GenerationResult want = generate(model, questions[row.context], *alone, alone_options);
    EXPECT_EQ(batch[r].tokens, want.tokens);
    EXPECT_EQ(batch[r].finish_reason, want.finish_reason);
    EXPECT_EQ(batch[r].max_attended_entries, want.max_attended_entries);
    EXPECT_EQ(batch[r].max_attended_total, want.max_attended_total);
    const auto alone_bytes = alone->row_bytes().at(0);
    EXPECT_EQ(bytes[r].live, alone_bytes.live);
    EXPECT_EQ(bytes[r].peak, alone_bytes.peak);
    EXPECT_EQ(bytes[r].budget, alone_bytes.budget);
  }
  return read;
}

const std::vector<Cell> kStaticCells = {{"streaming:buffer=0", {8, 12}},
                                        {"dbtrimkv:buffer=0", {6, 10}},
                                        {"full", {0}, 2},
                                        {"snapkv:window=4,buffer=0", {9}}};

TEST(SharedContextCache, PartsDecodingAsOneBatchEqualEachCellAlone) {
  expect_rows_equal_cells_alone(kStaticCells, DecodeMode::kEager, "eager");
}

TEST(SharedContextCache, StaticDecodeRunsWhenEveryPartSupportsIt) {
  expect_rows_equal_cells_alone(kStaticCells, DecodeMode::kStatic, "static");
}

// random cannot decode statically: the whole batch stays eager, the other parts switched back.
TEST(SharedContextCache, OnePartThatCannotDecodeStaticallyKeepsTheBatchEager) {
  expect_rows_equal_cells_alone(
      {{"streaming:buffer=0", {8}, 3}, {"random:seed=3,buffer=0", {8, 12}}}, DecodeMode::kStatic,
      "eager");
}

// h2o and importance vote with the same attention mass: the first budget of the first part casts
// it, the other budgets and parts take it (tests/attention_votes_test.cpp checks the mass
// itself), and each row still predicts what its cell predicts alone. snapkv's window votes are
// its own, cast once for its two budgets.
TEST(SharedContextCache, PartsThatCastTheSameVotesCastThemOnce) {
  const SharedRead read = expect_rows_equal_cells_alone({{"h2o:buffer=0", {8, 12}},
                                                         {"importance:buffer=0", {9}},
                                                         {"snapkv:window=4,buffer=0", {9, 11}},
                                                         {"h2o:window=2,buffer=0", {10}}},
                                                        DecodeMode::kEager, "eager");
  // Every layer: h2o's second budget, importance and the last h2o take the first h2o budget's
  // mass; snapkv's second budget takes its first's.
  EXPECT_EQ(read.votes_reused, 4 * read.layers);
}

}  // namespace
}  // namespace retain
