// libFuzzer target: video bytes as retain reads an upload (model/vision/video_decode.h, through
// FFmpeg's I/O callbacks). Every input either opens with a positive frame count and size and
// decodes its first frames to buffers of exactly height x width x 3 bytes, or throws
// retain::Error. FFmpeg itself is Debian's, not instrumented: coverage guides through retain's
// code, AddressSanitizer still checks every access FFmpeg makes to retain's buffers.
#include <algorithm>

#include "core/error.h"
#include "fuzz_util.h"
#include "model/vision/video_decode.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace retain;
  try {
    VideoReader reader = VideoReader::open_bytes(std::vector<uint8_t>(data, data + size), "fuzz");
    const VideoInfo& info = reader.info();
    fuzz::require(info.frames >= 1 && info.frames <= kMaxVideoFrames && info.width > 0 &&
                  info.height > 0 && info.fps >= 0 && info.duration >= 0);
    std::vector<int64_t> first;
    for (int64_t i = 0; i < std::min<int64_t>(info.frames, 4); ++i) first.push_back(i);
    reader.read_frames(first, [&](size_t, RgbImage&& frame) {
      fuzz::require(frame.height == info.height && frame.width == info.width &&
                    frame.pixels.size() == static_cast<size_t>(frame.height * frame.width * 3));
    });
  } catch (const Error&) {
  }
  return 0;
}
