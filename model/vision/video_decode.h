// Video files decoded to 8-bit RGB frames with FFmpeg (libavformat demuxes, libavcodec decodes,
// libswscale converts), free of LibTorch like image_decode.h (the fuzzer builds it alone). Any
// container and codec Debian's FFmpeg reads (mp4/H.264, webm/VP9, mkv, ...).
//
// Frames are decoded one at a time and handed to the caller, which keeps only what it needs
// (the frames a processor samples, resized): a clip is never held whole at full resolution.
//
// The metadata follows torchcodec's exact mode (transformers' default video backend): the frame
// count is the number of the stream's packets, counted by reading them all (a container's
// header count is often missing or wrong), the duration is the span of their presentation
// times (first pts to the end of the last packet), and fps = frames / duration. Frame i is the
// i-th frame the decoder outputs, i.e. in presentation order.
//
// A rotation in the stream's display matrix (phones record portrait clips as landscape frames
// with one) is applied as the ffmpeg command line applies it by default: 90, 180 or 270 degrees,
// so the frames are what a player shows. (transformers' PyAV reader ignores it.)
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "model/vision/image_decode.h"

namespace retain {

struct VideoInfo {
  int64_t frames = 0;
  double fps = 0;                 // frames / duration; 0 when the clip has no timestamps
  double duration = 0;            // seconds
  int64_t width = 0, height = 0;  // as displayed (after the rotation)
  int rotation = 0;               // degrees turned clockwise to display: 0, 90, 180 or 270
  std::string codec;              // FFmpeg's decoder name, e.g. "h264", "vp9", "ffv1"
  // The container's own figures, as OpenCV's FFmpeg backend reports them (CAP_PROP_FPS: the
  // stream's average frame rate; CAP_PROP_FRAME_COUNT: the header's frame count, else
  // round(duration x fps)): what lmms-eval's Video-MME aligns subtitles with.
  double container_fps = 0;
  int64_t container_frames = 0;
};

// A clip has at most this many frames (about 5 hours at 60 fps): a count above it is a corrupt
// or hostile file, refused before frame indices are allocated.
constexpr int64_t kMaxVideoFrames = 1 << 20;

class VideoReader {
 public:
  // Errors name `path` (or `where`) and say what was found: no such file, not a video FFmpeg
  // reads, no video stream, a codec this FFmpeg cannot decode, no frames, a frame too large.
  static VideoReader open_file(const std::string& path);
  // The bytes of a file (a data URL's payload, a fuzzer's input), read through FFmpeg's I/O
  // callbacks without a temporary file.
  static VideoReader open_bytes(std::vector<uint8_t> bytes, const std::string& where);

  VideoReader(VideoReader&&) noexcept;
  VideoReader& operator=(VideoReader&&) noexcept;
  ~VideoReader();

  const VideoInfo& info() const;

  // Decodes the clip from its start and calls on_frame(k, frame) for every k with the frame at
  // indices[k]; `indices` ascending (repeats allowed), each in [0, info().frames). A clip whose
  // decoder stops before the last index (a truncated or corrupt file) is an error naming the
  // frame that could not be decoded.
  void read_frames(const std::vector<int64_t>& indices,
                   const std::function<void(size_t, RgbImage&&)>& on_frame);

 private:
  struct Impl;
  explicit VideoReader(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Whether this build reads videos (FFmpeg's libraries were found when it was configured).
bool video_decoding_available();

}  // namespace retain
