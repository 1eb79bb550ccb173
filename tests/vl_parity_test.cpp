// Vision-language models (Qwen2.5-VL, Qwen3-VL) against transformers on the tiny random models of
// tests/fixtures/make_hf_vl_models.py: decoded images == Pillow's, pixel values and grids == the HF
// image processor's, vision tower (and DeepStack) == HF, rope index, prefill logits, greedy tokens
// (one prefill, chunked prefill, and a left-padded batch of prompts with different images), and
// the errors a user meets.
#include <c10/core/InferenceMode.h>

#include <fstream>
#include <iostream>

#include "core/fs.h"
#include "core/json.h"
#include "core/safetensors.h"
#include "cuda_skip.h"
#include "model/chat_template.h"
#include "model/decoder.h"
#include "model/generate.h"
#include "model/tokenizers/tokenizer.h"
#include "model/vision/image_io.h"
#include "model/vision/image_processor.h"
#include "model/vision/multimodal_prompt.h"
#include "model/vision/vision_tower.h"
#include "test_util.h"

namespace retain {
namespace {

constexpr double kLogitTolerance = 1e-4;

// The fixture directory; on a machine where make_hf_vl_models.py was told to skip (the GPU bundle
// lacks torchvision and Pillow) the tests skip with its reason.
fs::path vl_dir() { return testing::fixture_dir("hf_vl"); }

#define RETAIN_SKIP_WITHOUT_VL_FIXTURES()                                                      \
  do {                                                                                         \
    if (fs::exists(vl_dir() / ".skipped") && !fs::exists(vl_dir() / ".complete"))              \
      GTEST_SKIP() << "VL fixtures not built here: " << read_text_file(vl_dir() / ".skipped"); \
  } while (false)

const std::vector<std::string>& decodable_images() {
  static const std::vector<std::string> names = {"wide.png",   "tall.jpg", "rgba.png", "gray.png",
                                                 "photo.webp", "big.png",  "small.png"};
  return names;
}

double max_diff(const at::Tensor& a, const at::Tensor& b) {
  EXPECT_EQ(a.sizes(), b.sizes());
  if (a.sizes() != b.sizes()) return 1e30;
  return (a.to(at::kDouble) - b.to(at::kDouble)).abs().max().item<double>();
}

TEST(VisionImages, DecodedPixelsEqualPillow) {
  RETAIN_SKIP_WITHOUT_VL_FIXTURES();
  auto ref = SafetensorsFile::open(vl_dir() / "images" / "decoded.safetensors");
  for (const auto& name : decodable_images()) {
    auto rgb = read_image_rgb(vl_dir() / "images" / name);
    // PNG is lossless and the alpha composite is Pillow's integer formula: exact. JPEG and WebP
    // go through the same libraries (libjpeg-turbo, libwebp), possibly other versions.
    EXPECT_EQ(max_diff(rgb, ref->tensor(name)), 0) << name;
  }
}

TEST(VisionImages, BadFilesAreClearErrors) {
  RETAIN_SKIP_WITHOUT_VL_FIXTURES();
  EXPECT_ERROR_CONTAINS(read_image_rgb(vl_dir() / "images" / "truncated.jpg"), "truncated.jpg");
  EXPECT_ERROR_CONTAINS(read_image_rgb(vl_dir() / "images" / "not_an_image.png"),
                        "not a JPEG, PNG or WebP image");
  EXPECT_ERROR_CONTAINS(read_image_rgb(vl_dir() / "images" / "missing.png"), "cannot open");
  testing::TempDir tmp;
  auto png = std::ifstream(vl_dir() / "images" / "wide.png", std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(png)), std::istreambuf_iterator<char>());
  std::ofstream(tmp / "cut.png", std::ios::binary) << bytes.substr(0, bytes.size() / 2);
  EXPECT_ERROR_CONTAINS(read_image_rgb(tmp / "cut.png"), "cut.png");
  // A header claiming 100000 x 100000 pixels is refused before anything is allocated, at Pillow's
  // decompression-bomb limit (PNG IHDR with its CRC-32 recomputed; bitwise, polynomial 0xEDB88320).
  std::string huge = bytes.substr(0, 33);
  for (int at : {16, 20})
    for (int k = 0; k < 4; ++k) huge[at + k] = static_cast<char>((100000u >> (24 - 8 * k)) & 0xff);
  uint32_t crc = 0xffffffffu;
  for (int i = 12; i < 29; ++i) {
    crc ^= static_cast<uint8_t>(huge[i]);
    for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
  }
  crc ^= 0xffffffffu;
  for (int k = 0; k < 4; ++k) huge[29 + k] = static_cast<char>((crc >> (24 - 8 * k)) & 0xff);
  huge += bytes.substr(33);  // the original chunks after IHDR
  EXPECT_ERROR_CONTAINS(
      decode_image_rgb(std::vector<uint8_t>(huge.begin(), huge.end()), "huge.png"),
      "huge.png: 100000x100000 pixels: more than 178956970");
}

TEST(VisionImages, SmartResizeRoundsAsPython) {
  // Halves round to even, as Python's round() does; too many pixels shrink, too few grow.
  EXPECT_EQ(smart_resize(42, 70, 28, 3136, 50176), (std::pair<int64_t, int64_t>{56, 56}));
  EXPECT_EQ(smart_resize(300, 400, 28, 3136, 50176), (std::pair<int64_t, int64_t>{168, 252}));
  EXPECT_ERROR_CONTAINS(smart_resize(1, 300, 28, 3136, 50176), "aspect ratio");
}

class VlParity : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    RETAIN_SKIP_WITHOUT_VL_FIXTURES();
    guard_ = std::make_unique<c10::InferenceMode>();
    dir_ = vl_dir() / GetParam();
    model_ = std::make_unique<Decoder>(Decoder::load(dir_, {}));
    ref_ = SafetensorsFile::open(dir_ / "reference.safetensors");
    info_ = read_json_file(dir_ / "reference.json");
    processor_ = ImageProcessorConfig::load(dir_);
  }
  at::Tensor ref(const std::string& name) const { return ref_->tensor(name).clone(); }
  ProcessedImage image(const std::string& name) const {
    return preprocess_image(read_image_rgb(vl_dir() / "images" / name), processor_);
  }
  int64_t image_token() const { return model_->config().multimodal->image_token_id; }
  // The reference ids with each run of image tokens collapsed to one placeholder: what the chat
  // template writes before the processor expands it.
  std::vector<int64_t> collapsed(const at::Tensor& ids) const {
    std::vector<int64_t> out;
    auto acc = ids.accessor<int64_t, 1>();
    for (int64_t i = 0; i < ids.size(0); ++i)
      if (acc[i] != image_token() || out.empty() || out.back() != image_token())
        out.push_back(acc[i]);
    return out;
  }
  MultimodalPrompt prompt(const std::string& name) const {
    std::vector<ProcessedImage> images;
    for (const auto& f : info_["prompts"][name]["images"]) images.push_back(image(f));
    return prepare_multimodal_prompt(*model_, collapsed(ref(name + ".input_ids")[0]), images);
  }
  std::vector<int64_t> greedy(const MultimodalPrompt& p, int64_t chunk) const {
    FullKvCache cache(model_->config().num_layers);
    SamplingOptions options;
    options.max_new_tokens = info_["new_tokens"].get<int64_t>();
    options.prefill_chunk = chunk;  // no stop ids: the references ignore EOS
    RowOptions row;
    row.multimodal = std::make_shared<MultimodalPrompt>(p);
    return generate_batch(*model_, {p.ids}, cache, options, {row})[0].tokens;
  }

  std::unique_ptr<c10::InferenceMode> guard_;
  fs::path dir_;
  std::unique_ptr<Decoder> model_;
  std::shared_ptr<SafetensorsFile> ref_;
  Json info_;
  ImageProcessorConfig processor_;
};

