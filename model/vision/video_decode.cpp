#include "model/vision/video_decode.h"

extern "C" {
#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/display.h>
#include <libavutil/imgutils.h>
#include <libswscale/swscale.h>
}

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <mutex>

#include "core/error.h"

namespace retain {

namespace {

// FFmpeg reports what went wrong through its log, not its return codes: the last error line of
// this thread is kept and quoted in retain's message (and FFmpeg's own stderr lines are silenced).
thread_local std::string last_ffmpeg_error;

void keep_ffmpeg_error(void* avcl, int level, const char* format, va_list args) {
  if (level > AV_LOG_ERROR) return;
  char line[512];
  int prefix = 1;
  av_log_format_line2(avcl, level, format, args, line, sizeof line, &prefix);
  std::string text(line);
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  if (!text.empty()) last_ffmpeg_error = text;
}

void install_ffmpeg_log() {
  static std::once_flag once;
  std::call_once(once, [] { av_log_set_callback(keep_ffmpeg_error); });
}

std::string av_error(int code) {
  char text[AV_ERROR_MAX_STRING_SIZE] = {0};
  av_strerror(code, text, sizeof text);
  std::string out(text);
  if (!last_ffmpeg_error.empty()) out += "; FFmpeg said: " + last_ffmpeg_error;
  return out;
}

// A file's bytes read by FFmpeg through callbacks (no temporary file).
struct MemoryInput {
  const std::vector<uint8_t>* bytes = nullptr;
  int64_t at = 0;

  static int read(void* opaque, uint8_t* buf, int size) {
    auto* in = static_cast<MemoryInput*>(opaque);
    const int64_t left = static_cast<int64_t>(in->bytes->size()) - in->at;
    if (left <= 0) return AVERROR_EOF;
    const int n = static_cast<int>(std::min<int64_t>(left, size));
    std::memcpy(buf, in->bytes->data() + in->at, static_cast<size_t>(n));
    in->at += n;
    return n;
  }
  static int64_t seek(void* opaque, int64_t offset, int whence) {
    auto* in = static_cast<MemoryInput*>(opaque);
    const auto size = static_cast<int64_t>(in->bytes->size());
    if ((whence & AVSEEK_SIZE) != 0) return size;
    int64_t to = offset;
    switch (whence & ~AVSEEK_FORCE) {
      case SEEK_SET:
        break;
      case SEEK_CUR:
        to = in->at + offset;
        break;
      case SEEK_END:
        to = size + offset;
        break;
      default:
        return AVERROR(EINVAL);
    }
    if (to < 0 || to > size) return AVERROR(EINVAL);
    in->at = to;
    return to;
  }
};

// One pass over the clip: the container opened, its best video stream found and its decoder
// opened. The scan for the metadata and the decoding pass each open one.
class Demuxer {
 public:
  Demuxer(const std::string& path, const std::vector<uint8_t>* bytes, const std::string& where)
      : where_(where) {
    try {
      open(path, bytes, where);
    } catch (...) {
      close();  // a constructor that throws runs no destructor
      throw;
    }
  }
  Demuxer(const Demuxer&) = delete;
  Demuxer& operator=(const Demuxer&) = delete;
  ~Demuxer() { close(); }

  AVStream* stream() const { return fmt_->streams[stream_]; }
  AVCodecContext* decoder() const { return ctx_; }
  const AVFormatContext* format() const { return fmt_; }

  // The next packet of the video stream, or false at the end of the file. A read error other
  // than the end is the file's fault and is reported.
  bool next_packet() {
    for (;;) {
      av_packet_unref(packet_);
      const int rc = av_read_frame(fmt_, packet_);
      if (rc == AVERROR_EOF) return false;
      RETAIN_CHECK(rc >= 0, where_, ": cannot read the video (", av_error(rc), ")");
      if (packet_->stream_index == stream_) return true;
    }
  }
  const AVPacket* packet() const { return packet_; }

