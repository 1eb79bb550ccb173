// Gates on vision-language models: conversations with images become shards that keep each image
// whole with its document (bytes, patch grid, placeholders expanded, no labels on image tokens),
// documents are packed whole, and the packed batch the trainer runs gives every document the
// logits it has alone through the inference path (its own 3-D rotary positions, its own images'
// features) — on the tiny random Qwen2.5-VL and Qwen3-VL that transformers wrote.
#include <c10/core/InferenceMode.h>

#include <fstream>

#include "core/json.h"
#include "data/packed_dataset.h"
#include "data/prep.h"
#include "data/shards.h"
#include "gates/gated_attention.h"
#include "model/decoder.h"
#include "model/tokenizers/tokenizer.h"
#include "model/vision/image_io.h"
#include "model/vision/multimodal_prompt.h"
#include "test_util.h"
#include "trainer/multimodal_batch.h"

namespace retain {
namespace {

class VlmTraining : public ::testing::TestWithParam<std::string> {
 protected:
  fs::path images() const { return testing::fixture_dir("hf_vl") / "images"; }
  fs::path model_dir() const { return testing::fixture_dir("hf_vl") / GetParam(); }
};

std::string image_item(const fs::path& path) {
  return Json({{"type", "image"}, {"image", path.string()}}).dump();
}

TEST_P(VlmTraining, PackedDocumentsEqualEachDocumentAlone) {
  const fs::path vl = testing::fixture_dir("hf_vl");
  if (fs::exists(vl / ".skipped") && !fs::exists(vl / ".complete"))
    GTEST_SKIP() << "VL fixtures not built here: " << read_text_file(vl / ".skipped");
  testing::TempDir dir;
  // One image; two images and a second turn; text only.
  {
    std::ofstream f(dir / "conversations.jsonl");
    f << R"({"messages": [{"role": "user", "content": [)" << image_item(images() / "wide.png")
      << R"(, {"type": "text", "text": "What is this?"}]}, {"role": "assistant", "content": "A gradient."}]})"
      << "\n";
    f << R"({"messages": [{"role": "user", "content": [{"type": "text", "text": "Compare "}, )"
      << image_item(images() / "tall.jpg") << ", " << image_item(images() / "small.png")
      << R"(]}, {"role": "assistant", "content": "Both are small."}, {"role": "user", "content": "Sure?"}, {"role": "assistant", "content": "Yes."}]})"
      << "\n";
    f << R"({"messages": [{"role": "user", "content": "No image here."}, {"role": "assistant", "content": "Fine."}]})"
      << "\n";
  }
  PrepOptions prep;
  prep.tokenizer_dir = model_dir().string();
  prep.inputs = {(dir / "conversations.jsonl").string()};
  prep.out = (dir / "shards").string();
  prep.format = "chat";
  const PrepSummary summary = run_prep(prep);
  EXPECT_EQ(summary.images, 3);

  Decoder model = Decoder::load(model_dir(), {});
  const int64_t image_token = model.config().multimodal->image_token_id;
  const auto shards = list_shards(dir / "shards");
  ShardReader reader(shards[0]);
  EXPECT_EQ(reader.meta().format_version, kImageShardFormatVersion);
  ASSERT_EQ(reader.num_images(), 3);
  const auto second = reader.doc_images(1);
  ASSERT_EQ(second.size(), 2u);
  const std::string tall = read_text_file(images() / "tall.jpg");
  EXPECT_EQ(std::string(second[0].bytes.begin(), second[0].bytes.end()), tall);

  PackedDataset data(shards, 4096, tokenizer_sha256(model_dir()), model.config().vocab_size);
  ASSERT_TRUE(data.whole_documents());
  ASSERT_EQ(data.size(), 1);  // the three documents fit one sequence
  const PackedBatch batch = data.batch({0});
  ASSERT_EQ(batch.images.size(), 3u);
  // No labels on image tokens.
  EXPECT_FALSE((batch.loss_mask & (batch.ids == image_token)).any().item<bool>());

  c10::InferenceMode guard;
  const ImageProcessorConfig processor = ImageProcessorConfig::load(model_dir());
  const MultimodalInputs inputs = packed_multimodal_inputs(model, batch, processor);
  GatedAttentionHook plain(nullptr, batch.segments);
  ForwardContext context{nullptr, &plain};
  context.multimodal = &inputs;
  const at::Tensor packed = model.logits(model.forward_hidden(batch.ids, batch.positions, context));

  // Each document alone, through the inference path: the template's ids with one placeholder per
  // image, expanded and embedded by prepare_multimodal_prompt.
  const std::vector<std::vector<std::string>> doc_images = {
      {"wide.png"}, {"tall.jpg", "small.png"}, {}};
  const auto seg = batch.segments[0];
  for (int64_t d = 0; d < 3; ++d) {
    SCOPED_TRACE(d);
    const auto cols = (seg == d).nonzero().squeeze(1);
    const int64_t begin = cols[0].item<int64_t>(), n = cols.numel();
    const at::Tensor ids = batch.ids[0].slice(0, begin, begin + n).contiguous();
    std::vector<int64_t> collapsed;
    for (int64_t i = 0; i < n; ++i) {
      const int64_t id = ids[i].item<int64_t>();
      if (id != image_token || collapsed.empty() || collapsed.back() != image_token)
        collapsed.push_back(id);
    }
    std::vector<ProcessedImage> processed;
    for (const auto& name : doc_images[static_cast<size_t>(d)])
      processed.push_back(preprocess_image(read_image_rgb(images() / name), processor));
    const MultimodalPrompt alone = prepare_multimodal_prompt(model, collapsed, processed);
    ASSERT_EQ(alone.ids,
              std::vector<int64_t>(ids.data_ptr<int64_t>(), ids.data_ptr<int64_t>() + n));
    BatchMultimodal one({std::make_shared<MultimodalPrompt>(alone)}, {0}, n, at::kCPU);
    MultimodalInputs one_inputs = one.columns(0, n);
    ForwardContext one_context;
    one_context.multimodal = &one_inputs;
    const at::Tensor logits = model.logits(
        model.forward_hidden(ids.unsqueeze(0), at::arange(n, at::kLong).unsqueeze(0), one_context));
    const double diff =
        (packed[0].slice(0, begin, begin + n) - logits[0]).abs().max().item<double>();
    EXPECT_LE(diff, 1e-4);
    std::cout << "[ measured ] " << GetParam() << " document " << d << " (" << n
              << " tokens, packed): logits max abs diff to alone " << diff << "\n";
  }
}

TEST_P(VlmTraining, BadImageDataIsRefused) {
  const fs::path vl = testing::fixture_dir("hf_vl");
  if (fs::exists(vl / ".skipped") && !fs::exists(vl / ".complete"))
    GTEST_SKIP() << "VL fixtures not built here";
  testing::TempDir dir;
  auto prep_line = [&](const std::string& line) {
    write_text_file_atomic(dir / "c.jsonl", line + "\n");
    PrepOptions prep;
    prep.tokenizer_dir = model_dir().string();
    prep.inputs = {(dir / "c.jsonl").string()};
    prep.out = (dir / "out").string();
    prep.format = "chat";
    run_prep(prep);
  };
  EXPECT_ERROR_CONTAINS(
      prep_line(
          R"({"messages": [{"role": "user", "content": [{"type": "image", "image": "nope.png"}]}]})"),
      "c.jsonl:1: image " + (dir / "nope.png").string() + " does not exist");
  EXPECT_ERROR_CONTAINS(
      prep_line(
          R"({"messages": [{"role": "user", "content": [{"type": "image", "image": "data:image/png;base64,@@@@"}]}]})"),
      "c.jsonl:1: the inline image's base64 is invalid");
  EXPECT_ERROR_CONTAINS(
      prep_line(
          R"({"messages": [{"role": "user", "content": [{"type": "video", "video": "v.mp4"}]}]})"),
      "content item of type 'video' (expected text or image)");
  EXPECT_ERROR_CONTAINS(
      prep_line(R"({"messages": [{"role": "user", "content": [{"type": "image", "image": ")" +
                (images() / "truncated.jpg").string() + R"("}]}]})"),
      "c.jsonl:1 image 0");
  EXPECT_ERROR_CONTAINS(
      prep_line(R"({"messages": [{"role": "user", "content": "typed <|image_pad|> by hand"}]})"),
      "c.jsonl:1: 0 image item(s) but 1 image placeholder(s)");
  EXPECT_FALSE(fs::exists(dir / "out"));
  EXPECT_FALSE(fs::exists(dir / "out.tmp"));
  // A text-only model's directory cannot prepare images: this VLM's tokenizer with a qwen3
  // text model's config.json.
  fs::create_directories(dir / "text_model");
  for (const char* f : {"tokenizer.json", "tokenizer_config.json", "chat_template.jinja"})
    fs::copy_file(model_dir() / f, dir / "text_model" / f);
  fs::copy_file(testing::fixture_dir("hf") / "qwen3_qknorm" / "config.json",
                dir / "text_model" / "config.json");
  EXPECT_ERROR_CONTAINS(
      [&] {
        write_text_file_atomic(
            dir / "t.jsonl",
            R"({"messages": [{"role": "user", "content": [{"type": "image", "image": ")" +
                (images() / "wide.png").string() + R"("}]}]})" + "\n");
        PrepOptions prep;
        prep.tokenizer_dir = (dir / "text_model").string();
        prep.inputs = {(dir / "t.jsonl").string()};
        prep.out = (dir / "out2").string();
        prep.format = "chat";
        run_prep(prep);
      }(),
      "is not a vision-language model directory");
}