TEST_P(VlParity, PixelValuesAndGridsEqualTheProcessor) {
  for (const auto& name : decodable_images()) {
    auto p = image(name);
    auto grid = ref("grid_thw." + name);
    EXPECT_EQ(p.grid.t, grid[0][0].item<int64_t>()) << name;
    EXPECT_EQ(p.grid.h, grid[0][1].item<int64_t>()) << name;
    EXPECT_EQ(p.grid.w, grid[0][2].item<int64_t>()) << name;
    const double diff = max_diff(p.pixel_values, ref("pixel_values." + name));
    EXPECT_LE(diff, 1e-5) << name;
    if (diff > 0)
      std::cout << "[ measured ] pixel values " << name << ": max abs diff " << diff << "\n";
  }
}

TEST_P(VlParity, VisionTowerEqualsTransformers) {
  for (const auto& name : decodable_images()) {
    auto p = image(name);
    auto out = model_->vision()->forward(ref("pixel_values." + name), {p.grid});
    const double diff = max_diff(out.embeds, ref("vision." + name));
    EXPECT_LE(diff, 1e-4) << name;
    std::cout << "[ measured ] " << GetParam() << " vision tower " << name << ": max abs diff "
              << diff << "\n";
    const auto& levels = model_->config().multimodal->vision.deepstack_visual_indexes;
    ASSERT_EQ(out.deepstack.size(), levels.size());
    for (size_t k = 0; k < levels.size(); ++k)
      EXPECT_LE(max_diff(out.deepstack[k], ref(str_cat("deepstack.", name, ".", k))), 1e-4)
          << name << " level " << k;
  }
}

