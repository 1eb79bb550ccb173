#include "model/vision/multimodal_prompt.h"

#include <algorithm>
#include <cstdio>

#include "core/error.h"
#include "model/decoder.h"
#include "model/tokenizers/tokenizer.h"
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

ExpandedPrompt expand_vision_placeholders(const ModelConfig& config,
                                          const std::vector<int64_t>& ids,
                                          const std::vector<ImageGrid>& images,
                                          const std::vector<ProcessedVideo>& videos,
                                          const Tokenizer* tokenizer) {
  RETAIN_CHECK(config.multimodal, config.model_type,
               " is a text-only model: it cannot take images or videos");
  const MultimodalConfig& m = *config.multimodal;
  const int64_t merge = m.vision.spatial_merge_size;
  const int64_t image_id = m.image_token_id, video_id = m.video_token_id;
  size_t image_marks = 0, video_marks = 0;
  for (int64_t id : ids) {
    image_marks += id == image_id ? 1 : 0;
    video_marks += video_id >= 0 && id == video_id ? 1 : 0;
  }
  RETAIN_CHECK(image_marks == images.size(), "the prompt has ", image_marks,
               " image placeholder(s) (token ", image_id, ") but ", images.size(),
               " image(s) were given");
  RETAIN_CHECK(video_marks == videos.size(), "the prompt has ", video_marks,
               " video placeholder(s) (token ", video_id, ") but ", videos.size(),
               " video(s) were given");
  RETAIN_CHECK(videos.empty() || video_id >= 0, config.model_type,
               ": config.json has no video_token_id");
  const bool qwen3 = m.vision.family == VisionFamily::kQwen3;
  RETAIN_CHECK(!qwen3 || videos.empty() || tokenizer != nullptr,
               "Qwen3-VL writes each video's timestamps as text: the prompt needs the tokenizer");
  ExpandedPrompt out;
  size_t image = 0, video = 0;
  for (int64_t id : ids) {
    if (id == image_id) {
      const ImageGrid& g = images[image];
      out.ids.insert(out.ids.end(), static_cast<size_t>(g.tokens(merge)), image_id);
      out.spans.push_back(VisionSpan{image_id, g, 1.0f});
      out.order.push_back(static_cast<int64_t>(image++));
    } else if (video_id >= 0 && id == video_id) {
      const ProcessedVideo& v = videos[video];
      const ImageGrid& g = v.grid;
      if (qwen3) {
        // Qwen3VLProcessor.replace_video_token: per temporal group its time, then the group's
        // tokens in their own vision block (the template's block stays around them all). The
        // time text sits between special tokens, so it tokenizes on its own.
        const ImageGrid frame{1, g.h, g.w};
        const auto times = v.group_timestamps();
        RETAIN_CHECK(static_cast<int64_t>(times.size()) == g.t, v.where, ": ", times.size(),
                     " timestamps for ", g.t, " temporal groups");
        for (int64_t t = 0; t < g.t; ++t) {
          char text[64];
          std::snprintf(text, sizeof text, "<%.1f seconds>", times[static_cast<size_t>(t)]);
          for (int64_t piece : tokenizer->encode(text)) out.ids.push_back(piece);
          out.ids.push_back(m.vision_start_token_id);
          out.ids.insert(out.ids.end(), static_cast<size_t>(frame.tokens(merge)), video_id);
          out.ids.push_back(m.vision_end_token_id);
          out.spans.push_back(VisionSpan{video_id, frame, 1.0f});
        }
      } else {
        // Qwen2.5-VL: one run; its temporal positions step by tokens_per_second x seconds per
        // grid, an fp32 product as in transformers (second_per_grid_ts is an fp32 tensor).
        out.ids.insert(out.ids.end(), static_cast<size_t>(g.tokens(merge)), video_id);
        const float interval = static_cast<float>(m.vision.tokens_per_second) *
                               static_cast<float>(v.seconds_per_grid());
        out.spans.push_back(VisionSpan{video_id, g, interval});
      }
      out.order.push_back(-1 - static_cast<int64_t>(video++));
    } else {
      out.ids.push_back(id);
    }
  }
  return out;
}

