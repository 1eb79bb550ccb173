#include "model/vision/vision_config.h"

#include <cmath>
#include <numeric>

#include "core/error.h"

namespace retain {

namespace {

VisionConfig parse_vision(const std::string& model_type, const Json& v, const std::string& where) {
  VisionConfig c;
  c.family = model_type == "qwen3_vl" ? VisionFamily::kQwen3 : VisionFamily::kQwen2_5;
  c.depth = json_get<int64_t>(v, "depth", where);
  c.hidden_size = json_get<int64_t>(v, "hidden_size", where);
  c.num_heads = json_get<int64_t>(v, "num_heads", where);
  c.intermediate_size = json_get<int64_t>(v, "intermediate_size", where);
  // Qwen2.5-VL's first release calls it in_chans.
  c.in_channels = json_get_optional<int64_t>(v, "in_channels", where)
                      .value_or(json_get_optional<int64_t>(v, "in_chans", where).value_or(3));
  c.patch_size = json_get_optional<int64_t>(v, "patch_size", where).value_or(14);
  c.temporal_patch_size = json_get_optional<int64_t>(v, "temporal_patch_size", where).value_or(2);
  c.spatial_merge_size = json_get_optional<int64_t>(v, "spatial_merge_size", where).value_or(2);
  c.out_hidden_size = json_get<int64_t>(v, "out_hidden_size", where);
  const bool qwen3 = c.family == VisionFamily::kQwen3;
  c.hidden_act = json_get_optional<std::string>(v, "hidden_act", where)
                     .value_or(qwen3 ? "gelu_pytorch_tanh" : "silu");
  c.activation = parse_activation(c.hidden_act, where);
  for (auto [name, value] : {std::pair{"depth", c.depth},
                             {"hidden_size", c.hidden_size},
                             {"num_heads", c.num_heads},
                             {"intermediate_size", c.intermediate_size},
                             {"in_channels", c.in_channels},
                             {"patch_size", c.patch_size},
                             {"temporal_patch_size", c.temporal_patch_size},
                             {"spatial_merge_size", c.spatial_merge_size},
                             {"out_hidden_size", c.out_hidden_size}})
    RETAIN_CHECK(value > 0, where, ": ", name, " must be positive, found ", value);
  RETAIN_CHECK(c.hidden_size % c.num_heads == 0 && c.head_dim() % 4 == 0, where,
               ": vision hidden_size ", c.hidden_size, " / num_heads ", c.num_heads,
               " must give a head dim divisible by 4 (2-D rotary over height and width)");
  if (v.contains("rope_parameters") && v["rope_parameters"].is_object()) {
    const Json& rope = v["rope_parameters"];
    auto type = json_get_optional<std::string>(rope, "rope_type", where + ": rope_parameters");
    RETAIN_CHECK(!type || *type == "axial" || *type == "default", where, ": vision rope_type '",
                 *type, "' is not supported (expected axial)");
    c.rope_theta = json_get_optional<double>(rope, "rope_theta", where + ": rope_parameters")
                       .value_or(10000.0);
  }
  auto check_blocks = [&](const std::vector<int64_t>& blocks, const char* key) {
    for (int64_t b : blocks)
      RETAIN_CHECK(b >= 0 && b < c.depth, where, ": ", key, " holds block ", b,
                   " but the vision tower has depth ", c.depth);
  };
  if (qwen3) {
    c.num_position_embeddings = json_get<int64_t>(v, "num_position_embeddings", where);
    const auto side = static_cast<int64_t>(std::llround(std::sqrt(c.num_position_embeddings)));
    RETAIN_CHECK(side * side == c.num_position_embeddings, where, ": num_position_embeddings ",
                 c.num_position_embeddings, " is not a square (a side x side grid)");
    c.deepstack_visual_indexes =
        json_get_optional<std::vector<int64_t>>(v, "deepstack_visual_indexes", where)
            .value_or(std::vector<int64_t>{});
    check_blocks(c.deepstack_visual_indexes, "deepstack_visual_indexes");
  } else {
    c.window_size = json_get_optional<int64_t>(v, "window_size", where).value_or(112);
    // Qwen2.5-VL spaces a video's temporal positions by tokens_per_second x seconds per grid
    // (transformers' Qwen2_5_VLVisionConfig default: 4).
    c.tokens_per_second = json_get_optional<int64_t>(v, "tokens_per_second", where).value_or(4);
    c.fullatt_block_indexes =
        json_get_optional<std::vector<int64_t>>(v, "fullatt_block_indexes", where)
            .value_or(std::vector<int64_t>{});
    check_blocks(c.fullatt_block_indexes, "fullatt_block_indexes");
    RETAIN_CHECK(c.window_size >= c.patch_size * c.spatial_merge_size, where, ": window_size ",
                 c.window_size, " is smaller than one merged patch (",
                 c.patch_size * c.spatial_merge_size, " pixels)");
  }
  return c;
}

}  // namespace

MultimodalConfig parse_multimodal_config(const std::string& model_type, const Json& top,
                                         const Json& text_rope, int64_t text_head_dim,
                                         const std::string& where) {
  MultimodalConfig m;
  RETAIN_CHECK(top.contains("vision_config") && top["vision_config"].is_object(), where, ": a ",
               model_type, " config needs a 'vision_config' object");
  m.vision = parse_vision(model_type, top["vision_config"], where + ": vision_config");
  m.image_token_id = json_get<int64_t>(top, "image_token_id", where);
  m.video_token_id = json_get_optional<int64_t>(top, "video_token_id", where).value_or(-1);
  m.vision_start_token_id = json_get<int64_t>(top, "vision_start_token_id", where);
  m.vision_end_token_id = json_get<int64_t>(top, "vision_end_token_id", where);
  const bool qwen3 = model_type == "qwen3_vl";
  // transformers' defaults when the rope parameters leave them out.
  m.mrope_section =
      json_get_optional<std::vector<int64_t>>(text_rope, "mrope_section", where)
          .value_or(qwen3 ? std::vector<int64_t>{24, 20, 20} : std::vector<int64_t>{16, 24, 24});
  // Qwen3-VL's decoder always interleaves the axes (its config's mrope_interleaved says so too);
  // Qwen2.5-VL's always uses contiguous sections.
  m.mrope_interleaved = qwen3;
  RETAIN_CHECK(m.mrope_section.size() == 3, where, ": mrope_section must have 3 entries (t, h, w)");
  const int64_t total = std::accumulate(m.mrope_section.begin(), m.mrope_section.end(), int64_t{0});
  RETAIN_CHECK(total == text_head_dim / 2, where, ": mrope_section sums to ", total,
               " but the decoder's head_dim / 2 is ", text_head_dim / 2);
  RETAIN_CHECK(m.vision.out_hidden_size > 0, where, ": vision out_hidden_size must be positive");
  return m;
}

std::string multimodal_fingerprint(const MultimodalConfig& m) {
  const VisionConfig& v = m.vision;
  std::string s =
      str_cat(static_cast<int>(v.family), ",", v.depth, ",", v.hidden_size, ",", v.num_heads, ",",
              v.intermediate_size, ",", v.patch_size, ",", v.temporal_patch_size, ",",
              v.spatial_merge_size, ",", v.out_hidden_size, ",", v.hidden_act, ",", v.window_size,
              ",", v.num_position_embeddings, ",", m.image_token_id, ",", m.mrope_interleaved);
  for (int64_t x : v.fullatt_block_indexes) s += str_cat(":f", x);
  for (int64_t x : v.deepstack_visual_indexes) s += str_cat(":d", x);
  for (int64_t x : m.mrope_section) s += str_cat(":m", x);
  return s;
}

}  // namespace retain
