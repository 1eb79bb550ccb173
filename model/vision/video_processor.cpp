#include "model/vision/video_processor.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/json.h"
#include "model/vision/image_io.h"
#include "model/vision/image_processor.h"
#include "model/vision/video_decode.h"

namespace retain {

namespace {

VideoProcessorConfig family_defaults(VisionFamily family) {
  VideoProcessorConfig c;
  c.family = family;
  c.min_pixels = 128 * 28 * 28;  // Qwen2VLVideoProcessor's size
  c.max_pixels = 28 * 28 * 768;
  if (family == VisionFamily::kQwen3) {
    c.min_pixels = 128 * 32 * 32;
    c.max_pixels = 32 * 32 * 768;
    c.patch_size = 16;
    c.mean = {0.5, 0.5, 0.5};
    c.std = {0.5, 0.5, 0.5};
    c.do_sample_frames = true;
    c.fps = 2;
    c.max_video_tokens = 768;
  }
  return c;
}

// The settings object transformers reads (see VideoProcessorConfig::load) and its file name.
std::pair<Json, std::string> video_processor_json(const fs::path& dir) {
  const fs::path nested = dir / "processor_config.json";
  if (fs::exists(nested)) {
    Json j = read_json_file(nested);
    if (j.is_object() && j.contains("video_processor"))
      return {j["video_processor"], nested.string() + ": video_processor"};
  }
  for (const char* name : {"video_preprocessor_config.json", "preprocessor_config.json"})
    if (fs::exists(dir / name)) return {read_json_file(dir / name), (dir / name).string()};
  throw Error(str_cat(dir.string(),
                      ": no video_preprocessor_config.json or preprocessor_config.json (a "
                      "vision-language model directory has one)"));
}

// Python's round() of a ratio: halves to even, as nearbyint in the default rounding mode.
int64_t round_half_even(double x) { return static_cast<int64_t>(std::nearbyint(x)); }

// Qwen3VLVideoProcessor's smart_resize: the budget covers t_bar frames, and a side below one
// merged patch is first scaled up (int() truncation, as there).
std::pair<int64_t, int64_t> qwen3_smart_resize(int64_t frames, int64_t height, int64_t width,
                                               int64_t temporal, int64_t factor, int64_t min_pixels,
                                               int64_t max_pixels, const std::string& where) {
  RETAIN_CHECK(frames >= temporal, where, ": ", frames,
               " frame(s) sampled, but Qwen3-VL's video processor needs at least ", temporal,
               " (temporal_patch_size); give a one-frame clip as an image");
  auto h = static_cast<double>(height), w = static_cast<double>(width);
  const auto f = static_cast<double>(factor);
  if (height < factor || width < factor) {
    const double scale = std::max(f / h, f / w);
    h = std::trunc(h * scale);
    w = std::trunc(w * scale);
  }
  RETAIN_CHECK(std::max(h, w) / std::min(h, w) <= 200, where, ": frames of ", width, "x", height,
               ": absolute aspect ratio must be at most 200");
  int64_t h_bar = round_half_even(h / f) * factor;
  int64_t w_bar = round_half_even(w / f) * factor;
  const int64_t t_bar =
      round_half_even(static_cast<double>(frames) / static_cast<double>(temporal)) * temporal;
  const auto t = static_cast<double>(frames);
  if (t_bar * h_bar * w_bar > max_pixels) {
    const double beta = std::sqrt(t * h * w / static_cast<double>(max_pixels));
    h_bar = std::max(factor, static_cast<int64_t>(std::floor(h / beta / f)) * factor);
    w_bar = std::max(factor, static_cast<int64_t>(std::floor(w / beta / f)) * factor);
  } else if (t_bar * h_bar * w_bar < min_pixels) {
    const double beta = std::sqrt(static_cast<double>(min_pixels) / (t * h * w));
    h_bar = static_cast<int64_t>(std::ceil(h * beta / f)) * factor;
    w_bar = static_cast<int64_t>(std::ceil(w * beta / f)) * factor;
  }
  return {h_bar, w_bar};
}

// One decoded frame, (H, W, 3) uint8, resized as the processor resizes it: (3, H', W') uint8.
at::Tensor resize_frame(const at::Tensor& rgb, int64_t height, int64_t width) {
  at::Tensor frame = rgb.permute({2, 0, 1}).contiguous().unsqueeze(0);
  if (frame.size(2) != height || frame.size(3) != width)
    frame = at::_upsample_bicubic2d_aa(frame, {height, width}, /*align_corners=*/false);
  return frame.squeeze(0);
}

std::vector<fs::path> frame_files(const fs::path& dir) {
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(dir))
    if (entry.is_regular_file() && entry.path().filename().string().front() != '.')
      files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  RETAIN_CHECK(!files.empty(), dir.string(), ": a directory of video frames holds no files");
  return files;
}

}  // namespace

