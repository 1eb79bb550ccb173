// Videos against transformers on the clips and tiny models of
// tests/fixtures/make_hf_video_fixture.py: decoded frames == torchcodec's (transformers' video
// reader, over the same FFmpeg) and, for lossless clips, the frames encoded; metadata (frames,
// fps, rotation); the sampled frame indices, pixel values and grids == the video processors';
// prompt ids (Qwen3-VL's timestamps included), rotary positions, logits and greedy tokens, with an
// image and a video mixed in one prompt; and the errors a user meets.
#include <c10/core/InferenceMode.h>

#include <fstream>
#include <iostream>

#include "core/fs.h"
#include "core/json.h"
#include "core/safetensors.h"
#include "model/decoder.h"
#include "model/generate.h"
#include "model/tokenizers/tokenizer.h"
#include "model/vision/image_io.h"
#include "model/vision/multimodal_prompt.h"
#include "model/vision/video_decode.h"
#include "model/vision/video_processor.h"
#include "test_util.h"

namespace retain {
namespace {

constexpr double kLogitTolerance = 1e-4;

fs::path video_dir() { return testing::fixture_dir("hf_video"); }
fs::path clip(const std::string& name) { return video_dir() / "clips" / name; }

#define RETAIN_SKIP_WITHOUT_VIDEO()                                                     \
  do {                                                                                  \
    if (fs::exists(video_dir() / ".skipped") && !fs::exists(video_dir() / ".complete")) \
      GTEST_SKIP() << "video fixtures not built here: "                                 \
                   << read_text_file(video_dir() / ".skipped");                         \
    if (!video_decoding_available()) GTEST_SKIP() << "this build has no FFmpeg";        \
  } while (false)

VideoOptions at_fps(double fps) {
  VideoOptions o;
  o.fps = fps;
  return o;
}

double max_diff(const at::Tensor& a, const at::Tensor& b) {
  EXPECT_EQ(a.sizes(), b.sizes());
  if (a.sizes() != b.sizes()) return 1e30;
  return (a.to(at::kDouble) - b.to(at::kDouble)).abs().max().item<double>();
}

std::vector<int64_t> as_ids(const at::Tensor& t) {
  auto c = t.to(at::kLong).contiguous();
  return std::vector<int64_t>(c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel());
}

// Every frame of a clip, (N, H, W, 3) uint8.
at::Tensor decode_all(const std::string& name) {
  VideoReader reader = VideoReader::open_file(clip(name).string());
  const VideoInfo& info = reader.info();
  std::vector<int64_t> all(static_cast<size_t>(info.frames));
  for (int64_t i = 0; i < info.frames; ++i) all[static_cast<size_t>(i)] = i;
  auto out = at::empty({info.frames, info.height, info.width, 3}, at::kByte);
  reader.read_frames(all, [&](size_t k, RgbImage&& f) {
    EXPECT_EQ(f.height, info.height);
    EXPECT_EQ(f.width, info.width);
    std::memcpy(out[static_cast<int64_t>(k)].data_ptr(), f.pixels.data(), f.pixels.size());
  });
  return out;
}

TEST(VideoDecode, FramesEqualTorchcodecAndMetadataItsExactMode) {
  RETAIN_SKIP_WITHOUT_VIDEO();
  auto ref = SafetensorsFile::open(clip("decoded.safetensors"));
  const Json clips = read_json_file(clip("clips.json"))["clips"];
  for (const auto& [name, want] : clips.items()) {
    SCOPED_TRACE(name);
    VideoReader reader = VideoReader::open_file(clip(name).string());
    const VideoInfo& info = reader.info();
    EXPECT_EQ(info.frames, want["num_frames"].get<int64_t>());
    EXPECT_NEAR(info.fps, want["average_fps"].get<double>(), 1e-9);
    EXPECT_NEAR(info.duration, want["duration_seconds"].get<double>(), 1e-9);
    EXPECT_EQ(info.width, want["width"].get<int64_t>());
    EXPECT_EQ(info.height, want["height"].get<int64_t>());
    EXPECT_EQ(info.codec, want["codec"].get<std::string>());
    // Lossless clips (FFV1, RGB H.264) are bit-exact; lossy ones go through the same libavcodec
    // and libswscale as torchcodec's (Debian's FFmpeg 5.1), so they are too.
    auto frames = decode_all(name);
    const double diff = max_diff(frames, ref->tensor(name + ".torchcodec"));
    EXPECT_EQ(diff, 0);
    if (want.contains("max_diff_torchcodec_pyav"))
      std::cout << "[ measured ] " << name << ": max |retain - torchcodec| " << diff
                << ", torchcodec vs PyAV (FFmpeg 8) " << want["max_diff_torchcodec_pyav"] << "\n";
  }
  // The rotated clip: turned as the ffmpeg command line and torchcodec turn it.
  EXPECT_EQ(max_diff(decode_all("rot90.mp4"), ref->tensor("rot90.mp4.ffmpeg")), 0);
  VideoReader rotated = VideoReader::open_file(clip("rot90.mp4").string());
  EXPECT_EQ(rotated.info().rotation, 270);  // clockwise degrees: a quarter turn counter-clockwise
}

TEST(VideoDecode, SelectedFramesStreamInOrderWithRepeats) {
  RETAIN_SKIP_WITHOUT_VIDEO();
  auto ref = SafetensorsFile::open(clip("decoded.safetensors"));
  auto all = ref->tensor("h264.mp4.torchcodec");
  VideoReader reader = VideoReader::open_file(clip("h264.mp4").string());
  const std::vector<int64_t> want = {1, 4, 4, 9};
  std::vector<size_t> seen;
  reader.read_frames(want, [&](size_t k, RgbImage&& f) {
    seen.push_back(k);
    auto t = at::from_blob(f.pixels.data(), {f.height, f.width, 3}, at::kByte);
    EXPECT_EQ(max_diff(t, all[want[k]]), 0) << "frame " << want[k];
  });
  EXPECT_EQ(seen, (std::vector<size_t>{0, 1, 2, 3}));
  EXPECT_ERROR_CONTAINS(reader.read_frames({3, 2}, [](size_t, RgbImage&&) {}), "must ascend");
  EXPECT_ERROR_CONTAINS(reader.read_frames({10}, [](size_t, RgbImage&&) {}), "[0, 10)");
  // The same clip from memory (a data URL's bytes).
  std::ifstream in(clip("h264.mp4"), std::ios::binary);
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)),
                             std::istreambuf_iterator<char>());
  VideoReader memory = VideoReader::open_bytes(bytes, "upload");
  EXPECT_EQ(memory.info().frames, 10);
  memory.read_frames({9}, [&](size_t, RgbImage&& f) {
    auto t = at::from_blob(f.pixels.data(), {f.height, f.width, 3}, at::kByte);
    EXPECT_EQ(max_diff(t, all[9]), 0);
  });
}

