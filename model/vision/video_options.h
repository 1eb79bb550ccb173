// What a user asks of the video processor for one run (--fps, --max-frames, --video-max-pixels,
// --frames-fps): flags of generate, tokenize, eval and serve, free of LibTorch so that the
// commands' option structs can hold it.
#pragma once

#include <cstdint>
#include <optional>

namespace retain {

struct VideoOptions {
  std::optional<double> fps;          // sample this many frames per second (turns sampling on)
  std::optional<int64_t> max_frames;  // at most this many sampled frames
  std::optional<int64_t> max_pixels;  // the processor's size.longest_edge
  std::optional<double> frames_fps;   // the rate of frames given as images (default 24)
};

}  // namespace retain