VideoProcessorConfig VideoProcessorConfig::load(const fs::path& model_dir, VisionFamily family) {
  auto [j, where] = video_processor_json(model_dir);
  return with_json_errors(where, [&, &j = j, &where = where] {
    VideoProcessorConfig c = family_defaults(family);
    // Qwen2VLVideoProcessor maps min_pixels / max_pixels onto size (an image processor's file
    // read as the video processor's, transformers' last fallback, carries them).
    c.read(j, where, /*legacy_pixel_keys=*/family == VisionFamily::kQwen2_5);
    c.do_sample_frames =
        json_get_optional<bool>(j, "do_sample_frames", where).value_or(c.do_sample_frames);
    if (j.contains("fps"))
      c.fps = j["fps"].is_null() ? std::nullopt : std::optional<double>(j["fps"].get<double>());
    if (j.contains("num_frames"))
      c.num_frames = j["num_frames"].is_null()
                         ? std::nullopt
                         : std::optional<int64_t>(j["num_frames"].get<int64_t>());
    c.min_frames = json_get_optional<int64_t>(j, "min_frames", where).value_or(c.min_frames);
    c.max_frames = json_get_optional<int64_t>(j, "max_frames", where).value_or(c.max_frames);
    if (j.contains("cap_pixels_per_frame") && !j["cap_pixels_per_frame"].is_null())
      c.cap_pixels_per_frame = j["cap_pixels_per_frame"].get<bool>();
    c.max_video_tokens =
        json_get_optional<int64_t>(j, "max_video_tokens", where).value_or(c.max_video_tokens);
    RETAIN_CHECK(c.min_frames >= 1 && c.max_frames >= c.min_frames, where,
                 ": expected 1 <= min_frames <= max_frames, found ", c.min_frames, " and ",
                 c.max_frames);
    RETAIN_CHECK(!c.fps || *c.fps > 0, where, ": fps must be > 0, found ", *c.fps);
    return c;
  });
}

VideoProcessorConfig apply_video_options(VideoProcessorConfig c, const VideoOptions& o) {
  if (o.fps) {
    RETAIN_CHECK(*o.fps > 0, "--fps must be > 0, found ", *o.fps);
    c.do_sample_frames = true;
    c.fps = *o.fps;
    c.num_frames.reset();
  }
  if (o.max_frames) {
    RETAIN_CHECK(*o.max_frames >= 1, "--max-frames must be >= 1, found ", *o.max_frames);
    c.max_frames = *o.max_frames;
    c.min_frames = std::min(c.min_frames, c.max_frames);
  }
  if (o.max_pixels) {
    RETAIN_CHECK(*o.max_pixels >= c.min_pixels,
                 "--video-max-pixels must be at least the "
                 "processor's size.shortest_edge (",
                 c.min_pixels, "), found ", *o.max_pixels);
    c.max_pixels = *o.max_pixels;
  }
  return c;
}