TEST_P(VlParity, PromptsEqualTransformers) {
  for (const std::string name : {"one", "two", "turns", "text"}) {
    SCOPED_TRACE(name);
    MultimodalPrompt p = prompt(name);
    auto ids = ref(name + ".input_ids")[0];
    ASSERT_EQ(p.ids,
              std::vector<int64_t>(ids.data_ptr<int64_t>(), ids.data_ptr<int64_t>() + ids.numel()));
    EXPECT_EQ(max_diff(p.rope_positions, ref(name + ".position_ids").select(1, 0)), 0);
    EXPECT_EQ(p.rope_delta, ref(name + ".rope_deltas").item<int64_t>());
    // One prefill through the decoder.
    const auto t = static_cast<int64_t>(p.ids.size());
    BatchMultimodal batch({std::make_shared<MultimodalPrompt>(p)}, {0}, t, at::kCPU);
    MultimodalInputs inputs = batch.columns(0, t);
    ForwardContext context;
    context.multimodal = &inputs;
    auto logits = model_->logits(
        model_->forward_hidden(ids.unsqueeze(0), at::arange(t, at::kLong).unsqueeze(0), context));
    const double diff = max_diff(logits, ref(name + ".logits"));
    EXPECT_LE(diff, kLogitTolerance);
    std::cout << "[ measured ] " << GetParam() << " prompt " << name << " (" << t
              << " tokens): logits max abs diff " << diff << "\n";
    // Greedy generation: one prefill, and a chunked prefill that cuts through the images.
    auto want = ref(name + ".greedy")[0];
    std::vector<int64_t> expected(want.data_ptr<int64_t>(),
                                  want.data_ptr<int64_t>() + want.numel());
    EXPECT_EQ(greedy(p, 0), expected);
    EXPECT_EQ(greedy(p, 7), expected);
  }
}

// The family's chat template with image items written as Qwen's vision block renders what the
// processor's apply_chat_template renders, and the tokenizer gives the processor's ids (before
// the expansion of the placeholders).
TEST_P(VlParity, ChatTemplateAndTokenizerEqualTheProcessor) {
  ChatTemplate tmpl = load_chat_template(dir_);
  auto tokenizer = load_tokenizer(dir_);
  for (const std::string name : {"one", "two", "turns", "text"}) {
    SCOPED_TRACE(name);
    std::vector<ChatMessage> messages;
    for (const auto& m : info_["prompts"][name]["messages"]) {
      std::string content;
      for (const auto& item : m["content"])
        content += item["type"] == "image" ? std::string(kQwenImageBlock)
                                           : item["text"].get<std::string>();
      messages.push_back({m["role"].get<std::string>(), content});
    }
    const std::string text = tmpl.render(messages, ChatOptions{});
    EXPECT_EQ(text, info_["prompts"][name]["text"].get<std::string>());
    EXPECT_EQ(tokenizer->encode(text), collapsed(ref(name + ".input_ids")[0]));
  }
}

