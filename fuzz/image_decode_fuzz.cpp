// libFuzzer target: image bytes as retain reads them (model/vision/image_decode.h: JPEG, PNG and
// WebP by their signatures). Every input either decodes to a non-empty image whose pixel buffer
// is exactly height x width x 3 within Pillow's pixel limit, or throws retain::Error.
#include "core/error.h"
#include "model/vision/image_decode.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace retain;
  try {
    const RgbImage image = decode_image(std::vector<uint8_t>(data, data + size), "fuzz");
    if (image.height <= 0 || image.width <= 0 || image.height > kMaxImagePixels / image.width ||
        image.pixels.size() != static_cast<size_t>(image.height * image.width * 3))
      __builtin_trap();
  } catch (const Error&) {
  }
  return 0;
}