 private:
  void open(const std::string& path, const std::vector<uint8_t>* bytes, const std::string& where) {
    install_ffmpeg_log();
    last_ffmpeg_error.clear();
    fmt_ = avformat_alloc_context();
    RETAIN_CHECK(fmt_ != nullptr, where, ": out of memory opening the video");
    if (bytes != nullptr) {
      input_.bytes = bytes;
      constexpr int kBuffer = 1 << 16;
      auto* buffer = static_cast<uint8_t*>(av_malloc(kBuffer));
      avio_ = avio_alloc_context(buffer, kBuffer, 0, &input_, &MemoryInput::read, nullptr,
                                 &MemoryInput::seek);
      if (avio_ == nullptr) av_free(buffer);
      RETAIN_CHECK(avio_ != nullptr, where, ": out of memory opening the video");
      fmt_->pb = avio_;
      fmt_->flags |= AVFMT_FLAG_CUSTOM_IO;
    }
    int rc =
        avformat_open_input(&fmt_, bytes != nullptr ? nullptr : path.c_str(), nullptr, nullptr);
    if (rc < 0) {
      fmt_ = nullptr;  // freed by avformat_open_input
      if (rc == AVERROR(ENOENT))
        throw Error(str_cat(where, ": cannot open the video file: ", av_error(rc)));
      throw Error(str_cat(where, ": not a video FFmpeg can read (", av_error(rc), ")"));
    }
    rc = avformat_find_stream_info(fmt_, nullptr);
    RETAIN_CHECK(rc >= 0, where, ": cannot read the streams of the video (", av_error(rc), ")");
    const AVCodec* codec = nullptr;
    stream_ = av_find_best_stream(fmt_, AVMEDIA_TYPE_VIDEO, -1, -1, &codec, 0);
    if (stream_ == AVERROR_STREAM_NOT_FOUND) {
      std::string kinds;
      for (unsigned i = 0; i < fmt_->nb_streams; ++i) {
        const char* kind = av_get_media_type_string(fmt_->streams[i]->codecpar->codec_type);
        kinds += str_cat(i ? ", " : "", kind ? kind : "unknown");
      }
      throw Error(str_cat(where, ": no video stream (", fmt_->nb_streams, " stream(s)",
                          kinds.empty() ? "" : ": " + kinds, ")"));
    }
    if (stream_ == AVERROR_DECODER_NOT_FOUND) {
      const AVCodecParameters* par = nullptr;
      for (unsigned i = 0; i < fmt_->nb_streams && par == nullptr; ++i)
        if (fmt_->streams[i]->codecpar->codec_type == AVMEDIA_TYPE_VIDEO)
          par = fmt_->streams[i]->codecpar;
      const char* name = par ? avcodec_get_name(par->codec_id) : "unknown";
      throw Error(
          str_cat(where, ": its video codec (", name, ") is not one this build of FFmpeg decodes"));
    }
    RETAIN_CHECK(stream_ >= 0, where, ": cannot choose a video stream (", av_error(stream_), ")");
    const AVCodecParameters* par = fmt_->streams[stream_]->codecpar;
    // An image or a damaged file can open as a "stream" of no size.
    RETAIN_CHECK(par->width > 0 && par->height > 0, where,
                 ": not a video FFmpeg can read (its stream has no frame size: ", par->width, "x",
                 par->height, ")");
    RETAIN_CHECK(static_cast<int64_t>(par->width) <= kMaxImagePixels / par->height, where,
                 ": frames of ", par->width, "x", par->height, " pixels: more than ",
                 kMaxImagePixels, " per frame");
    ctx_ = avcodec_alloc_context3(codec);
    RETAIN_CHECK(ctx_ != nullptr, where, ": out of memory opening the decoder");
    rc = avcodec_parameters_to_context(ctx_, par);
    RETAIN_CHECK(rc >= 0, where, ": cannot set up the ", codec->name, " decoder (", av_error(rc),
                 ")");
    ctx_->thread_count = 0;  // FFmpeg chooses; decoding is bit-exact whatever the threads
    rc = avcodec_open2(ctx_, codec, nullptr);
    RETAIN_CHECK(rc >= 0, where, ": cannot open the ", codec->name, " decoder (", av_error(rc),
                 ")");
    packet_ = av_packet_alloc();
    RETAIN_CHECK(packet_ != nullptr, where, ": out of memory");
  }
  void close() {
    av_packet_free(&packet_);
    avcodec_free_context(&ctx_);
    avformat_close_input(&fmt_);
    if (avio_ != nullptr) {
      av_freep(&avio_->buffer);
      avio_context_free(&avio_);
    }
  }