TEST(VideoDecode, BadFilesAreClearErrors) {
  RETAIN_SKIP_WITHOUT_VIDEO();
  EXPECT_ERROR_CONTAINS(VideoReader::open_file(clip("missing.mp4").string()),
                        "missing.mp4: cannot open the video file");
  EXPECT_ERROR_CONTAINS(VideoReader::open_file(clip("truncated.mp4").string()),
                        "truncated.mp4: not a video FFmpeg can read");
  EXPECT_ERROR_CONTAINS(VideoReader::open_file(clip("empty.mp4").string()), "empty.mp4");
  EXPECT_ERROR_CONTAINS(VideoReader::open_file(clip("not_a_video.mp4").string()),
                        "not_a_video.mp4: not a video FFmpeg can read");
  EXPECT_ERROR_CONTAINS(VideoReader::open_file(clip("audio_only.m4a").string()),
                        "audio_only.m4a: no video stream (1 stream(s): audio)");
  EXPECT_ERROR_CONTAINS(VideoReader::open_bytes({}, "upload"), "upload: an empty video file");
  // A cut Matroska file reads up to where it ends, as torchcodec reads it.
  VideoReader cut = VideoReader::open_file(clip("truncated.mkv").string());
  const std::string said = read_json_file(clip("clips.json"))["unreadable"]["truncated.mkv"];
  EXPECT_EQ(said, str_cat("torchcodec read ", cut.info().frames, " frame(s)"));
}

