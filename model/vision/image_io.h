// Image files in, as tensors: JPEG, PNG and WebP decoded to 8-bit RGB as model/vision/image_decode.h
// says (Pillow's Image.open + convert_to_rgb, exactly).
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/fs.h"

namespace retain {

// (H, W, 3) uint8. Errors name the file and say what is wrong with it (not an image of a known
// format, truncated, corrupt).
at::Tensor read_image_rgb(const fs::path& path);
at::Tensor decode_image_rgb(const std::vector<uint8_t>& bytes, const std::string& where);

}  // namespace retain
