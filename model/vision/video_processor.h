// transformers 5's video processors of Qwen2.5-VL (Qwen2VLVideoProcessor) and Qwen3-VL
// (Qwen3VLVideoProcessor), reproduced exactly: which frames are sampled (by fps, within
// min/max frames), the resize under the video pixel budget (Qwen3-VL's counts the frames), the
// same bicubic + normalisation as images, the last frame repeated up to a multiple of
// temporal_patch_size, and the patches flattened (channel, temporal, y, x) in merge-block order.
// Frames stream from the decoder one at a time and are resized as they come.
#pragma once

#include <ATen/ATen.h>

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/fs.h"
#include "model/vision/image_processor.h"
#include "model/vision/mrope.h"
#include "model/vision/video_options.h"
#include "model/vision/vision_config.h"

namespace retain {

struct VideoProcessorConfig : PatchProcessorConfig {
  VisionFamily family = VisionFamily::kQwen2_5;
  // min_pixels / max_pixels are size.shortest_edge / longest_edge: per frame (Qwen2.5-VL), per
  // clip (Qwen3-VL).
  bool do_sample_frames = false;  // Qwen2VLVideoProcessor's default; Qwen3-VL's is true
  std::optional<double> fps;      // frames sampled per second (Qwen3-VL: 2)
  std::optional<int64_t> num_frames;
  int64_t min_frames = 4, max_frames = 768;
  bool cap_pixels_per_frame = false;  // qwen-vl-utils' budget; transformers 5.23 defaults to off
  int64_t max_video_tokens = 128000;  // Qwen3-VL: 768

  // A model directory's settings in transformers' order: processor_config.json's
  // "video_processor", else video_preprocessor_config.json, else preprocessor_config.json, over
  // the family class's defaults. Every key that changes the result is honoured or refused.
  static VideoProcessorConfig load(const fs::path& model_dir, VisionFamily family);
};

// The processor's settings with the options applied: --fps turns sampling on.
VideoProcessorConfig apply_video_options(VideoProcessorConfig config, const VideoOptions& options);

struct ProcessedVideo {
  at::Tensor pixel_values;             // (grid.patches(), C x temporal x patch x patch) fp32
  ImageGrid grid;                      // t = sampled frames / temporal_patch_size, rounded up
  std::vector<int64_t> frame_indices;  // the frames sampled, before the last one is repeated
  int64_t total_frames = 0;
  double fps = 0;  // the clip's own rate (metadata), or --frames-fps for images
  // The container's fps and frame count as OpenCV reports them (VideoInfo; 0 for images).
  double container_fps = 0;
  int64_t container_frames = 0;
  int64_t resized_height = 0, resized_width = 0;
  int64_t temporal_patch_size = 2;
  std::string where;  // the file, for messages

  // Qwen2.5-VL: temporal_patch_size / sampled fps, where sampled fps = sampled frames / total
  // frames x fps (transformers' VideoMetadata.sampled_fps).
  double seconds_per_grid() const;
  // Qwen3-VL: each temporal group's time in seconds (the mean of its first and last frame's
  // index / fps), written as "<%.1f seconds>" before the group's tokens.
  std::vector<double> group_timestamps() const;
};

// Which frames of `total` (at `fps`) the processor keeps. Qwen2.5-VL: the count rounded down to
// temporal_patch_size, then torch.arange(0, total, total / n).int() (fp32 values); Qwen3-VL:
// np.linspace(0, total - 1, n).round(). Without sampling, every frame. Errors say why a clip
// cannot be sampled (too few frames for the family's rule).
std::vector<int64_t> sample_video_frames(const VideoProcessorConfig& config, int64_t total,
                                         double fps, const std::string& where);

// The frames' size after the processor's resize (multiples of patch x merge). `frames`: the
// sampled count (Qwen3-VL's budget covers all of them; it needs at least temporal_patch_size).
std::pair<int64_t, int64_t> video_resize(const VideoProcessorConfig& config, int64_t frames,
                                         int64_t height, int64_t width, const std::string& where);

// A video file (any container FFmpeg reads) or a directory of frame images (sorted by name,
// every one used, as transformers takes a list of images; their rate is --frames-fps).
ProcessedVideo preprocess_video(const std::string& path, const VideoProcessorConfig& config,
                                const VideoOptions& options = {});

// Reads and preprocesses videos with the model directory's video processor settings.
std::vector<ProcessedVideo> load_videos(const fs::path& model_dir, VisionFamily family,
                                        const std::vector<std::string>& paths,
                                        const VideoOptions& options);

}  // namespace retain
