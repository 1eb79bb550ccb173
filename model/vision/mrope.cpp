#include "model/vision/mrope.h"

#include <algorithm>

#include "core/error.h"

namespace retain {

RopeIndex multimodal_rope_index(const std::vector<int64_t>& ids, int64_t image_token_id,
                                int64_t video_token_id, const std::vector<VisionSpan>& spans,
                                int64_t merge) {
  const auto n = static_cast<int64_t>(ids.size());
  auto vision = [&](int64_t id) {
    return id == image_token_id || (video_token_id >= 0 && id == video_token_id);
  };
  auto kind = [&](int64_t id) { return id == image_token_id ? "image" : "video"; };
  std::vector<int64_t> t_pos(n), h_pos(n), w_pos(n);
  int64_t next = 0;  // the position the next text token (or span origin) takes
  size_t span = 0;
  int64_t i = 0;
  while (i < n) {
    if (!vision(ids[i])) {
      t_pos[i] = h_pos[i] = w_pos[i] = next++;
      ++i;
      continue;
    }
    int64_t run = 0;
    while (i + run < n && ids[i + run] == ids[i]) ++run;
    RETAIN_CHECK(span < spans.size(), "the prompt holds more runs of vision tokens than the ",
                 spans.size(), " image/video span(s) given (a run of ", kind(ids[i]),
                 " tokens starts at token ", i, ")");
    const VisionSpan& s = spans[span];
    const ImageGrid& g = s.grid;
    RETAIN_CHECK(s.token_id == ids[i], "vision span ", span + 1, " is a",
                 s.token_id == image_token_id ? "n image" : " video", " but the run at token ", i,
                 " holds ", kind(ids[i]), " tokens");
    const int64_t gh = g.h / merge, gw = g.w / merge;
    RETAIN_CHECK(run == g.tokens(merge), kind(ids[i]), " span ", span + 1, " has a ", g.t, "x", g.h,
                 "x", g.w, " patch grid (", g.tokens(merge), " tokens) but its run at token ", i,
                 " is ", run, " long");
    // Temporal positions as transformers' get_vision_position_ids: (arange(t) * interval) in
    // fp32, truncated to an integer, then offset.
    int64_t k = i;
    for (int64_t tt = 0; tt < g.t; ++tt) {
      const auto step = static_cast<int64_t>(static_cast<float>(tt) * s.time_interval);
      for (int64_t r = 0; r < gh; ++r)
        for (int64_t c = 0; c < gw; ++c, ++k) {
          t_pos[k] = next + step;
          h_pos[k] = next + r;
          w_pos[k] = next + c;
        }
    }
    next += std::max(gh, gw);
    i += run;
    ++span;
  }
  RETAIN_CHECK(span == spans.size(), spans.size(),
               " image/video span(s) given but the prompt holds ", span,
               " run(s) of vision tokens");
  RopeIndex out;
  out.positions = at::empty({3, n}, at::kLong);
  auto acc = out.positions.accessor<int64_t, 2>();
  int64_t max_pos = -1;
  for (int64_t k = 0; k < n; ++k) {
    acc[0][k] = t_pos[k];
    acc[1][k] = h_pos[k];
    acc[2][k] = w_pos[k];
    max_pos = std::max({max_pos, t_pos[k], h_pos[k], w_pos[k]});
  }
  out.delta = max_pos + 1 - n;
  return out;
}

RopeIndex multimodal_rope_index(const std::vector<int64_t>& ids, int64_t image_token_id,
                                const std::vector<ImageGrid>& grids, int64_t merge) {
  std::vector<VisionSpan> spans;
  for (const auto& g : grids) spans.push_back(VisionSpan{image_token_id, g, 1.0f});
  return multimodal_rope_index(ids, image_token_id, -1, spans, merge);
}

at::Tensor mrope_axis_of_frequency(const MultimodalConfig& config, int64_t head_dim,
                                   at::Device device) {
  const int64_t half = head_dim / 2;
  std::vector<int64_t> axis(half, 0);
  const auto& s = config.mrope_section;
  if (config.mrope_interleaved) {
    // Qwen3-VL: frequency i follows h when i % 3 == 1 and i < 3 * s[1], w when i % 3 == 2 and
    // i < 3 * s[2], t otherwise (transformers overwrites the temporal frequencies in that pattern).
    for (int64_t a = 1; a <= 2; ++a)
      for (int64_t i = a; i < std::min(3 * s[a], half); i += 3) axis[i] = a;
  } else {
    // Qwen2.5-VL: the first s[0] frequencies follow t, the next s[1] h, the last s[2] w.
    int64_t i = 0;
    for (int64_t a = 0; a < 3; ++a)
      for (int64_t k = 0; k < s[a]; ++k) axis[i++] = a;
  }
  return at::tensor(axis, at::kLong).to(device);
}

std::pair<at::Tensor, at::Tensor> mrope_cos_sin(const RopeFrequencies& freqs,
                                                const at::Tensor& positions,
                                                const at::Tensor& axis_of_frequency,
                                                at::ScalarType dtype) {
  RETAIN_CHECK(positions.dim() == 3 && positions.size(0) == 3,
               "mrope_cos_sin: expected positions of shape (3, B, T), found ", positions.sizes());
  // (3, B, T, 1) * (D/2,): one fp32 product per entry, as transformers' broadcast multiply.
  auto angles = positions.to(at::kFloat).unsqueeze(-1) * freqs.inv_freq;
  const int64_t b = positions.size(1), t = positions.size(2), half = angles.size(-1);
  auto index = axis_of_frequency.view({1, 1, 1, half}).expand({1, b, t, half});
  auto chosen = angles.gather(0, index).squeeze(0);  // (B, T, D/2)
  return rope_cos_sin_from_angles(chosen, freqs, dtype);
}

}  // namespace retain
