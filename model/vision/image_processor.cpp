#include "model/vision/image_processor.h"

#include <cfenv>
#include <cmath>

#include "core/error.h"
#include "core/json.h"
#include "model/vision/vision_config.h"

namespace retain {

void PatchProcessorConfig::read(const Json& j, const std::string& where, bool legacy_pixel_keys) {
  RETAIN_CHECK(j.is_object(), where, ": expected an object");
  if (j.contains("size") && j["size"].is_object()) {
    const Json& size = j["size"];
    min_pixels = json_get_optional<int64_t>(size, "shortest_edge", where).value_or(min_pixels);
    max_pixels = json_get_optional<int64_t>(size, "longest_edge", where).value_or(max_pixels);
  }
  if (legacy_pixel_keys) {
    min_pixels = json_get_optional<int64_t>(j, "min_pixels", where).value_or(min_pixels);
    max_pixels = json_get_optional<int64_t>(j, "max_pixels", where).value_or(max_pixels);
  }
  patch_size = json_get_optional<int64_t>(j, "patch_size", where).value_or(patch_size);
  temporal_patch_size =
      json_get_optional<int64_t>(j, "temporal_patch_size", where).value_or(temporal_patch_size);
  merge_size = json_get_optional<int64_t>(j, "merge_size", where).value_or(merge_size);
  if (auto m = json_get_optional<std::vector<double>>(j, "image_mean", where)) {
    RETAIN_CHECK(m->size() == 3, where, ": image_mean must have 3 entries");
    std::copy(m->begin(), m->end(), mean.begin());
  }
  if (auto s = json_get_optional<std::vector<double>>(j, "image_std", where)) {
    RETAIN_CHECK(s->size() == 3, where, ": image_std must have 3 entries");
    std::copy(s->begin(), s->end(), std.begin());
  }
  rescale_factor = json_get_optional<double>(j, "rescale_factor", where).value_or(rescale_factor);
  for (const char* key : {"do_resize", "do_rescale", "do_normalize", "do_convert_rgb"})
    RETAIN_CHECK(json_get_optional<bool>(j, key, where).value_or(true), where, ": ", key,
                 " = false is not supported");
  RETAIN_CHECK(!json_get_optional<bool>(j, "do_center_crop", where).value_or(false), where,
               ": do_center_crop = true is not supported");
  if (auto resample = json_get_optional<int64_t>(j, "resample", where))
    RETAIN_CHECK(*resample == 3, where, ": resample ", *resample,
                 " is not supported (only 3, bicubic)");
  RETAIN_CHECK(min_pixels > 0 && max_pixels >= min_pixels, where,
               ": expected 0 < min_pixels <= max_pixels, found ", min_pixels, " and ", max_pixels);
  RETAIN_CHECK(patch_size > 0 && temporal_patch_size > 0 && merge_size > 0, where,
               ": patch_size, temporal_patch_size and merge_size must be positive");
}

ImageProcessorConfig ImageProcessorConfig::load(const fs::path& model_dir) {
  const fs::path path = model_dir / "preprocessor_config.json";
  RETAIN_CHECK(fs::exists(path), model_dir.string(),
               ": no preprocessor_config.json (a vision-language model directory has one)");
  const Json j = read_json_file(path);
  const std::string where = path.string();
  return with_json_errors(where, [&] {
    ImageProcessorConfig c;
    c.read(j, where, /*legacy_pixel_keys=*/true);
    return c;
  });
}

ImageProcessorConfig ImageProcessorConfig::for_model(const ModelConfig& config) {
  RETAIN_CHECK(config.multimodal, config.model_type, " is not a vision-language model");
  const VisionConfig& v = config.multimodal->vision;
  ImageProcessorConfig c;
  c.patch_size = v.patch_size;
  c.temporal_patch_size = v.temporal_patch_size;
  c.merge_size = v.spatial_merge_size;
  if (v.family == VisionFamily::kQwen3) {
    c.min_pixels = 65536;
    c.max_pixels = 16777216;
    c.mean = {0.5, 0.5, 0.5};
    c.std = {0.5, 0.5, 0.5};
  } else {
    c.min_pixels = 3136;
    c.max_pixels = 12845056;
  }
  return c;
}

std::pair<int64_t, int64_t> smart_resize(int64_t height, int64_t width, int64_t factor,
                                         int64_t min_pixels, int64_t max_pixels) {
  const auto h = static_cast<double>(height), w = static_cast<double>(width);
  const auto f = static_cast<double>(factor);
  RETAIN_CHECK(std::max(h, w) / std::min(h, w) <= 200, "image of ", width, "x", height,
               ": absolute aspect ratio must be at most 200");
  // Python's round() rounds halves to even, as nearbyint does in the default rounding mode.
  auto h_bar = static_cast<int64_t>(std::nearbyint(h / f)) * factor;
  auto w_bar = static_cast<int64_t>(std::nearbyint(w / f)) * factor;
  if (h_bar * w_bar > max_pixels) {
    const double beta = std::sqrt(h * w / static_cast<double>(max_pixels));
    h_bar = std::max(factor, static_cast<int64_t>(std::floor(h / beta / f)) * factor);
    w_bar = std::max(factor, static_cast<int64_t>(std::floor(w / beta / f)) * factor);
  } else if (h_bar * w_bar < min_pixels) {
    const double beta = std::sqrt(static_cast<double>(min_pixels) / (h * w));
    h_bar = static_cast<int64_t>(std::ceil(h * beta / f)) * factor;
    w_bar = static_cast<int64_t>(std::ceil(w * beta / f)) * factor;
  }
  return {h_bar, w_bar};
}

ProcessedImage preprocess_image(const at::Tensor& rgb, const ImageProcessorConfig& c) {
  RETAIN_CHECK(rgb.dim() == 3 && rgb.size(2) == 3 && rgb.scalar_type() == at::kByte,
               "preprocess_image: expected an (H, W, 3) uint8 image, found ", rgb.sizes(), " ",
               rgb.scalar_type());
  const int64_t factor = c.patch_size * c.merge_size;
  auto [rh, rw] = smart_resize(rgb.size(0), rgb.size(1), factor, c.min_pixels, c.max_pixels);
  at::Tensor image = rgb.permute({2, 0, 1}).contiguous().unsqueeze(0);  // (1, 3, H, W) uint8
  if (rh != image.size(2) || rw != image.size(3))
    image = at::_upsample_bicubic2d_aa(image, {rh, rw}, /*align_corners=*/false);
  // transformers fuses rescale into normalise: mean and std are divided by the rescale factor
  // (in fp32) and the 0..255 values normalised with them.
  auto mean = at::tensor(std::vector<double>(c.mean.begin(), c.mean.end()), at::kFloat) *
              (1.0 / c.rescale_factor);
  auto std = at::tensor(std::vector<double>(c.std.begin(), c.std.end()), at::kFloat) *
             (1.0 / c.rescale_factor);
  auto x = image.to(at::kFloat).sub_(mean.view({-1, 1, 1})).div_(std.view({-1, 1, 1}));
  const int64_t gh = rh / c.patch_size, gw = rw / c.patch_size, m = c.merge_size, p = c.patch_size;
  auto patches = x.reshape({1, 3, gh / m, m, p, gw / m, m, p}).permute({0, 2, 5, 3, 6, 1, 4, 7});
  patches = patches.unsqueeze(6)
                .expand({-1, -1, -1, -1, -1, -1, c.temporal_patch_size, -1, -1})
                .reshape({gh * gw, 3 * c.temporal_patch_size * p * p});
  ProcessedImage out;
  out.pixel_values = patches.contiguous();
  out.grid = ImageGrid{1, gh, gw};
  out.resized_height = rh;
  out.resized_width = rw;
  return out;
}

}  // namespace retain
