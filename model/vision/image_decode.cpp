#include "model/vision/image_decode.h"

// clang-format off
#include <cstdio>
#include <jpeglib.h>
// clang-format on
#include <png.h>
#include <webp/decode.h>

#include <algorithm>
#include <csetjmp>
#include <cstring>

#include "core/error.h"

namespace retain {

namespace {

// Pillow's alpha_composite of an RGBA pixel over opaque white (PRECISION_BITS = 7,
// SHIFTFORDIV255), so a transparent image reaches the processor with the bytes transformers gets.
uint8_t over_white(uint32_t value, uint32_t alpha) {
  constexpr uint32_t kBits = 7;
  const uint32_t blend = 255 * (255 - alpha);
  const uint32_t out_a255 = alpha * 255 + blend;
  const uint32_t coef1 = alpha * 255 * 255 * (1u << kBits) / out_a255;
  const uint32_t coef2 = 255 * (1u << kBits) - coef1;
  const uint32_t tmp = value * coef1 + 255 * coef2 + (0x80u << kBits);
  return static_cast<uint8_t>((((tmp >> 8) + tmp) >> 8) >> kBits);
}

RgbImage rgba_to_rgb(const uint8_t* rgba, int64_t h, int64_t w) {
  RgbImage out{h, w, std::vector<uint8_t>(static_cast<size_t>(h * w * 3))};
  uint8_t* dst = out.pixels.data();
  for (int64_t i = 0; i < h * w; ++i) {
    const uint8_t a = rgba[4 * i + 3];
    for (int c = 0; c < 3; ++c) dst[3 * i + c] = over_white(rgba[4 * i + c], a);
  }
  return out;
}

struct JpegError {
  jpeg_error_mgr manager;
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

std::string too_many_pixels(int64_t h, int64_t w) {
  return h > 0 && w > 0 && h <= kMaxImagePixels / w
             ? std::string()
             : str_cat(w, "x", h, " pixels: more than ", kMaxImagePixels,
                       " (Pillow's decompression-bomb limit) or empty");
}

RgbImage decode_jpeg(const std::vector<uint8_t>& bytes, const std::string& where) {
  jpeg_decompress_struct info;
  JpegError error;
  info.err = jpeg_std_error(&error.manager);
  error.manager.error_exit = [](j_common_ptr cinfo) {
    auto* e = reinterpret_cast<JpegError*>(cinfo->err);
    (*cinfo->err->format_message)(cinfo, e->message);
    std::longjmp(e->jump, 1);
  };
  error.manager.output_message = [](j_common_ptr) {};  // warnings are counted, not printed
  RgbImage out;  // before setjmp: a longjmp out of libjpeg must not skip its destructor
  if (setjmp(error.jump)) {
    jpeg_destroy_decompress(&info);
    fail(where, ": not a readable JPEG image (libjpeg: ", error.message, ")");
  }
  jpeg_create_decompress(&info);
  jpeg_mem_src(&info, bytes.data(), static_cast<unsigned long>(bytes.size()));
  jpeg_read_header(&info, TRUE);
  // libjpeg turns greyscale and YCbCr into RGB; CMYK/YCCK images are refused rather than guessed.
  const bool cmyk = info.jpeg_color_space == JCS_CMYK || info.jpeg_color_space == JCS_YCCK;
  if (cmyk) {
    jpeg_destroy_decompress(&info);
    fail(where, ": CMYK JPEG images are not supported (convert it to RGB first)");
  }
  info.out_color_space = JCS_RGB;
  if (const std::string bad = too_many_pixels(info.image_height, info.image_width); !bad.empty()) {
    jpeg_destroy_decompress(&info);
    fail(where, ": ", bad);
  }
  jpeg_start_decompress(&info);
  const int64_t h = info.output_height, w = info.output_width;
  out = RgbImage{h, w, std::vector<uint8_t>(static_cast<size_t>(h * w * 3))};
  uint8_t* base = out.pixels.data();
  while (info.output_scanline < info.output_height) {
    JSAMPROW row = base + static_cast<int64_t>(info.output_scanline) * w * 3;
    jpeg_read_scanlines(&info, &row, 1);
  }
  // A truncated file decodes with a "premature end" warning and grey rows; Pillow refuses it.
  const long warnings = info.err->num_warnings;
  jpeg_finish_decompress(&info);
  jpeg_destroy_decompress(&info);
  RETAIN_CHECK(warnings == 0, where, ": the JPEG data is truncated or corrupt (libjpeg reported ",
               warnings, " warning(s))");
  return out;
}

struct PngReader {
  const std::vector<uint8_t>* bytes;
  size_t offset = 0;
};

RgbImage decode_png(const std::vector<uint8_t>& bytes, const std::string& where) {
  png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
  png_infop info = png ? png_create_info_struct(png) : nullptr;
  RETAIN_CHECK(png && info, where, ": libpng could not start");
  std::string message;
  png_set_error_fn(
      png, &message,
      [](png_structp p, png_const_charp msg) {
        *static_cast<std::string*>(png_get_error_ptr(p)) = msg;
        png_longjmp(p, 1);
      },
      [](png_structp, png_const_charp) {});
  PngReader reader{&bytes};
  // Declared before setjmp: a longjmp out of libpng must not skip their destructors.
  std::vector<uint8_t> pixels;
  std::vector<png_bytep> rows;
  if (setjmp(png_jmpbuf(png))) {
    png_destroy_read_struct(&png, &info, nullptr);
    fail(where, ": not a readable PNG image (libpng: ", message, ")");
  }
  png_set_read_fn(png, &reader, [](png_structp p, png_bytep data, png_size_t length) {
    auto* r = static_cast<PngReader*>(png_get_io_ptr(p));
    if (r->offset + length > r->bytes->size()) png_error(p, "the file is truncated");
    std::memcpy(data, r->bytes->data() + r->offset, length);
    r->offset += length;
  });
  png_read_info(png, info);
  const int color = png_get_color_type(png, info);
  // Pillow keeps 8 bits (the high byte of 16-bit samples), ignores gamma, expands palettes and
  // low bit depths; transparency (an alpha channel or tRNS) then goes over white.
  png_set_strip_16(png);
  png_set_packing(png);
  if (color == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);
  if (color == PNG_COLOR_TYPE_GRAY && png_get_bit_depth(png, info) < 8)
    png_set_expand_gray_1_2_4_to_8(png);
  const bool has_alpha = (color & PNG_COLOR_MASK_ALPHA) || png_get_valid(png, info, PNG_INFO_tRNS);
  if (png_get_valid(png, info, PNG_INFO_tRNS)) png_set_tRNS_to_alpha(png);
  if (color == PNG_COLOR_TYPE_GRAY || color == PNG_COLOR_TYPE_GRAY_ALPHA) png_set_gray_to_rgb(png);
  if (!has_alpha) png_set_add_alpha(png, 0xff, PNG_FILLER_AFTER);
  png_set_interlace_handling(png);
  png_read_update_info(png, info);
  const int64_t h = png_get_image_height(png, info), w = png_get_image_width(png, info);
  std::string bad = too_many_pixels(h, w);
  if (bad.empty() && png_get_rowbytes(png, info) != static_cast<size_t>(w * 4))
    bad = "unexpected PNG row layout after conversion to RGBA";
  if (!bad.empty()) {
    png_destroy_read_struct(&png, &info, nullptr);
    fail(where, ": ", bad);
  }
  pixels.resize(static_cast<size_t>(h * w * 4));
  rows.resize(static_cast<size_t>(h));
  for (int64_t r = 0; r < h; ++r) rows[r] = pixels.data() + r * w * 4;
  png_read_image(png, rows.data());
  png_read_end(png, nullptr);
  png_destroy_read_struct(&png, &info, nullptr);
  return rgba_to_rgb(pixels.data(), h, w);
}

RgbImage decode_webp(const std::vector<uint8_t>& bytes, const std::string& where) {
  WebPBitstreamFeatures features;
  RETAIN_CHECK(WebPGetFeatures(bytes.data(), bytes.size(), &features) == VP8_STATUS_OK, where,
               ": not a readable WebP image (libwebp could not read its header)");
  RETAIN_CHECK(!features.has_animation, where, ": animated WebP images are not supported");
  if (const std::string bad = too_many_pixels(features.height, features.width); !bad.empty())
    fail(where, ": ", bad);
  int w = 0, h = 0;
  if (features.has_alpha) {
    uint8_t* rgba = WebPDecodeRGBA(bytes.data(), bytes.size(), &w, &h);
    RETAIN_CHECK(rgba != nullptr, where, ": the WebP data is truncated or corrupt");
    auto out = rgba_to_rgb(rgba, h, w);
    WebPFree(rgba);
    return out;
  }
  uint8_t* rgb = WebPDecodeRGB(bytes.data(), bytes.size(), &w, &h);
  RETAIN_CHECK(rgb != nullptr, where, ": the WebP data is truncated or corrupt");
  RgbImage out{h, w, std::vector<uint8_t>(rgb, rgb + static_cast<size_t>(h) * w * 3)};
  WebPFree(rgb);
  return out;
}

bool starts_with(const std::vector<uint8_t>& bytes, std::initializer_list<uint8_t> magic,
                 size_t at = 0) {
  if (bytes.size() < at + magic.size()) return false;
  return std::equal(magic.begin(), magic.end(), bytes.begin() + static_cast<std::ptrdiff_t>(at));
}

}  // namespace

RgbImage decode_image(const std::vector<uint8_t>& bytes, const std::string& where) {
  if (starts_with(bytes, {0xFF, 0xD8, 0xFF})) return decode_jpeg(bytes, where);
  if (starts_with(bytes, {0x89, 'P', 'N', 'G', 0x0D, 0x0A, 0x1A, 0x0A}))
    return decode_png(bytes, where);
  if (starts_with(bytes, {'R', 'I', 'F', 'F'}) && starts_with(bytes, {'W', 'E', 'B', 'P'}, 8))
    return decode_webp(bytes, where);
  fail(where, ": not a JPEG, PNG or WebP image (", bytes.size(),
       " bytes; the first bytes match none of their signatures)");
}

}  // namespace retain