TEST(ImageShards, ReaderValidatesTheImageIndex) {
  testing::TempDir dir;
  ShardContents c;
  c.tokens = {1, 7, 7, 2, 1, 7, 2};
  c.doc_offsets = {0, 4, 7};
  c.image_bytes = {1, 2, 3, 4, 5};
  c.image_offsets = {0, 3, 5};
  c.image_grids = {1, 2, 4, 1, 2, 2};
  c.image_docs = {0, 1};
  ShardMeta meta{"sha", 10, kShardFormatVersion, 7, 2};
  write_shard(dir / "good.h5", c, meta);
  ShardReader good(dir / "good.h5");
  EXPECT_EQ(good.meta().format_version, kImageShardFormatVersion);
  EXPECT_EQ(good.meta().image_token_id, 7);
  ASSERT_EQ(good.doc_images(1).size(), 1u);
  EXPECT_EQ(good.doc_images(1)[0].bytes, (std::vector<uint8_t>{4, 5}));
  EXPECT_EQ(good.doc_images(0)[0].w, 4);

  auto bad = c;
  bad.image_grids = {1, 3, 4, 1, 2, 2};
  write_shard(dir / "grid.h5", bad, meta);
  EXPECT_ERROR_CONTAINS(ShardReader(dir / "grid.h5"),
                        "image 0's grid 1x3x4 is not positive or not a multiple of "
                        "spatial_merge_size 2");
  bad = c;
  bad.image_docs = {1, 0};
  write_shard(dir / "order.h5", bad, meta);
  EXPECT_ERROR_CONTAINS(ShardReader(dir / "order.h5"),
                        "image 1's document 0 is out of range or out of order");
  bad = c;
  bad.image_offsets = {0, 3};
  EXPECT_ERROR_CONTAINS(write_shard(dir / "lengths.h5", bad, meta),
                        "image datasets of inconsistent lengths");
  EXPECT_ERROR_CONTAINS(write_shard(dir / "meta.h5", c, ShardMeta{"sha", 10}),
                        "needs image_token_id and spatial_merge_size");
  // Packing reads whole documents and checks each one's placeholders against its grids.
  PackedDataset packed({dir / "good.h5"}, 8, "sha", 10);
  ASSERT_TRUE(packed.whole_documents());
  EXPECT_EQ(packed.size(), 1);
  EXPECT_EQ(packed.batch({0}).images.size(), 2u);
  bad = c;
  bad.image_grids = {1, 2, 4, 1, 2, 4};  // document 1 has one placeholder, its grid makes two
  write_shard(dir / "count.h5", bad, meta);
  PackedDataset miscounted({dir / "count.h5"}, 8, "sha", 10);
  EXPECT_ERROR_CONTAINS(miscounted.batch({0}),
                        "count.h5: document 1 has 1 image placeholder tokens (id 7) but its "
                        "images' grids make 2");
  EXPECT_ERROR_CONTAINS(PackedDataset({dir / "good.h5"}, 3, "sha", 10),
                        "document 0 has 4 tokens, more than data.seq_len 3");
}

INSTANTIATE_TEST_SUITE_P(Families, VlmTraining, ::testing::Values("qwen2_5_vl", "qwen3_vl"));

}  // namespace
}  // namespace retain