std::vector<int64_t> sample_video_frames(const VideoProcessorConfig& c, int64_t total, double fps,
                                         const std::string& where) {
  RETAIN_CHECK(total >= 1, where, ": no frames");
  std::vector<int64_t> indices;
  if (!c.do_sample_frames) {
    RETAIN_CHECK(total <= c.max_frames, where, ": ", total, " frames, more than --max-frames ",
                 c.max_frames,
                 " allows; sample them with --fps (this model's video processor "
                 "does not sample by default)");
    for (int64_t i = 0; i < total; ++i) indices.push_back(i);
    return indices;
  }
  const auto t = static_cast<double>(total);
  if (c.family == VisionFamily::kQwen3) {
    // Qwen3VLVideoProcessor.sample_frames: int(total / fps * target), clamped, then
    // np.linspace(0, total - 1, n).round() (numpy: i * step, the last point exactly the end).
    int64_t n = 0;
    if (c.num_frames) {
      n = *c.num_frames;
    } else {
      const double rate = fps > 0 ? fps : 24.0;  // transformers' default without metadata
      n = static_cast<int64_t>(t / rate * c.fps.value_or(2.0));
      n = std::min({std::max(n, c.min_frames), c.max_frames, total});
    }
    RETAIN_CHECK(n >= 1 && n <= total, where, ": cannot sample ", n, " of its ", total, " frames");
    const double step = n > 1 ? (t - 1) / static_cast<double>(n - 1) : 0.0;
    for (int64_t i = 0; i < n; ++i)
      indices.push_back(i == n - 1 && n > 1
                            ? total - 1
                            : static_cast<int64_t>(std::nearbyint(static_cast<double>(i) * step)));
    return indices;
  }
  // Qwen2VLVideoProcessor.sample_frames.
  const int64_t tps = c.temporal_patch_size;
  double n = 0;
  if (c.num_frames) {
    n = static_cast<double>(
        round_half_even(static_cast<double>(*c.num_frames) / static_cast<double>(tps)) * tps);
  } else {
    RETAIN_CHECK(fps > 0, where, ": sampling at --fps needs the clip's frame rate, which it lacks");
    const auto max_frames = static_cast<double>(
        static_cast<int64_t>(std::floor(static_cast<double>(std::min(c.max_frames, total)) /
                                        static_cast<double>(tps))) *
        tps);
    n = t / fps * c.fps.value_or(2.0);
    n = std::min({std::max(n, static_cast<double>(c.min_frames)), max_frames, t});
    n = std::floor(n / static_cast<double>(tps)) * static_cast<double>(tps);
  }
  RETAIN_CHECK(n >= 1 && n <= t, where, ": ", total, " frame(s) cannot be sampled in groups of ",
               tps, " (temporal_patch_size): Qwen2.5-VL's sampler would take ", n,
               "; give a one-frame clip as an image, or leave out --fps");
  // torch.arange(0, total, total / n): ceil(total / step) values start + i * step, computed in
  // double and stored as fp32, then .int() truncates.
  const double step = t / n;
  const auto count = static_cast<int64_t>(std::ceil(t / step));
  for (int64_t i = 0; i < count; ++i)
    indices.push_back(static_cast<int64_t>(static_cast<float>(static_cast<double>(i) * step)));
  return indices;
}

std::pair<int64_t, int64_t> video_resize(const VideoProcessorConfig& c, int64_t frames,
                                         int64_t height, int64_t width, const std::string& where) {
  const int64_t factor = c.patch_size * c.merge_size;
  int64_t max_pixels = c.max_pixels;
  if (c.family == VisionFamily::kQwen3) {
    if (c.cap_pixels_per_frame) {
      const int64_t frame_cap = c.max_video_tokens * factor * factor;
      const int64_t per_frame =
          std::max(std::min(frame_cap, c.max_pixels / frames),
                   static_cast<int64_t>(static_cast<double>(c.min_pixels) * 1.05));
      max_pixels = per_frame * frames;
    }
    return qwen3_smart_resize(frames, height, width, c.temporal_patch_size, factor, c.min_pixels,
                              max_pixels, where);
  }
  if (c.cap_pixels_per_frame) {
    const auto total =
        static_cast<int64_t>(static_cast<double>(c.max_video_tokens * factor * factor) * 0.9);
    max_pixels = std::max(std::min(max_pixels, total * c.temporal_patch_size / frames),
                          static_cast<int64_t>(static_cast<double>(c.min_pixels) * 1.05));
  }
  return smart_resize(height, width, factor, c.min_pixels, max_pixels);
}

double ProcessedVideo::seconds_per_grid() const {
  const double rate = fps > 0 ? fps : 24.0;
  const double sampled =
      static_cast<double>(frame_indices.size()) / static_cast<double>(total_frames) * rate;
  return static_cast<double>(temporal_patch_size) / sampled;
}

std::vector<double> ProcessedVideo::group_timestamps() const {
  // Qwen3VLProcessor._calculate_timestamps: the indices padded with the last one to a multiple
  // of temporal_patch_size, then each group's first and last time averaged.
  const double rate = fps > 0 ? fps : 24.0;
  const auto group = static_cast<size_t>(temporal_patch_size);
  std::vector<int64_t> idx = frame_indices;
  while (idx.size() % group != 0) idx.push_back(idx.back());
  std::vector<double> out;
  for (size_t i = 0; i < idx.size(); i += group)
    out.push_back(
        (static_cast<double>(idx[i]) / rate + static_cast<double>(idx[i + group - 1]) / rate) / 2);
  return out;
}