// The processor on a clip, with transformers' kwargs of one case.
struct Case {
  std::string name;
  Json info;
};

class VideoParity : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    RETAIN_SKIP_WITHOUT_VIDEO();
    guard_ = std::make_unique<c10::InferenceMode>();
    model_dir_ = testing::fixture_dir("hf_vl") / GetParam();
    model_ = std::make_unique<Decoder>(Decoder::load(model_dir_, {}));
    tokenizer_ = load_tokenizer(model_dir_);
    ref_ = SafetensorsFile::open(video_dir() / GetParam() / "reference.safetensors");
    info_ = read_json_file(video_dir() / GetParam() / "reference.json");
    family_ = model_->config().multimodal->vision.family;
  }
  at::Tensor ref(const std::string& name) const { return ref_->tensor(name).clone(); }
  VideoOptions options(const Json& c) const {
    VideoOptions o;
    if (c["kwargs"]["do_sample_frames"].get<bool>()) o.fps = c["kwargs"]["fps"].get<double>();
    return o;
  }
  ProcessedVideo video(const std::string& name) const {
    const Json& c = info_[name];
    VideoProcessorConfig config = VideoProcessorConfig::load(model_dir_, family_);
    // Qwen3-VL's processor samples by default; the frames case turns it off as transformers is
    // told to (do_sample_frames=False), which retain does for a directory of frames anyway.
    if (!c["kwargs"]["do_sample_frames"].get<bool>()) config.do_sample_frames = false;
    config = apply_video_options(config, options(c));
    return preprocess_video(clip(c["video"]).string(), config, options(c));
  }
  MultimodalPrompt prompt(const std::string& name) const {
    std::vector<ProcessedImage> images;
    for (const auto& f : info_[name]["images"])
      images.push_back(preprocess_image(
          read_image_rgb(testing::fixture_dir("hf_vl") / "images" / f.get<std::string>()),
          ImageProcessorConfig::load(model_dir_)));
    return prepare_multimodal_prompt(*model_, as_ids(ref(name + ".collapsed_ids")), images,
                                     {video(name)}, tokenizer_.get());
  }

  std::unique_ptr<c10::InferenceMode> guard_;
  fs::path model_dir_;
  std::unique_ptr<Decoder> model_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::shared_ptr<SafetensorsFile> ref_;
  Json info_;
  VisionFamily family_ = VisionFamily::kQwen2_5;
};

TEST_P(VideoParity, SampledFramesPixelValuesAndGridsEqualTheProcessor) {
  for (const auto& [name, c] : info_.items()) {
    SCOPED_TRACE(name);
    ProcessedVideo v = video(name);
    // transformers pads Qwen3-VL's indices in place when it writes the timestamps.
    std::vector<int64_t> want = c["frames_indices"].get<std::vector<int64_t>>();
    want.resize(std::min(want.size(), static_cast<size_t>(c["total_num_frames"].get<int64_t>())));
    std::vector<int64_t> got = v.frame_indices;
    got.resize(std::min(got.size(), want.size()));
    EXPECT_EQ(got, want);
    auto grid = ref(name + ".video_grid_thw")[0];
    EXPECT_EQ((std::vector<int64_t>{v.grid.t, v.grid.h, v.grid.w}), as_ids(grid));
    EXPECT_EQ(max_diff(v.pixel_values, ref(name + ".pixel_values_videos")), 0);
    if (ref_->contains(name + ".second_per_grid_ts")) {
      EXPECT_EQ(static_cast<float>(v.seconds_per_grid()),
                ref(name + ".second_per_grid_ts").item<float>());
    }
  }
}

