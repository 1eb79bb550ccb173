// The training loop's parts on their own: the LR schedule, the sampler (epochs, ranks, resume),
// packing documents from shards into sequences, and step directories (atomic, verified, pruned).
#include <algorithm>
#include <fstream>
#include <set>

#include "checkpoints/step_dir.h"
#include "core/json.h"
#include "data/packed_dataset.h"
#include "data/shards.h"
#include "test_util.h"
#include "trainer/recipe.h"
#include "trainer/schedule.h"
#include "trainer/train_settings.h"

namespace retain {
namespace {

using testing::TempDir;

// transformers' cosine_with_min_lr with warmup: values worked out by hand for lr 1e-3, min_lr
// 1e-5, 10 warmup steps, 110 steps.
TEST(LearningRate, LinearWarmupThenCosineToTheMinimum) {
  auto lr = [](int64_t step) { return learning_rate(step, 1e-3, 1e-5, 10, 110); };
  EXPECT_DOUBLE_EQ(lr(0), 0.0);
  EXPECT_DOUBLE_EQ(lr(5), 5e-4);
  EXPECT_DOUBLE_EQ(lr(10), 1e-3);
  // progress 1/4: min + (lr - min) (1 + cos(pi/4)) / 2
  EXPECT_NEAR(lr(35), 1e-5 + 9.9e-4 * 0.5 * (1 + 0.70710678118654752), 1e-15);
  EXPECT_NEAR(lr(60), 5.05e-4, 1e-15);  // progress 1/2: the midpoint
  EXPECT_NEAR(lr(110), 1e-5, 1e-15);
  EXPECT_NEAR(lr(500), 1e-5, 1e-15);  // past the end it stays at the minimum
  for (int64_t s = 10; s < 110; ++s) EXPECT_GT(lr(s), lr(s + 1)) << s;
}

// One schema resolves, reads and documents recipes: every key reads into its typed member with
// its default, and a value out of range names the key and the value.
TEST(RecipeSchema, ReadsTypedMembersAndRefusesValuesOutOfRange) {
  const std::vector<std::string> paths = {"model.path=m", "data.shards=s"};
  auto with = [&](std::vector<std::string> more) {
    more.insert(more.end(), paths.begin(), paths.end());
    return read_settings(resolve_recipe("", more));
  };
  const TrainSettings s = with({"optim.betas=[0.8, 0.95]", "train.trainable=kvzap"});
  EXPECT_EQ(s.model_dir, "m");
  EXPECT_EQ(s.gates.width, GateConfig{}.width);  // the gate defaults are GateConfig's
  EXPECT_EQ(s.gates.bias_init, GateConfig{}.bias_init);
  EXPECT_DOUBLE_EQ(s.beta1, 0.8);
  EXPECT_DOUBLE_EQ(s.beta2, 0.95);
  EXPECT_TRUE(s.train_scorer());
  EXPECT_EQ(s.scorer.kind, ScorerKind::kKvzap);
  EXPECT_TRUE(s.terms.ntp && s.terms.fwkl);  // loss.base's default
  EXPECT_EQ(s.device, "auto");
  EXPECT_ERROR_CONTAINS(with({"optim.lr=-1"}), "optim.lr must be positive, found -1");
  EXPECT_ERROR_CONTAINS(with({"train.steps=0"}), "train.steps must be positive, found 0");
  EXPECT_ERROR_CONTAINS(with({"checkpoint.keep_last_k=-2"}), "checkpoint.keep_last_k must be >= 0");
  EXPECT_ERROR_CONTAINS(read_settings(resolve_recipe("", {"data.shards=s"})),
                        "model.path is required");
  const std::string table = recipe_keys_markdown();
  for (const auto& k : recipe_schema())
    EXPECT_NE(table.find(std::string("| `") + k.key + "` |"), std::string::npos) << k.key;
}

TEST(Sampler, WalksEpochsInOrderOrAsSeededPermutations) {
  Sampler plain(10, 0, /*shuffle=*/false);
  EXPECT_EQ(plain.next(4), (std::vector<int64_t>{0, 1, 2, 3}));
  plain.next(4);
  std::vector<int64_t> epochs;
  EXPECT_EQ(plain.next(4, 0, 1, &epochs), (std::vector<int64_t>{8, 9, 0, 1}));
  EXPECT_EQ(epochs, (std::vector<int64_t>{0, 0, 1, 1}));
  EXPECT_EQ(plain.state().epoch, 1);
  EXPECT_EQ(plain.state().consumed, 2);

  Sampler a(10, 7, true), b(10, 7, true), other_seed(10, 8, true);
  auto first = a.next(10), second = a.next(10);
  EXPECT_EQ(b.next(10), first);  // the same seed, the same order
  EXPECT_NE(first, second);      // each epoch its own permutation
  EXPECT_NE(other_seed.next(10), first);
  for (const auto& epoch : {first, second}) {
    std::set<int64_t> seen(epoch.begin(), epoch.end());
    EXPECT_EQ(seen.size(), 10u);
    EXPECT_EQ(*seen.rbegin(), 9);
  }
}

TEST(Sampler, RanksSplitTheGlobalBatchAndResumeAnywhere) {
  Sampler one(13, 3, true);
  const auto global = one.next(6);
  for (int rank = 0; rank < 3; ++rank) {
    Sampler part(13, 3, true);
    EXPECT_EQ(part.next(6, rank, 3), (std::vector<int64_t>{global[rank], global[rank + 3]}))
        << "rank " << rank;
  }
  // Resuming from a state continues exactly where the other sampler is, on any world size.
  Sampler original(13, 3, true);
  original.next(5);
  original.next(5);
  Sampler resumed(13, 3, true);
  resumed.restore(original.state());
  const auto expected = original.next(5);
  EXPECT_EQ(resumed.next(5), expected);
}

// Shard A holds documents of 3 and 5 tokens, shard B one of 3 with a loss mask; tokens are 100
// plus their place in the stream. Sequences of 4 tokens cut the stream (11 tokens) into 3.
TEST(PackedDataset, CutsTheStreamAndRestartsPositionsPerDocumentPart) {
  TempDir dir;
  const ShardMeta meta{"abc", 200};
  ShardContents a, b;
  for (int32_t t = 0; t < 8; ++t) a.tokens.push_back(100 + t);
  a.doc_offsets = {0, 3, 8};
  for (int32_t t = 8; t < 11; ++t) b.tokens.push_back(100 + t);
  b.doc_offsets = {0, 3};
  b.loss_mask = {1, 0, 1};
  write_shard(dir / "shard-00000.h5", a, meta);
  write_shard(dir / "shard-00001.h5", b, meta);
  PackedDataset data(list_shards(dir.path()), 4, "abc", 200);
  ASSERT_EQ(data.size(), 3);
  EXPECT_EQ(data.num_tokens(), 11);
  auto rows = data.batch({2, 0, 1});
  auto row = [](const at::Tensor& t, int64_t r) {
    auto v = t[r].to(at::kLong).contiguous();
    return std::vector<int64_t>(v.data_ptr<int64_t>(), v.data_ptr<int64_t>() + v.numel());
  };
  // Sequence 2: shard B's document, then padding (segment -1, masked out).
  EXPECT_EQ(row(rows.ids, 0), (std::vector<int64_t>{108, 109, 110, 0}));
  EXPECT_EQ(row(rows.positions, 0), (std::vector<int64_t>{0, 1, 2, 0}));
  EXPECT_EQ(row(rows.segments, 0), (std::vector<int64_t>{0, 0, 0, -1}));
  EXPECT_EQ(row(rows.loss_mask, 0), (std::vector<int64_t>{1, 0, 1, 0}));
  // Sequence 0: the first document, then the second's first token as a new segment.
  EXPECT_EQ(row(rows.ids, 1), (std::vector<int64_t>{100, 101, 102, 103}));
  EXPECT_EQ(row(rows.positions, 1), (std::vector<int64_t>{0, 1, 2, 0}));
  EXPECT_EQ(row(rows.segments, 1), (std::vector<int64_t>{0, 0, 0, 1}));
  // Sequence 1: the rest of the second document, its positions restarting at 0.
  EXPECT_EQ(row(rows.ids, 2), (std::vector<int64_t>{104, 105, 106, 107}));
  EXPECT_EQ(row(rows.positions, 2), (std::vector<int64_t>{0, 1, 2, 3}));
  EXPECT_EQ(row(rows.segments, 2), (std::vector<int64_t>{0, 0, 0, 0}));
  EXPECT_EQ(row(rows.loss_mask, 2), (std::vector<int64_t>{1, 1, 1, 1}));
  EXPECT_ERROR_CONTAINS(data.batch({3}), "sequence 3 out of range");
  EXPECT_ERROR_CONTAINS(PackedDataset(list_shards(dir.path()), 4, "other", 200), "tokenizer");
}

TEST(StepDirs, AtomicVerifiedAndPruned) {
  TempDir dir;
  const fs::path run = dir / "run";
  auto write = [&](int64_t step, const std::string& text) {
    return write_step_dir(run, step, Json{{"note", text}},
                          [&](const fs::path& tmp) { std::ofstream(tmp / "state.txt") << text; });
  };
  EXPECT_FALSE(latest_step_dir(run).has_value());
  write(5, "five");
  write(7, "seven");
  // An interrupted write (no manifest) is never the newest step.
  fs::create_directories(run / "step-9");
  std::ofstream(run / "step-9" / "state.txt") << "torn";
  ASSERT_TRUE(latest_step_dir(run).has_value());
  EXPECT_EQ(latest_step_dir(run)->filename(), "step-7");
  const Json manifest = read_manifest(run / "step-7");
  EXPECT_EQ(manifest["step"], 7);
  EXPECT_EQ(manifest["note"], "seven");
  EXPECT_ERROR_CONTAINS(read_manifest(run / "step-9"), "no manifest.json");
  // A file changed after the write is caught.
  std::ofstream(run / "step-5" / "state.txt") << "FIVE";
  EXPECT_ERROR_CONTAINS(read_manifest(run / "step-5"), "does not match the manifest");
  // A write a kill interrupted leaves its temp directory; a resuming run removes it.
  fs::create_directories(run / ".step-8.tmp.12345");
  EXPECT_EQ(remove_interrupted_writes(run), 1);
  EXPECT_FALSE(fs::exists(run / ".step-8.tmp.12345"));
  prune_step_dirs(run, 1);
  EXPECT_FALSE(fs::exists(run / "step-5"));
  EXPECT_TRUE(fs::exists(run / "step-7"));
}

}  // namespace
}  // namespace retain
