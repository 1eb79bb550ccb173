#include "model/vision/multimodal_prompt.h"

#include <algorithm>

#include "core/error.h"
#include "model/decoder.h"
#include "model/vision/image_io.h"
#include "model/vision/vision_tower.h"

namespace retain {

std::vector<int64_t> expand_image_placeholders(const std::vector<int64_t>& ids,
                                               int64_t image_token_id,
                                               const std::vector<ImageGrid>& grids, int64_t merge) {
  size_t placeholders = 0;
  for (int64_t id : ids) placeholders += id == image_token_id ? 1 : 0;
  RETAIN_CHECK(placeholders == grids.size(), "the prompt has ", placeholders,
               " image placeholder(s) (token ", image_token_id, ") but ", grids.size(),
               " image(s) were given");
  std::vector<int64_t> out;
  size_t image = 0;
  for (int64_t id : ids) {
    if (id != image_token_id) {
      out.push_back(id);
      continue;
    }
    out.insert(out.end(), static_cast<size_t>(grids[image++].tokens(merge)), image_token_id);
  }
  return out;
}

MultimodalPrompt prepare_multimodal_prompt(const Decoder& model, const std::vector<int64_t>& ids,
                                           const std::vector<ProcessedImage>& images) {
  const ModelConfig& c = model.config();
  RETAIN_CHECK((c.multimodal && model.vision() != nullptr) || images.empty(), c.model_type,
               " is a text-only model: it cannot take images");
  MultimodalPrompt p;
  if (!c.multimodal) {
    p.ids = ids;
    return p;
  }
  const MultimodalConfig& m = *c.multimodal;
  std::vector<ImageGrid> grids;
  std::vector<at::Tensor> pixels;
  for (const auto& image : images) {
    RETAIN_CHECK(image.pixel_values.size(1) == m.vision.patch_values(),
                 "an image was prepared with ", image.pixel_values.size(1),
                 " values per patch but the vision tower takes ", m.vision.patch_values(),
                 " (a preprocessor_config.json of another model?)");
    grids.push_back(image.grid);
    pixels.push_back(image.pixel_values);
  }
  RETAIN_CHECK(
      m.video_token_id < 0 || std::find(ids.begin(), ids.end(), m.video_token_id) == ids.end(),
      "the prompt holds video placeholders (token ", m.video_token_id,
      "): videos are not supported, only images");
  p.image_token_id = m.image_token_id;
  p.ids = expand_image_placeholders(ids, m.image_token_id, grids, m.vision.spatial_merge_size);
  RopeIndex index =
      multimodal_rope_index(p.ids, m.image_token_id, grids, m.vision.spatial_merge_size);
  p.rope_positions = index.positions;
  p.rope_delta = index.delta;
  if (!images.empty()) {
    VisionOutput vision = model.vision()->forward(at::cat(pixels, 0), grids);
    p.visual_embeds = vision.embeds;
    p.deepstack = vision.deepstack;
    p.image_tokens = vision.embeds.size(0);
  }
  return p;
}

std::string text_with_image_blocks(const std::string& text, size_t images) {
  const std::string marker = "<image>";
  size_t markers = 0;
  for (size_t at = text.find(marker); at != std::string::npos; at = text.find(marker, at + 1))
    ++markers;
  if (markers == 0) {
    std::string out;
    for (size_t i = 0; i < images; ++i) out += kQwenImageBlock;
    return out + text;
  }
  RETAIN_CHECK(markers == images, "the prompt has ", markers, " <image> marker(s) but ", images,
               " image(s) were given");
  std::string out;
  size_t from = 0;
  for (size_t at = text.find(marker); at != std::string::npos; at = text.find(marker, from)) {
    out += text.substr(from, at - from) + kQwenImageBlock;
    from = at + marker.size();
  }
  return out + text.substr(from);
}

std::vector<ProcessedImage> load_images(const fs::path& model_dir,
                                        const std::vector<std::string>& paths) {
  std::vector<ProcessedImage> images;
  if (paths.empty()) return images;
  const ImageProcessorConfig config = ImageProcessorConfig::load(model_dir);
  for (const auto& path : paths) images.push_back(preprocess_image(read_image_rgb(path), config));
  return images;
}

MultimodalPrompt text_only_prompt(const std::vector<int64_t>& ids) {
  MultimodalPrompt p;
  p.ids = ids;
  const auto n = static_cast<int64_t>(ids.size());
  p.rope_positions = at::arange(n, at::kLong).unsqueeze(0).expand({3, n}).contiguous();
  return p;
}

BatchMultimodal::BatchMultimodal(const std::vector<std::shared_ptr<const MultimodalPrompt>>& rows,
                                 const std::vector<int64_t>& starts, int64_t width,
                                 at::Device device) {
  const auto b = static_cast<int64_t>(rows.size());
  rope_positions_ = at::zeros({3, b, width}, at::kLong);
  embed_index_ = at::full({b, width}, -1, at::kLong);
  auto delta = at::zeros({b, 1}, at::kLong);
  std::vector<at::Tensor> embeds;
  std::vector<std::vector<at::Tensor>> levels;
  int64_t next = 0;  // the next row of the concatenated embeddings
  auto index = embed_index_.accessor<int64_t, 2>();
  for (int64_t r = 0; r < b; ++r) {
    const auto& p = rows[r];
    const int64_t start = r < static_cast<int64_t>(starts.size()) ? starts[r] : 0;
    RETAIN_CHECK(p != nullptr, "multimodal batch: row ", r,
                 " has no prompt (text-only rows take "
                 "text_only_prompt)");
    const auto n = static_cast<int64_t>(p->ids.size());
    RETAIN_CHECK(n <= width, "multimodal batch: a row of ", n, " tokens in ", width, " columns");
    // A row continuing a cache (start > 0) shifts every axis alike.
    rope_positions_.select(1, r).narrow(1, width - n, n).copy_(p->rope_positions + start);
    delta[r][0] = p->rope_delta;
    if (p->image_tokens == 0) continue;
    for (int64_t i = 0; i < n; ++i)
      if (p->ids[i] == p->image_token_id) index[r][width - n + i] = next++;
    embeds.push_back(p->visual_embeds);
    levels.push_back(p->deepstack);
  }
  if (!embeds.empty()) {
    visual_embeds_ = at::cat(embeds, 0).to(device);
    RETAIN_CHECK(visual_embeds_.size(0) == next, "multimodal batch: ", next, " image tokens but ",
                 visual_embeds_.size(0), " visual embeddings");
    for (size_t level = 0; level < levels.front().size(); ++level) {
      std::vector<at::Tensor> parts;
      for (const auto& l : levels) parts.push_back(l.at(level));
      deepstack_.push_back(at::cat(parts, 0).to(device));
    }
  }
  decode_.rope_delta = delta.to(device);
}

MultimodalInputs BatchMultimodal::columns(int64_t begin, int64_t len) const {
  MultimodalInputs in;
  in.rope_positions = rope_positions_.narrow(2, begin, len);
  auto index = embed_index_.narrow(1, begin, len);
  in.visual_mask = index.ge(0);
  auto rows = index.masked_select(in.visual_mask);
  if (visual_embeds_.defined()) {
    in.visual_embeds = visual_embeds_.index_select(0, rows.to(visual_embeds_.device()));
    for (const auto& level : deepstack_)
      in.deepstack.push_back(level.index_select(0, rows.to(level.device())));
  }
  return in;
}

}  // namespace retain
