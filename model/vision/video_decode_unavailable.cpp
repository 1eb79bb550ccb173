// The stand-in for model/vision/video_decode.cpp in a build without FFmpeg's libraries.
#include "core/error.h"
#include "model/vision/video_decode.h"

namespace retain {

namespace {
[[noreturn]] void unavailable(const std::string& where) {
  throw Error(str_cat(where,
                      ": this build of retain cannot read videos (FFmpeg's libavformat-dev, "
                      "libavcodec-dev and libswscale-dev were not found when it was "
                      "configured; `make setup` installs them)"));
}
}  // namespace

struct VideoReader::Impl {};

VideoReader::VideoReader(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
VideoReader::VideoReader(VideoReader&&) noexcept = default;
VideoReader& VideoReader::operator=(VideoReader&&) noexcept = default;
VideoReader::~VideoReader() = default;

VideoReader VideoReader::open_file(const std::string& path) { unavailable(path); }
VideoReader VideoReader::open_bytes(std::vector<uint8_t>, const std::string& where) {
  unavailable(where);
}
const VideoInfo& VideoReader::info() const { unavailable("video"); }
void VideoReader::read_frames(const std::vector<int64_t>&,
                              const std::function<void(size_t, RgbImage&&)>&) {
  unavailable("video");
}

bool video_decoding_available() { return false; }

}  // namespace retain
