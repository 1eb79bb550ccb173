#include "trainer/multimodal_batch.h"

#include <ATen/core/grad_mode.h>

#include <map>

#include "core/error.h"
#include "model/vision/image_io.h"
#include "model/vision/mrope.h"
#include "model/vision/vision_config.h"
#include "model/vision/vision_tower.h"

namespace retain {

MultimodalInputs packed_multimodal_inputs(const Decoder& model, const PackedBatch& batch,
                                          const ImageProcessorConfig& processor) {
  const ModelConfig& c = model.config();
  RETAIN_CHECK(c.multimodal != nullptr && model.vision() != nullptr,
               "train: the shards hold images but ", c.model_type,
               " is a text-only model (prepare the data with a vision-language model)");
  const MultimodalConfig& m = *c.multimodal;
  const std::string where = batch.images.empty() ? std::string("train") : batch.images[0].where;
  RETAIN_CHECK(batch.image_token_id == m.image_token_id &&
                   batch.spatial_merge_size == m.vision.spatial_merge_size,
               where, ": prepared with image_token_id ", batch.image_token_id,
               " and spatial_merge_size ", batch.spatial_merge_size, ", the model has ",
               m.image_token_id, " and ", m.vision.spatial_merge_size,
               " (re-run retain prep with this model)");
  const int64_t merge = m.vision.spatial_merge_size;
  const at::Tensor ids = batch.ids;  // on the host
  const auto b = ids.size(0), t = ids.size(1);
  MultimodalInputs out;
  // Plain positions (0 on padding) on every axis; documents with images get theirs below.
  at::Tensor pos3 = batch.positions.clamp_min(0).unsqueeze(0).expand({3, b, t}).contiguous();
  // The images of each document (row, first column), in order.
  std::map<std::pair<int64_t, int64_t>, std::vector<size_t>> documents;
  for (size_t i = 0; i < batch.images.size(); ++i)
    documents[{batch.images[i].row, batch.images[i].doc_column}].push_back(i);
  std::vector<at::Tensor> pixels;
  std::vector<ImageGrid> grids;
  const auto segments = batch.segments.accessor<int64_t, 2>();
  for (const auto& [at_doc, members] : documents) {
    const auto [row, col] = at_doc;
    int64_t end = col;
    while (end < t && segments[row][end] == segments[row][col]) ++end;
    const at::Tensor span = ids[row].slice(0, col, end).contiguous();
    std::vector<int64_t> doc_ids(span.data_ptr<int64_t>(), span.data_ptr<int64_t>() + span.numel());
    std::vector<ImageGrid> doc_grids;
    for (size_t i : members) {
      const PackedImage& p = batch.images[i];
      const ImageGrid stored{p.image.t, p.image.h, p.image.w};
      ProcessedImage image = preprocess_image(decode_image_rgb(p.image.bytes, p.where), processor);
      RETAIN_CHECK(image.grid.t == stored.t && image.grid.h == stored.h && image.grid.w == stored.w,
                   p.where, ": preprocesses to a ", image.grid.t, "x", image.grid.h, "x",
                   image.grid.w, " patch grid but was prepared as ", stored.t, "x", stored.h, "x",
                   stored.w, " (preprocessor_config.json changed since retain prep?)");
      doc_grids.push_back(stored);
      grids.push_back(stored);
      pixels.push_back(image.pixel_values);
    }
    RopeIndex index;
    try {
      index = multimodal_rope_index(doc_ids, m.image_token_id, doc_grids, merge);
    } catch (const Error& e) {
      fail(batch.images[members.front()].where, "'s document: ", e.what());
    }
    pos3.select(1, row).slice(1, col, end).copy_(index.positions);
  }
  out.rope_positions = pos3;
  out.visual_mask = ids == m.image_token_id;
  RETAIN_CHECK(
      out.visual_mask.sum().item<int64_t>() ==
          [&] {
            int64_t n = 0;
            for (const auto& g : grids) n += g.tokens(merge);
            return n;
          }(),
      where, ": the batch's image tokens do not match its images' grids");
  if (!pixels.empty()) {
    at::NoGradGuard frozen;
    VisionOutput vision = model.vision()->forward(at::cat(pixels, 0), grids);
    out.visual_embeds = vision.embeds;
    out.deepstack = vision.deepstack;
  }
  return out;
}

}  // namespace retain
