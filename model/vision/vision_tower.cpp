#include "model/vision/vision_tower.h"

#include <algorithm>
#include <cmath>
#include <mutex>

#include "core/error.h"
#include "core/log.h"
#include "kernels/fused_ops.h"
#include "model/activation.h"

namespace retain {

namespace {

using Shapes = std::vector<std::pair<std::string, std::vector<int64_t>>>;

at::Tensor rotate_half(const at::Tensor& x) {
  const int64_t half = x.size(-1) / 2;
  return at::cat({-x.slice(-1, half), x.slice(-1, 0, half)}, -1);
}

// transformers' apply_rotary_pos_emb_vision: in fp32 whatever the weights' dtype.
at::Tensor rotate(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
  auto xf = x.to(at::kFloat);
  return (xf * cos + rotate_half(xf) * sin).to(x.scalar_type());
}

// Each patch's (row, col) in the order the processor lays patches out: merge x merge blocks,
// row-major over blocks, row-major inside a block; repeated for every frame.
std::pair<std::vector<int64_t>, std::vector<int64_t>> patch_rows_cols(
    const std::vector<ImageGrid>& grids, int64_t merge) {
  std::vector<int64_t> rows, cols;
  for (const auto& g : grids)
    for (int64_t t = 0; t < g.t; ++t)
      for (int64_t br = 0; br < g.h / merge; ++br)
        for (int64_t bc = 0; bc < g.w / merge; ++bc)
          for (int64_t ir = 0; ir < merge; ++ir)
            for (int64_t ic = 0; ic < merge; ++ic) {
              rows.push_back(br * merge + ir);
              cols.push_back(bc * merge + ic);
            }
  return {rows, cols};
}

// Qwen2.5-VL's windows: the order that visits the merged patches window by window (windows of
// `side` x `side` merged patches, row-major, clipped at the image's edges) and the windows'
// lengths in patches.
std::pair<std::vector<int64_t>, std::vector<int64_t>> window_order(
    const std::vector<ImageGrid>& grids, int64_t merge, int64_t side) {
  std::vector<int64_t> order, lengths;
  int64_t offset = 0;
  for (const auto& g : grids) {
    const int64_t gh = g.h / merge, gw = g.w / merge;
    for (int64_t t = 0; t < g.t; ++t)
      for (int64_t wr = 0; wr * side < gh; ++wr)
        for (int64_t wc = 0; wc * side < gw; ++wc) {
          int64_t count = 0;
          for (int64_t r = wr * side; r < std::min(gh, (wr + 1) * side); ++r)
            for (int64_t c = wc * side; c < std::min(gw, (wc + 1) * side); ++c, ++count)
              order.push_back(offset + (t * gh + r) * gw + c);
          lengths.push_back(count * merge * merge);
        }
    offset += g.t * gh * gw;
  }
  return {order, lengths};
}

at::Tensor longs(const std::vector<int64_t>& v, at::Device device) {
  return at::tensor(v, at::kLong).to(device);
}

}  // namespace

bool vision_norm_weight(const std::string& name) {
  const bool weight = name.size() > 7 && name.substr(name.size() - 7) == ".weight";
  return weight &&
         (name.find("norm") != std::string::npos || name.find("ln_q") != std::string::npos);
}

Shapes VisionTower::param_shapes(const VisionConfig& c) {
  const bool qwen3 = c.family == VisionFamily::kQwen3;
  const int64_t h = c.hidden_size, i = c.intermediate_size, merged = h * c.merge_unit();
  Shapes s;
  s.push_back({"patch_embed.proj.weight",
               {h, c.in_channels, c.temporal_patch_size, c.patch_size, c.patch_size}});
  if (qwen3) {
    s.push_back({"patch_embed.proj.bias", {h}});
    s.push_back({"pos_embed.weight", {c.num_position_embeddings, h}});
  }
  for (int64_t b = 0; b < c.depth; ++b) {
    const std::string p = str_cat("blocks.", b, ".");
    for (const char* n : {"norm1", "norm2"}) {
      s.push_back({p + n + ".weight", {h}});
      if (qwen3) s.push_back({p + n + ".bias", {h}});
    }
    s.push_back({p + "attn.qkv.weight", {3 * h, h}});
    s.push_back({p + "attn.qkv.bias", {3 * h}});
    s.push_back({p + "attn.proj.weight", {h, h}});
    s.push_back({p + "attn.proj.bias", {h}});
    if (qwen3) {
      s.push_back({p + "mlp.linear_fc1.weight", {i, h}});
      s.push_back({p + "mlp.linear_fc1.bias", {i}});
      s.push_back({p + "mlp.linear_fc2.weight", {h, i}});
      s.push_back({p + "mlp.linear_fc2.bias", {h}});
    } else {
      for (const char* n : {"gate_proj", "up_proj"}) {
        s.push_back({p + "mlp." + n + ".weight", {i, h}});
        s.push_back({p + "mlp." + n + ".bias", {i}});
      }
      s.push_back({p + "mlp.down_proj.weight", {h, i}});
      s.push_back({p + "mlp.down_proj.bias", {h}});
    }
  }
  auto merger = [&](const std::string& p, bool after_shuffle) {
    const int64_t norm = after_shuffle ? merged : h;
    s.push_back({p + "norm.weight", {norm}});
    s.push_back({p + "norm.bias", {norm}});
    s.push_back({p + "linear_fc1.weight", {merged, merged}});
    s.push_back({p + "linear_fc1.bias", {merged}});
    s.push_back({p + "linear_fc2.weight", {c.out_hidden_size, merged}});
    s.push_back({p + "linear_fc2.bias", {c.out_hidden_size}});
  };
  if (qwen3) {
    merger("merger.", false);
    for (size_t k = 0; k < c.deepstack_visual_indexes.size(); ++k)
      merger(str_cat("deepstack_merger_list.", k, "."), true);
  } else {
    s.push_back({"merger.ln_q.weight", {h}});
    s.push_back({"merger.mlp.0.weight", {merged, merged}});
    s.push_back({"merger.mlp.0.bias", {merged}});
    s.push_back({"merger.mlp.2.weight", {c.out_hidden_size, merged}});
    s.push_back({"merger.mlp.2.bias", {c.out_hidden_size}});
  }
  return s;
}

VisionTower VisionTower::load(const VisionConfig& config, const SafetensorsCheckpoint& ckpt,
                              const std::string& prefix, const LoadOptions& options) {
  auto tensor_options = at::TensorOptions().dtype(options.dtype).device(options.device);
  std::vector<std::pair<std::string, at::Tensor>> params;
  for (const auto& [name, shape] : param_shapes(config)) {
    const std::string full = prefix + name;
    RETAIN_CHECK(ckpt.contains(full), ckpt.where(), ": the vision tower needs tensor '", full,
                 "', which the checkpoint does not hold");
    const StTensorInfo& info = ckpt.info(full);
    RETAIN_CHECK(info.shape == shape, ckpt.where(), ": tensor '", full, "' has shape ",
                 at::IntArrayRef(info.shape), " but config.json's vision_config implies ",
                 at::IntArrayRef(shape));
    auto param = at::empty(shape, tensor_options);
    param.copy_(ckpt.tensor(full));
    params.emplace_back(name, param);
  }
  return assemble(config, std::move(params));
}

VisionTower VisionTower::random(const VisionConfig& config, const LoadOptions& options,
                                uint64_t seed) {
  auto tensor_options = at::TensorOptions().dtype(options.dtype).device(options.device);
  at::Generator generator = at::globalContext().defaultGenerator(options.device);
  {
    std::lock_guard<std::mutex> lock(generator.mutex());
    generator.set_current_seed(seed);
  }
  std::vector<std::pair<std::string, at::Tensor>> params;
  for (const auto& [name, shape] : param_shapes(config)) {
    const bool norm_weight = name.find("norm") != std::string::npos && name.size() > 7 &&
                             name.substr(name.size() - 7) == ".weight";
    const bool bias = name.size() > 5 && name.substr(name.size() - 5) == ".bias";
    at::Tensor p = norm_weight ? at::ones(shape, tensor_options)
                   : bias      ? at::zeros(shape, tensor_options)
                               : at::empty(shape, tensor_options).normal_(0.0, 0.02, generator);
    params.emplace_back(name, p);
  }
  return assemble(config, std::move(params));
}

VisionTower VisionTower::assemble(const VisionConfig& config,
                                  std::vector<std::pair<std::string, at::Tensor>> params) {
  VisionTower v;
  v.config_ = config;
  v.params_ = std::move(params);
  v.by_name_ = std::unordered_map<std::string, at::Tensor>(v.params_.begin(), v.params_.end());
  auto get = [&](const std::string& n) {
    auto it = v.by_name_.find(n);
    return it == v.by_name_.end() ? at::Tensor() : it->second;
  };
  auto merger = [&](const std::string& p, bool after_shuffle) {
    return Merger{get(p + "norm.weight"),
                  get(p + "norm.bias"),
                  get(p + "linear_fc1.weight"),
                  get(p + "linear_fc1.bias"),
                  get(p + "linear_fc2.weight"),
                  get(p + "linear_fc2.bias"),
                  after_shuffle};
  };
  if (config.family == VisionFamily::kQwen3) {
    v.merger_ = merger("merger.", false);
    for (size_t k = 0; k < config.deepstack_visual_indexes.size(); ++k)
      v.deepstack_mergers_.push_back(merger(str_cat("deepstack_merger_list.", k, "."), true));
  } else {
    v.merger_ = Merger{get("merger.ln_q.weight"),
                       {},
                       get("merger.mlp.0.weight"),
                       get("merger.mlp.0.bias"),
                       get("merger.mlp.2.weight"),
                       get("merger.mlp.2.bias"),
                       false};
  }
  return v;
}

at::Tensor VisionTower::norm(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b) const {
  if (config_.family == VisionFamily::kQwen3) return at::layer_norm(x, {x.size(-1)}, w, b, 1e-6);
  return rms_norm(x, w, 1e-6);
}

at::Tensor VisionTower::apply_merger(const Merger& m, const at::Tensor& x) const {
  const int64_t merged = config_.hidden_size * config_.merge_unit();
  at::Tensor h = m.norm_after_shuffle ? norm(x.reshape({-1, merged}), m.norm_w, m.norm_b)
                                      : norm(x, m.norm_w, m.norm_b).reshape({-1, merged});
  // nn.GELU(): the exact (erf) GELU, whatever the blocks use.
  return at::linear(at::gelu(at::linear(h, m.fc1_w, m.fc1_b)), m.fc2_w, m.fc2_b);
}

at::Tensor VisionTower::block(int64_t i, const at::Tensor& x, const at::Tensor& cos,
                              const at::Tensor& sin, const std::vector<int64_t>& segments) const {
  const VisionConfig& c = config_;
  const std::string p = str_cat("blocks.", i, ".");
  auto w = [&](const std::string& n) { return by_name_.at(p + n); };
  auto b = [&](const std::string& n) {
    auto it = by_name_.find(p + n);
    return it == by_name_.end() ? at::Tensor() : it->second;
  };
  const int64_t n = x.size(0), heads = c.num_heads, hd = c.head_dim();
  auto h = norm(x, w("norm1.weight"), b("norm1.bias"));
  auto qkv = at::linear(h, w("attn.qkv.weight"), w("attn.qkv.bias"))
                 .reshape({n, 3, heads, hd})
                 .permute({1, 0, 2, 3});                           // (3, N, heads, hd)
  auto q = rotate(qkv[0], cos, sin).transpose(0, 1).unsqueeze(0);  // (1, heads, N, hd)
  auto k = rotate(qkv[1], cos, sin).transpose(0, 1).unsqueeze(0);
  auto v = qkv[2].transpose(0, 1).unsqueeze(0);
  // Attention never crosses a segment (an image, or a window of one). Consecutive segments of
  // equal length (most windows) run as one batch of attention calls.
  std::vector<at::Tensor> outs;
  int64_t start = 0;
  const double scale = 1.0 / std::sqrt(static_cast<double>(hd));
  for (size_t i = 0; i < segments.size();) {
    const int64_t len = segments[i];
    size_t j = i;
    while (j < segments.size() && segments[j] == len) ++j;
    const auto count = static_cast<int64_t>(j - i);
    // (1, heads, count * len, hd) -> (count, heads, len, hd)
    auto batch = [&](const at::Tensor& t) {
      return t.narrow(2, start, count * len).view({heads, count, len, hd}).transpose(0, 1);
    };
    auto o = at::scaled_dot_product_attention(batch(q), batch(k), batch(v), {}, 0.0, false, scale);
    outs.push_back(o.transpose(0, 1).reshape({1, heads, count * len, hd}));
    start += count * len;
    i = j;
  }
  auto a = at::cat(outs, 2).squeeze(0).transpose(0, 1).reshape({n, c.hidden_size});
  auto out = x + at::linear(a, w("attn.proj.weight"), w("attn.proj.bias"));
  auto h2 = norm(out, w("norm2.weight"), b("norm2.bias"));
  at::Tensor mlp;
  if (c.family == VisionFamily::kQwen3) {
    mlp = at::linear(activate(c.activation,
                              at::linear(h2, w("mlp.linear_fc1.weight"), w("mlp.linear_fc1.bias"))),
                     w("mlp.linear_fc2.weight"), w("mlp.linear_fc2.bias"));
  } else {
    auto gate =
        activate(c.activation, at::linear(h2, w("mlp.gate_proj.weight"), w("mlp.gate_proj.bias")));
    mlp = at::linear(gate * at::linear(h2, w("mlp.up_proj.weight"), w("mlp.up_proj.bias")),
                     w("mlp.down_proj.weight"), w("mlp.down_proj.bias"));
  }
  return out + mlp;
}

at::Tensor VisionTower::learned_positions(const std::vector<ImageGrid>& grids) const {
  // transformers' bilinear resampling of the side x side table with aligned corners, as
  // per-patch taps and weights computed in fp32 (the same operations, so the same rounding).
  const at::Tensor& table = by_name_.at("pos_embed.weight");
  const auto side = static_cast<int64_t>(std::llround(std::sqrt(table.size(0))));
  const int64_t merge = config_.spatial_merge_size;
  auto [rows, cols] = patch_rows_cols(grids, merge);
  std::vector<int64_t> heights, widths;
  for (const auto& g : grids)
    for (int64_t k = 0; k < g.patches(); ++k) {
      heights.push_back(g.h);
      widths.push_back(g.w);
    }
  const at::Device dev = table.device();
  auto axis = [&](const std::vector<int64_t>& index, const std::vector<int64_t>& size) {
    auto idx = longs(index, dev).to(at::kFloat);
    auto src = idx * static_cast<double>(side - 1) / at::clamp(longs(size, dev) - 1, 1);
    auto floor = at::floor(src);
    auto offsets = at::arange(0, 2, at::TensorOptions().dtype(at::kLong).device(dev));
    auto taps = (floor.to(at::kLong).unsqueeze(1) + offsets).clamp(0, side - 1);
    auto distance = (src.unsqueeze(1) - floor.unsqueeze(1) - offsets).abs();
    return std::pair{taps, (1 - distance).clamp_min(0)};
  };
  auto [h_taps, h_w] = axis(rows, heights);
  auto [w_taps, w_w] = axis(cols, widths);
  auto indices = (h_taps.unsqueeze(2) * side + w_taps.unsqueeze(1)).reshape({-1, 4});
  auto weights = (h_w.unsqueeze(2) * w_w.unsqueeze(1)).reshape({-1, 4});
  return (at::embedding(table, indices) * weights.unsqueeze(-1)).sum(1);
}

VisionOutput VisionTower::forward(const at::Tensor& pixel_values,
                                  const std::vector<ImageGrid>& grids) const {
  const VisionConfig& c = config_;
  const int64_t merge = c.spatial_merge_size, unit = c.merge_unit();
  int64_t total = 0;
  for (const auto& g : grids) {
    RETAIN_CHECK(g.t > 0 && g.h > 0 && g.w > 0 && g.h % merge == 0 && g.w % merge == 0,
                 "vision tower: a patch grid of ", g.t, "x", g.h, "x", g.w,
                 " is not a positive multiple of the merge size ", merge);
    total += g.patches();
  }
  RETAIN_CHECK(pixel_values.dim() == 2 && pixel_values.size(0) == total &&
                   pixel_values.size(1) == c.patch_values(),
               "vision tower: expected pixel values of shape (", total, ", ", c.patch_values(),
               ") for the given grids, found ", pixel_values.sizes());
  const at::Tensor& proj = by_name_.at("patch_embed.proj.weight");
  const at::Device dev = proj.device();
  auto pixels = pixel_values.to(dev, proj.scalar_type())
                    .view({-1, c.in_channels, c.temporal_patch_size, c.patch_size, c.patch_size});
  // The patch embedding is a 3-D convolution whose kernel covers the whole patch, as in
  // transformers (the same kernel, so the same rounding as a convolution there).
  auto bias_it = by_name_.find("patch_embed.proj.bias");
  at::Tensor x =
      at::conv3d(pixels, proj, bias_it == by_name_.end() ? at::Tensor() : bias_it->second,
                 {c.temporal_patch_size, c.patch_size, c.patch_size})
          .view({-1, c.hidden_size});
  if (c.family == VisionFamily::kQwen3) x = x + learned_positions(grids).to(x.scalar_type());

  // 2-D rotary: the first half of each head's rotated pairs follows the row, the second the
  // column; frequencies over head_dim / 2 as transformers' axial rotary.
  auto [rows, cols] = patch_rows_cols(grids, merge);
  const int64_t quarter = c.head_dim() / 2;
  auto exponents =
      at::arange(0, quarter, 2, at::TensorOptions().dtype(at::kLong).device(dev)).to(at::kFloat) /
      static_cast<double>(quarter);
  auto inv_freq = 1.0 / at::pow(c.rope_theta, exponents);
  auto angles_h = longs(rows, dev).to(at::kFloat).unsqueeze(-1) * inv_freq;
  auto angles_w = longs(cols, dev).to(at::kFloat).unsqueeze(-1) * inv_freq;
  auto angles = at::cat({angles_h, angles_w}, -1);
  angles = at::cat({angles, angles}, -1);                                       // (N, head_dim)
  at::Tensor cos = angles.cos().unsqueeze(1), sin = angles.sin().unsqueeze(1);  // (N, 1, hd)

  std::vector<int64_t> per_image;
  for (const auto& g : grids)
    for (int64_t t = 0; t < g.t; ++t) per_image.push_back(g.h * g.w);

  VisionOutput out;
  if (c.family == VisionFamily::kQwen2_5) {
    auto [order, windows] = window_order(grids, merge, c.window_size / merge / c.patch_size);
    auto index = longs(order, dev);
    auto permute = [&](const at::Tensor& t) {
      return t.reshape({total / unit, unit, -1})
          .index_select(0, index)
          .reshape({total, t.size(-1)});
    };
    x = permute(x);
    cos = permute(cos.squeeze(1)).unsqueeze(1);
    sin = permute(sin.squeeze(1)).unsqueeze(1);
    for (int64_t b = 0; b < c.depth; ++b) {
      const bool full = std::find(c.fullatt_block_indexes.begin(), c.fullatt_block_indexes.end(),
                                  b) != c.fullatt_block_indexes.end();
      x = block(b, x, cos, sin, full ? per_image : windows);
    }
    auto merged = apply_merger(merger_, x);
    out.embeds = merged.index_select(0, at::argsort(index));
  } else {
    for (int64_t b = 0; b < c.depth; ++b) {
      x = block(b, x, cos, sin, per_image);
      auto it = std::find(c.deepstack_visual_indexes.begin(), c.deepstack_visual_indexes.end(), b);
      if (it != c.deepstack_visual_indexes.end())
        out.deepstack.push_back(
            apply_merger(deepstack_mergers_[it - c.deepstack_visual_indexes.begin()], x));
    }
    out.embeds = apply_merger(merger_, x);
  }
  return out;
}

}  // namespace retain