TEST_P(VideoParity, PromptsPositionsLogitsAndGreedyEqualTransformers) {
  for (const auto& [name, c] : info_.items()) {
    SCOPED_TRACE(name);
    MultimodalPrompt p = prompt(name);
    ASSERT_EQ(p.ids, as_ids(ref(name + ".input_ids")));
    EXPECT_EQ(max_diff(p.rope_positions, ref(name + ".position_ids")), 0);
    EXPECT_EQ(p.rope_delta, ref(name + ".rope_deltas").item<int64_t>());
    const auto t = static_cast<int64_t>(p.ids.size());
    BatchMultimodal batch({std::make_shared<MultimodalPrompt>(p)}, {0}, t, at::kCPU);
    MultimodalInputs inputs = batch.columns(0, t);
    ForwardContext context;
    context.multimodal = &inputs;
    auto ids = ref(name + ".input_ids").unsqueeze(0);
    auto logits = model_->logits(
        model_->forward_hidden(ids, at::arange(t, at::kLong).unsqueeze(0), context))[0];
    const double diff = max_diff(logits, ref(name + ".logits"));
    EXPECT_LE(diff, kLogitTolerance);
    std::cout << "[ measured ] " << GetParam() << " video case " << name << " (" << t << " tokens, "
              << p.video_tokens << " video tokens): logits max abs diff " << diff << "\n";
    // Greedy: one prefill, and a chunked one that cuts through the video's tokens, compared up
    // to the first near tie (a top-2 margin below 2e-3 lets 1e-6 of rounding pick the other).
    size_t reliable = 0;
    for (double margin : c["greedy_margins"].get<std::vector<double>>()) {
      if (margin < 2e-3) break;
      ++reliable;
    }
    auto want = as_ids(ref(name + ".greedy"));
    want.resize(std::min(want.size(), reliable + 1));  // the tied step's own token may differ
    if (reliable < want.size()) want.pop_back();
    for (int64_t chunk : {0, 9}) {
      FullKvCache cache(model_->config().num_layers);
      SamplingOptions sampling;
      sampling.max_new_tokens = 12;
      sampling.prefill_chunk = chunk;
      RowOptions row;
      row.multimodal = std::make_shared<MultimodalPrompt>(p);
      auto got = generate_batch(*model_, {p.ids}, cache, sampling, {row})[0].tokens;
      got.resize(std::min(got.size(), want.size()));
      EXPECT_EQ(got, want) << "chunk " << chunk << " (" << want.size() << " reliable steps)";
    }
  }
}

// The tower run one temporal group per pass (what bounds its memory on a long clip) gives the
// embeddings of one pass over the whole prompt (image and video mixed).
TEST_P(VideoParity, TowerPassesOfOneGroupEqualOnePass) {
  const std::string name = "mixed";
  std::vector<ProcessedImage> images = {
      preprocess_image(read_image_rgb(testing::fixture_dir("hf_vl") / "images" / "wide.png"),
                       ImageProcessorConfig::load(model_dir_))};
  const auto ids = as_ids(ref(name + ".collapsed_ids"));
  ProcessedVideo v = video(name);
  ASSERT_GE(v.grid.t, 2);
  MultimodalPrompt whole = prepare_multimodal_prompt(*model_, ids, images, {v}, tokenizer_.get());
  MultimodalPrompt split = prepare_multimodal_prompt(*model_, ids, images, {v}, tokenizer_.get(),
                                                     /*tower_patches_per_pass=*/1);
  EXPECT_EQ(split.ids, whole.ids);
  EXPECT_LE(max_diff(split.visual_embeds, whole.visual_embeds), 1e-5);
  ASSERT_EQ(split.deepstack.size(), whole.deepstack.size());
  for (size_t k = 0; k < whole.deepstack.size(); ++k)
    EXPECT_LE(max_diff(split.deepstack[k], whole.deepstack[k]), 1e-5);
}