  std::string where_;
  MemoryInput input_;
  AVIOContext* avio_ = nullptr;
  AVFormatContext* fmt_ = nullptr;
  AVCodecContext* ctx_ = nullptr;
  AVPacket* packet_ = nullptr;
  int stream_ = -1;
};

// Degrees clockwise to turn a stored frame for display, as the ffmpeg command line derives them
// (fftools' get_rotation): minus the display matrix's counter-clockwise angle, in [0, 360).
int display_rotation(const AVStream* stream) {
  const uint8_t* matrix = nullptr;
#if LIBAVCODEC_VERSION_MAJOR >= 61
  const AVPacketSideData* side =
      av_packet_side_data_get(stream->codecpar->coded_side_data,
                              stream->codecpar->nb_coded_side_data, AV_PKT_DATA_DISPLAYMATRIX);
  if (side != nullptr && side->size >= 9 * sizeof(int32_t)) matrix = side->data;
#else
  size_t size = 0;
  matrix = av_stream_get_side_data(stream, AV_PKT_DATA_DISPLAYMATRIX, &size);
  if (size < 9 * sizeof(int32_t)) matrix = nullptr;
#endif
  if (matrix == nullptr) return 0;
  const double angle = av_display_rotation_get(reinterpret_cast<const int32_t*>(matrix));
  if (std::isnan(angle)) return 0;
  double theta = -std::round(angle);
  theta -= 360 * std::floor(theta / 360 + 0.9 / 360);
  const int degrees = static_cast<int>(theta);
  // As ffmpeg, only quarter turns are applied; another angle leaves the frames as stored.
  return degrees == 90 || degrees == 180 || degrees == 270 ? degrees : 0;
}

RgbImage rotate_clockwise(RgbImage in, int degrees) {
  if (degrees == 0) return in;
  const int64_t h = in.height, w = in.width;
  RgbImage out;
  out.height = degrees == 180 ? h : w;
  out.width = degrees == 180 ? w : h;
  out.pixels.resize(in.pixels.size());
  for (int64_t r = 0; r < out.height; ++r)
    for (int64_t c = 0; c < out.width; ++c) {
      int64_t sr = 0, sc = 0;
      if (degrees == 90) {
        sr = h - 1 - c;
        sc = r;
      } else if (degrees == 180) {
        sr = h - 1 - r;
        sc = w - 1 - c;
      } else {
        sr = c;
        sc = w - 1 - r;
      }
      std::memcpy(&out.pixels[static_cast<size_t>((r * out.width + c) * 3)],
                  &in.pixels[static_cast<size_t>((sr * w + sc) * 3)], 3);
    }
  return out;
}

}  // namespace

struct VideoReader::Impl {
  std::string where;
  std::string path;            // empty when reading `bytes`
  std::vector<uint8_t> bytes;  // the file itself, for open_bytes
  VideoInfo info;
  int64_t stored_width = 0, stored_height = 0;

  std::unique_ptr<Demuxer> open() const {
    return std::make_unique<Demuxer>(path, path.empty() ? &bytes : nullptr, where);
  }