MultimodalPrompt prepare_multimodal_prompt(const Decoder& model, const std::vector<int64_t>& ids,
                                           const std::vector<ProcessedImage>& images,
                                           const std::vector<ProcessedVideo>& videos,
                                           const Tokenizer* tokenizer,
                                           int64_t tower_patches_per_pass) {
  const ModelConfig& c = model.config();
  RETAIN_CHECK((c.multimodal && model.vision() != nullptr) || (images.empty() && videos.empty()),
               c.model_type, " is a text-only model: it cannot take images or videos");
  MultimodalPrompt p;
  if (!c.multimodal) {
    p.ids = ids;
    return p;
  }
  const MultimodalConfig& m = *c.multimodal;
  std::vector<ImageGrid> grids;
  for (const auto& image : images) {
    RETAIN_CHECK(image.pixel_values.size(1) == m.vision.patch_values(),
                 "an image was prepared with ", image.pixel_values.size(1),
                 " values per patch but the vision tower takes ", m.vision.patch_values(),
                 " (a preprocessor_config.json of another model?)");
    grids.push_back(image.grid);
  }
  for (const auto& video : videos)
    RETAIN_CHECK(video.pixel_values.size(1) == m.vision.patch_values(), video.where,
                 ": prepared with ", video.pixel_values.size(1),
                 " values per patch but the vision tower takes ", m.vision.patch_values(),
                 " (a video processor config of another model?)");
  ExpandedPrompt expanded = expand_vision_placeholders(c, ids, grids, videos, tokenizer);
  p.image_token_id = m.image_token_id;
  p.video_token_id = videos.empty() ? -1 : m.video_token_id;
  p.ids = std::move(expanded.ids);
  RopeIndex index = multimodal_rope_index(p.ids, m.image_token_id, m.video_token_id, expanded.spans,
                                          m.vision.spatial_merge_size);
  p.rope_positions = index.positions;
  p.rope_delta = index.delta;
  if (expanded.order.empty()) return p;
  // The tower attends within each frame only, so its output over several images and videos is
  // each one's embeddings in turn (token order when fed in prompt order), and a video can be
  // cut between temporal groups. Passes of at most `tower_patches_per_pass` patches bound the
  // tower's activations whatever the clip's length: a long video runs group by group.
  std::vector<at::Tensor> embeds;
  std::vector<std::vector<at::Tensor>> levels;
  std::vector<at::Tensor> pixels;
  std::vector<ImageGrid> pass_grids;
  int64_t pass_patches = 0;
  auto run_pass = [&] {
    if (pass_grids.empty()) return;
    VisionOutput out = model.vision()->forward(at::cat(pixels, 0), pass_grids);
    embeds.push_back(out.embeds);
    levels.push_back(out.deepstack);
    pixels.clear();
    pass_grids.clear();
    pass_patches = 0;
  };
  auto add = [&](const at::Tensor& values, const ImageGrid& grid) {
    if (pass_patches > 0 && pass_patches + grid.patches() > tower_patches_per_pass) run_pass();
    pixels.push_back(values);
    pass_grids.push_back(grid);
    pass_patches += grid.patches();
  };
  for (int64_t item : expanded.order) {
    if (item >= 0) {
      add(images[static_cast<size_t>(item)].pixel_values, images[static_cast<size_t>(item)].grid);
      continue;
    }
    const ProcessedVideo& v = videos[static_cast<size_t>(-1 - item)];
    p.video_tokens += v.grid.tokens(m.vision.spatial_merge_size);
    const int64_t per_group = v.grid.h * v.grid.w;
    const int64_t groups_per_pass = std::max<int64_t>(1, tower_patches_per_pass / per_group);
    for (int64_t t = 0; t < v.grid.t; t += groups_per_pass) {
      const int64_t n = std::min(groups_per_pass, v.grid.t - t);
      add(v.pixel_values.narrow(0, t * per_group, n * per_group), ImageGrid{n, v.grid.h, v.grid.w});
    }
  }
  run_pass();
  p.visual_embeds = embeds.size() == 1 ? embeds[0] : at::cat(embeds, 0);
  for (size_t level = 0; level < levels.front().size(); ++level) {
    std::vector<at::Tensor> parts;
    for (const auto& l : levels) parts.push_back(l[level]);
    p.deepstack.push_back(parts.size() == 1 ? parts[0] : at::cat(parts, 0));
  }
  p.image_tokens = p.visual_embeds.size(0) - p.video_tokens;
  return p;
}

std::string text_with_image_blocks(const std::string& text, size_t images, size_t videos) {
  auto place = [](const std::string& in, const std::string& marker, const char* block, size_t count,
                  const char* kind) {
    size_t markers = 0;
    for (size_t at = in.find(marker); at != std::string::npos; at = in.find(marker, at + 1))
      ++markers;
    if (markers == 0) {
      std::string out;
      for (size_t i = 0; i < count; ++i) out += block;
      return std::pair{out, in};
    }
    RETAIN_CHECK(markers == count, "the prompt has ", markers, " ", marker, " marker(s) but ",
                 count, " ", kind, "(s) were given");
    std::string out;
    size_t from = 0;
    for (size_t at = in.find(marker); at != std::string::npos; at = in.find(marker, from)) {
      out += in.substr(from, at - from) + block;
      from = at + marker.size();
    }
    return std::pair{std::string(), out + in.substr(from)};
  };
  auto [video_front, with_videos] = place(text, "<video>", kQwenVideoBlock, videos, "video");
  auto [image_front, with_both] = place(with_videos, "<image>", kQwenImageBlock, images, "image");
  return image_front + video_front + with_both;
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
    if (!p->visual_embeds.defined()) continue;
    for (int64_t i = 0; i < n; ++i)
      if (p->visual(p->ids[i])) index[r][width - n + i] = next++;
    embeds.push_back(p->visual_embeds);
    levels.push_back(p->deepstack);
  }
  if (!embeds.empty()) {
    visual_embeds_ = at::cat(embeds, 0).to(device);
    RETAIN_CHECK(visual_embeds_.size(0) == next, "multimodal batch: ", next, " vision tokens but ",
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