TEST_P(VideoParity, BadVideosAndMismatchesAreClearErrors) {
  VideoProcessorConfig config =
      apply_video_options(VideoProcessorConfig::load(model_dir_, family_), at_fps(2.0));
  // A one-frame clip cannot be sampled by either family's rule (transformers fails on it too).
  EXPECT_ERROR_CONTAINS(preprocess_video(clip("one_frame.mkv").string(), config), "one_frame.mkv");
  VideoOptions few;
  few.max_frames = 3;
  VideoProcessorConfig all_frames = VideoProcessorConfig::load(model_dir_, family_);
  all_frames.do_sample_frames = false;
  EXPECT_ERROR_CONTAINS(
      preprocess_video(clip("lossless.mkv").string(), apply_video_options(all_frames, few)),
      "9 frames, more than --max-frames 3");
  EXPECT_ERROR_CONTAINS(preprocess_video(clip("frames").string(), config, at_fps(2.0)),
                        "--fps samples a video file only");
  auto ids = as_ids(ref("sampled.collapsed_ids"));
  EXPECT_ERROR_CONTAINS(prepare_multimodal_prompt(*model_, ids, {}, {}, tokenizer_.get()),
                        "1 video placeholder(s)");
  auto text_model = Decoder::load(testing::fixture_dir("hf") / "qwen2_linear", {});
  EXPECT_ERROR_CONTAINS(
      prepare_multimodal_prompt(text_model, {1, 2, 3}, {}, {video("sampled")}, tokenizer_.get()),
      "text-only model");
}

INSTANTIATE_TEST_SUITE_P(Families, VideoParity, ::testing::Values("qwen2_5_vl", "qwen3_vl"));

TEST(VideoPrompt, TextGetsOneBlockPerImageAndVideo) {
  EXPECT_EQ(text_with_image_blocks("Hi", 1, 1),
            std::string(kQwenImageBlock) + kQwenVideoBlock + "Hi");
  EXPECT_EQ(text_with_image_blocks("A <video> then <image>.", 1, 1),
            std::string("A ") + kQwenVideoBlock + " then " + kQwenImageBlock + ".");
  EXPECT_ERROR_CONTAINS(text_with_image_blocks("<video><video>", 0, 1), "2 <video> marker(s)");
}

// transformers 5's rule for the text after a Qwen2.5-VL video: start + max(rows, cols), even
// when the video's temporal positions reach further (its 4.x code and vLLM use max + 1).
TEST(VideoPrompt, TextAfterAVideoFollowsTransformers5) {
  const int64_t img = 5, vid = 6;
  // text, a 3 x 2 x 2 video (3 tokens per frame... 1 merged token each), text.
  std::vector<int64_t> ids = {1, vid, vid, vid, 2};
  VisionSpan span{vid, ImageGrid{3, 2, 2}, 25.0f};
  RopeIndex r = multimodal_rope_index(ids, img, vid, {span}, 2);
  auto a = r.positions.accessor<int64_t, 2>();
  EXPECT_EQ(a[0][1], 1);
  EXPECT_EQ(a[0][2], 26);
  EXPECT_EQ(a[0][3], 51);
  EXPECT_EQ(a[0][4], 2);  // start (1) + max(1, 1)
  EXPECT_EQ(r.delta, 51 + 1 - 5);
  // fp32 products truncated: 0.6f * 3 = 1.8000001 -> 1.
  VisionSpan odd{vid, ImageGrid{3, 2, 2}, 0.6f};
  RopeIndex q = multimodal_rope_index(ids, img, vid, {odd}, 2);
  EXPECT_EQ(q.positions[0][3].item<int64_t>(), 1 + 1);
}

}  // namespace
}  // namespace retain