  // The metadata: every packet of the stream read (not decoded) once.
  void scan() {
    auto demuxer = open();
    const AVStream* stream = demuxer->stream();
    stored_width = stream->codecpar->width;
    stored_height = stream->codecpar->height;
    info.codec = demuxer->decoder()->codec->name;
    info.rotation = display_rotation(stream);
    const bool turned = info.rotation == 90 || info.rotation == 270;
    info.width = turned ? stored_height : stored_width;
    info.height = turned ? stored_width : stored_height;
    // OpenCV's get_fps, get_total_frames and get_duration_sec (cap_ffmpeg_impl.hpp).
    const AVRational rate =
        stream->avg_frame_rate.num > 0 ? stream->avg_frame_rate : stream->r_frame_rate;
    info.container_fps = rate.num > 0 && rate.den > 0 ? av_q2d(rate) : 0;
    info.container_frames = stream->nb_frames;
    if (info.container_frames <= 0) {
      double seconds = static_cast<double>(demuxer->format()->duration) / AV_TIME_BASE;
      if (seconds < 1e-6 && stream->duration != AV_NOPTS_VALUE)
        seconds = static_cast<double>(stream->duration) * av_q2d(stream->time_base);
      // A damaged header can claim any duration: a count outside [0, 2^53) is no count.
      const double frames = std::floor(seconds * info.container_fps + 0.5);
      info.container_frames = std::isfinite(frames) && frames >= 0 && frames < 9007199254740992.0
                                  ? static_cast<int64_t>(frames)
                                  : 0;
    }
    int64_t begin = std::numeric_limits<int64_t>::max(), end = std::numeric_limits<int64_t>::min();
    while (demuxer->next_packet()) {
      const AVPacket* p = demuxer->packet();
      RETAIN_CHECK(++info.frames <= kMaxVideoFrames, where, ": more than ", kMaxVideoFrames,
                   " frames");
      const int64_t ts = p->pts != AV_NOPTS_VALUE ? p->pts : p->dts;
      if (ts == AV_NOPTS_VALUE) continue;
      begin = std::min(begin, ts);
      // A damaged file's timestamps can sit at int64's ends: the sum saturates, never overflows.
      int64_t last = ts;
      if (__builtin_add_overflow(ts, std::max<int64_t>(p->duration, 0), &last))
        last = std::numeric_limits<int64_t>::max();
      end = std::max(end, last);
    }
    RETAIN_CHECK(info.frames > 0, where, ": the video stream holds no frames (a zero-length clip)");
    if (end > begin)
      info.duration =
          (static_cast<double>(end) - static_cast<double>(begin)) * av_q2d(stream->time_base);
    if (info.duration > 0) {
      info.fps = static_cast<double>(info.frames) / info.duration;
    } else if (stream->avg_frame_rate.num > 0 && stream->avg_frame_rate.den > 0) {
      // One packet without a duration: the container's declared rate.
      info.fps = av_q2d(stream->avg_frame_rate);
      info.duration = static_cast<double>(info.frames) / info.fps;
    }
  }
};

VideoReader::VideoReader(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
VideoReader::VideoReader(VideoReader&&) noexcept = default;
VideoReader& VideoReader::operator=(VideoReader&&) noexcept = default;
VideoReader::~VideoReader() = default;

VideoReader VideoReader::open_file(const std::string& path) {
  auto impl = std::make_unique<Impl>();
  impl->where = path;
  impl->path = path;
  impl->scan();
  return VideoReader(std::move(impl));
}

VideoReader VideoReader::open_bytes(std::vector<uint8_t> bytes, const std::string& where) {
  RETAIN_CHECK(!bytes.empty(), where, ": an empty video file");
  auto impl = std::make_unique<Impl>();
  impl->where = where;
  impl->bytes = std::move(bytes);
  impl->scan();
  return VideoReader(std::move(impl));
}

const VideoInfo& VideoReader::info() const { return impl_->info; }

void VideoReader::read_frames(const std::vector<int64_t>& indices,
                              const std::function<void(size_t, RgbImage&&)>& on_frame) {
  const Impl& d = *impl_;
  for (size_t k = 0; k < indices.size(); ++k)
    RETAIN_CHECK(
        indices[k] >= 0 && indices[k] < d.info.frames && (k == 0 || indices[k] >= indices[k - 1]),
        d.where, ": frame indices must ascend within [0, ", d.info.frames, "); index ", k, " is ",
        indices[k]);
  if (indices.empty()) return;
  auto demuxer = d.open();
  AVCodecContext* decoder = demuxer->decoder();
  AVFrame* frame = av_frame_alloc();
  RETAIN_CHECK(frame != nullptr, d.where, ": out of memory");
  SwsContext* sws = nullptr;
  uint8_t* rgb[4] = {nullptr};
  int rgb_stride[4] = {0};
  auto release = [&] {
    av_frame_free(&frame);
    sws_freeContext(sws);
    if (rgb[0] != nullptr) av_freep(&rgb[0]);
  };
  const int64_t w = d.stored_width, h = d.stored_height;
  size_t next = 0;
  int64_t index = 0;  // of the decoder's next output frame
  // Converts the decoded frame to RGB24 (libswscale, bilinear as PyAV's default, the frame's
  // own colour matrix and range) and hands it over for every index that asks for it.
  auto deliver = [&] {
    RETAIN_CHECK(frame->width == w && frame->height == h, d.where, ": frame ", index, " is ",
                 frame->width, "x", frame->height, " but the stream is ", w, "x", h,
                 " (a size change inside a clip is not supported)");
    if (next >= indices.size() || indices[next] != index) return;
    const auto format = static_cast<AVPixelFormat>(frame->format);
    sws = sws_getCachedContext(sws, static_cast<int>(w), static_cast<int>(h), format,
                               static_cast<int>(w), static_cast<int>(h), AV_PIX_FMT_RGB24,
                               SWS_BILINEAR, nullptr, nullptr, nullptr);
    RETAIN_CHECK(sws != nullptr, d.where, ": cannot convert frames of pixel format ",
                 av_get_pix_fmt_name(format) ? av_get_pix_fmt_name(format) : "unknown", " to RGB");
    const int colorspace =
        frame->colorspace == AVCOL_SPC_UNSPECIFIED || frame->colorspace == AVCOL_SPC_RGB
            ? SWS_CS_DEFAULT
            : static_cast<int>(frame->colorspace);
    const int full_range = frame->color_range == AVCOL_RANGE_JPEG ? 1 : 0;
    int* inv_table = nullptr;
    int* table = nullptr;
    int src_range = 0, dst_range = 0, brightness = 0, contrast = 0, saturation = 0;
    // Only YUV sources have a matrix to set (swscale refuses the call for RGB ones).
    if (sws_getColorspaceDetails(sws, &inv_table, &src_range, &table, &dst_range, &brightness,
                                 &contrast, &saturation) >= 0)
      sws_setColorspaceDetails(sws, sws_getCoefficients(colorspace), full_range, table, 1,
                               brightness, contrast, saturation);
    if (rgb[0] == nullptr) {
      const int rc = av_image_alloc(rgb, rgb_stride, static_cast<int>(w), static_cast<int>(h),
                                    AV_PIX_FMT_RGB24, 32);
      RETAIN_CHECK(rc >= 0, d.where, ": out of memory for a ", w, "x", h, " frame");
    }
    sws_scale(sws, frame->data, frame->linesize, 0, static_cast<int>(h), rgb, rgb_stride);
    RgbImage image{h, w, std::vector<uint8_t>(static_cast<size_t>(h * w * 3))};
    for (int64_t r = 0; r < h; ++r)
      std::memcpy(&image.pixels[static_cast<size_t>(r * w * 3)], rgb[0] + r * rgb_stride[0],
                  static_cast<size_t>(w * 3));
    image = rotate_clockwise(std::move(image), d.info.rotation);
    // Repeated indices get copies; the last one takes the frame itself.
    while (next + 1 < indices.size() && indices[next + 1] == index) {
      RgbImage copy = image;
      on_frame(next++, std::move(copy));
    }
    on_frame(next++, std::move(image));
  };
  auto drain = [&] {
    for (;;) {
      const int rc = avcodec_receive_frame(decoder, frame);
      if (rc == AVERROR(EAGAIN) || rc == AVERROR_EOF) return;
      RETAIN_CHECK(rc >= 0, d.where, ": cannot decode frame ", index, " (", av_error(rc), ")");
      deliver();
      av_frame_unref(frame);
      ++index;
      if (next == indices.size()) return;
    }
  };
  try {
    while (next < indices.size() && demuxer->next_packet()) {
      int rc = avcodec_send_packet(decoder, demuxer->packet());
      if (rc == AVERROR(EAGAIN)) {  // the decoder is full: take its frames, then send again
        drain();
        if (next == indices.size()) break;
        rc = avcodec_send_packet(decoder, demuxer->packet());
      }
      RETAIN_CHECK(rc >= 0, d.where, ": cannot decode frame ", index, " (", av_error(rc), ")");
      drain();
    }
    if (next < indices.size()) {
      avcodec_send_packet(decoder, nullptr);  // flush the frames the decoder still holds
      drain();
    }
    RETAIN_CHECK(next == indices.size(), d.where, ": the decoder gave ", index, " frame(s) of the ",
                 d.info.frames, " counted, so frame ", indices[next],
                 " could not be read (a truncated or corrupt file?)",
                 last_ffmpeg_error.empty() ? "" : "; FFmpeg said: " + last_ffmpeg_error);
  } catch (...) {
    release();
    throw;
  }
  release();
}

bool video_decoding_available() { return true; }

}  // namespace retain
