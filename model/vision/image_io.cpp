#include "model/vision/image_io.h"

#include <fstream>
#include <iterator>

#include "core/error.h"
#include "model/vision/image_decode.h"

namespace retain {

at::Tensor decode_image_rgb(const std::vector<uint8_t>& bytes, const std::string& where) {
  // The tensor takes the decoded pixels over without a copy.
  auto* image = new RgbImage(decode_image(bytes, where));
  return at::from_blob(
      image->pixels.data(), {image->height, image->width, 3}, [image](void*) { delete image; },
      at::TensorOptions().dtype(at::kByte));
}

at::Tensor read_image_rgb(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  RETAIN_CHECK(in.good(), path.string(), ": cannot open the image file");
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)),
                             std::istreambuf_iterator<char>());
  return decode_image_rgb(bytes, path.string());
}

}  // namespace retain