TEST_P(VlParity, LeftPaddedBatchEqualsTransformers) {
  std::vector<std::vector<int64_t>> prompts;
  std::vector<RowOptions> rows;
  for (const auto& name : info_["batch"]["prompts"]) {
    auto p = std::make_shared<MultimodalPrompt>(prompt(name.get<std::string>()));
    prompts.push_back(p->ids);
    RowOptions row;
    row.multimodal = p;
    rows.push_back(row);
  }
  FullKvCache cache(model_->config().num_layers);
  SamplingOptions options;
  options.max_new_tokens = info_["new_tokens"].get<int64_t>();
  auto results = generate_batch(*model_, prompts, cache, options, rows);
  auto want = ref("batch.greedy");
  for (size_t r = 0; r < results.size(); ++r) {
    auto row = want[static_cast<int64_t>(r)];
    EXPECT_EQ(results[r].tokens,
              std::vector<int64_t>(row.data_ptr<int64_t>(), row.data_ptr<int64_t>() + row.numel()))
        << "row " << r;
    // And each row alone in retain.
    EXPECT_EQ(results[r].tokens, greedy(*rows[r].multimodal, 0)) << "row " << r << " alone";
  }
}

TEST_P(VlParity, MismatchedImagesAreClearErrors) {
  auto ids = collapsed(ref("two.input_ids")[0]);
  EXPECT_ERROR_CONTAINS(prepare_multimodal_prompt(*model_, ids, {image("wide.png")}),
                        "2 image placeholder(s)");
  auto text = collapsed(ref("text.input_ids")[0]);
  EXPECT_ERROR_CONTAINS(prepare_multimodal_prompt(*model_, text, {image("wide.png")}),
                        "0 image placeholder(s)");
  // An image larger than max_pixels is resized, not refused.
  EXPECT_LE(image("big.png").grid.patches() * 14 * 14, processor_.max_pixels);
  // A text-only model refuses images.
  auto text_model = Decoder::load(testing::fixture_dir("hf") / "qwen2_linear", {});
  EXPECT_ERROR_CONTAINS(prepare_multimodal_prompt(text_model, {1, 2, 3}, {image("wide.png")}),
                        "text-only model");
}

// The same model on a GPU (fp32): vision tower, prompt logits and greedy tokens of the two-image
// prompt against transformers. Not yet run on a GPU when written (see docs/cuda.md).
TEST_P(VlParity, VisionPromptOnGpu_CUDA) {
  RETAIN_SKIP_WITHOUT_CUDA();
  Decoder gpu = Decoder::load(dir_, {at::kFloat, at::kCUDA});
  for (const auto& name : decodable_images()) {
    auto out = gpu.vision()->forward(ref("pixel_values." + name), {image(name).grid});
    EXPECT_LE(max_diff(out.embeds.cpu(), ref("vision." + name)), 1e-4) << name;
  }
  std::vector<ProcessedImage> images;
  for (const auto& f : info_["prompts"]["two"]["images"]) images.push_back(image(f));
  auto p = std::make_shared<MultimodalPrompt>(
      prepare_multimodal_prompt(gpu, collapsed(ref("two.input_ids")[0]), images));
  const auto t = static_cast<int64_t>(p->ids.size());
  BatchMultimodal batch({p}, {0}, t, at::kCUDA);
  MultimodalInputs inputs = batch.columns(0, t);
  ForwardContext context;
  context.multimodal = &inputs;
  auto logits = gpu.logits(gpu.forward_hidden(
      ref("two.input_ids").cuda(), at::arange(t, at::kLong).unsqueeze(0).cuda(), context));
  EXPECT_LE(max_diff(logits.cpu(), ref("two.logits")), kLogitTolerance);
  FullKvCache cache(gpu.config().num_layers);
  SamplingOptions options;
  options.max_new_tokens = info_["new_tokens"].get<int64_t>();
  RowOptions row;
  row.multimodal = p;
  auto tokens = generate_batch(gpu, {p->ids}, cache, options, {row})[0].tokens;
  auto want = ref("two.greedy")[0];
  EXPECT_EQ(tokens, std::vector<int64_t>(want.data_ptr<int64_t>(),
                                         want.data_ptr<int64_t>() + want.numel()));
}

INSTANTIATE_TEST_SUITE_P(Families, VlParity, ::testing::Values("qwen2_5_vl", "qwen3_vl"));

}  // namespace
}  // namespace retain