ProcessedVideo preprocess_video(const std::string& path, const VideoProcessorConfig& c,
                                const VideoOptions& options) {
  ProcessedVideo out;
  out.where = path;
  out.temporal_patch_size = c.temporal_patch_size;
  std::vector<at::Tensor> frames;  // resized, (3, H', W') uint8 each
  if (fs::is_directory(path)) {
    RETAIN_CHECK(!options.fps, path,
                 ": frames given as images are used as they are; --fps "
                 "samples a video file only (as transformers refuses to sample a list of images)");
    const auto files = frame_files(path);
    RETAIN_CHECK(static_cast<int64_t>(files.size()) <= c.max_frames, path, ": ", files.size(),
                 " frames, more than --max-frames ", c.max_frames, " allows");
    out.total_frames = static_cast<int64_t>(files.size());
    out.fps = options.frames_fps.value_or(24.0);
    for (int64_t i = 0; i < out.total_frames; ++i) out.frame_indices.push_back(i);
    int64_t h = 0, w = 0;
    for (size_t i = 0; i < files.size(); ++i) {
      at::Tensor rgb = read_image_rgb(files[i]);
      if (i == 0) {
        h = rgb.size(0);
        w = rgb.size(1);
        std::tie(out.resized_height, out.resized_width) =
            video_resize(c, out.total_frames, h, w, path);
      }
      RETAIN_CHECK(rgb.size(0) == h && rgb.size(1) == w, files[i].string(), ": a ", rgb.size(1),
                   "x", rgb.size(0), " frame among frames of ", w, "x", h,
                   " (the frames of a video share one size)");
      frames.push_back(resize_frame(rgb, out.resized_height, out.resized_width));
    }
  } else {
    RETAIN_CHECK(!options.frames_fps, path,
                 ": --frames-fps is the rate of frames given as "
                 "images (a directory); a video file has its own");
    VideoReader reader = VideoReader::open_file(path);
    const VideoInfo& info = reader.info();
    out.total_frames = info.frames;
    out.fps = info.fps;
    out.container_fps = info.container_fps;
    out.container_frames = info.container_frames;
    out.frame_indices = sample_video_frames(c, info.frames, info.fps, path);
    std::tie(out.resized_height, out.resized_width) = video_resize(
        c, static_cast<int64_t>(out.frame_indices.size()), info.height, info.width, path);
    frames.resize(out.frame_indices.size());
    reader.read_frames(out.frame_indices, [&](size_t k, RgbImage&& image) {
      auto* held = new RgbImage(std::move(image));
      at::Tensor rgb = at::from_blob(
          held->pixels.data(), {held->height, held->width, 3}, [held](void*) { delete held; },
          at::TensorOptions().dtype(at::kByte));
      frames[k] = resize_frame(rgb, out.resized_height, out.resized_width);
    });
  }
  // Rescale and normalise as images (mean and std divided by the rescale factor, in fp32), the
  // last frame repeated up to a multiple of temporal_patch_size, then the patches.
  const int64_t tps = c.temporal_patch_size, p = c.patch_size, m = c.merge_size;
  while (frames.size() % static_cast<size_t>(tps) != 0) frames.push_back(frames.back());
  auto mean = at::tensor(std::vector<double>(c.mean.begin(), c.mean.end()), at::kFloat) *
              (1.0 / c.rescale_factor);
  auto std = at::tensor(std::vector<double>(c.std.begin(), c.std.end()), at::kFloat) *
             (1.0 / c.rescale_factor);
  auto x = at::stack(frames, 0).to(at::kFloat);  // (T, 3, H', W')
  frames.clear();
  x.sub_(mean.view({1, -1, 1, 1})).div_(std.view({1, -1, 1, 1}));
  const int64_t rh = out.resized_height, rw = out.resized_width;
  const int64_t gt = x.size(0) / tps, gh = rh / p, gw = rw / p;
  auto patches = x.view({gt, tps, 3, gh / m, m, p, gw / m, m, p})
                     .permute({0, 3, 6, 4, 7, 2, 1, 5, 8})
                     .reshape({gt * gh * gw, 3 * tps * p * p});
  out.pixel_values = patches.contiguous();
  out.grid = ImageGrid{gt, gh, gw};
  return out;
}

std::vector<ProcessedVideo> load_videos(const fs::path& model_dir, VisionFamily family,
                                        const std::vector<std::string>& paths,
                                        const VideoOptions& options) {
  std::vector<ProcessedVideo> videos;
  if (paths.empty()) return videos;
  const VideoProcessorConfig config =
      apply_video_options(VideoProcessorConfig::load(model_dir, family), options);
  for (const auto& path : paths) videos.push_back(preprocess_video(path, config, options));
  return videos;
}

}  // namespace retain
