// Image files in: JPEG (libjpeg-turbo), PNG (libpng) and WebP (libwebp) decoded to 8-bit RGB the
// way transformers receives them from Pillow: Image.open(f) then its convert_to_rgb, which lays an
// image with transparency over a white background (Pillow's alpha_composite, integer arithmetic
// reproduced exactly) and replicates grey into R, G and B. Which decoder runs is decided by the
// file's first bytes, not its name.
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
