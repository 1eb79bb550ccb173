// Image bytes decoded to 8-bit RGB, free of LibTorch (the fuzzer, fuzz/image_decode_fuzz.cpp,
// builds it alone; model/vision/image_io.h hands the pixels to a tensor). JPEG (libjpeg-turbo),
// PNG (libpng) and WebP (libwebp), decided by the first bytes, not a file's name, and converted
// the way transformers receives an image from Pillow: Image.open(f) then its convert_to_rgb,
// which lays an image with transparency over a white background (Pillow's alpha_composite,
// integer arithmetic reproduced exactly) and replicates grey into R, G and B.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace retain {

struct RgbImage {
  int64_t height = 0, width = 0;
  std::vector<uint8_t> pixels;  // height x width x 3, row-major
};

// Pillow refuses images above 2 x Image.MAX_IMAGE_PIXELS (DecompressionBombError): a header can
// claim a size no memory holds, so the size is checked before anything is allocated.
constexpr int64_t kMaxImagePixels = 2 * (int64_t{1024} * 1024 * 1024 / 4 / 3);

// Errors name `where` and say what is wrong (not an image of a known format, truncated, corrupt,
// CMYK, animated, too many pixels).
RgbImage decode_image(const std::vector<uint8_t>& bytes, const std::string& where);

}  // namespace retain
