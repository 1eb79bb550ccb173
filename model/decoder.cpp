#include "model/decoder.h"

#include <algorithm>

#include <ATen/core/grad_mode.h>

#include <cmath>
#include <mutex>
#include <unordered_map>
#include <unordered_set>

#include "core/activation_checkpoint.h"
#include "core/error.h"
#include "core/log.h"
#include "core/safetensors.h"
#include "dist/collectives.h"
#include "kernels/fused_ops.h"
#include "model/activation.h"
#include "model/attention.h"
#include "model/projection.h"
#include "model/rope.h"
#include "model/tensor_parallel.h"
#include "model/vision/mrope.h"
#include "model/vision/vision_tower.h"

namespace retain {

std::vector<ParamSpec> decoder_param_specs(const ModelConfig& c) {
  using K = ParamSpec::Kind;
  const int64_t d = c.hidden_size, q_out = c.num_heads * c.head_dim,
                kv_out = c.num_kv_heads * c.head_dim;
  std::vector<ParamSpec> specs;
  specs.push_back({c.weight_prefix + "embed_tokens.weight", {c.vocab_size, d}, K::kEmbedding});
  for (int64_t l = 0; l < c.num_layers; ++l) {
    std::string p = str_cat(c.weight_prefix, "layers.", l, ".");
    specs.push_back({p + "input_layernorm.weight", {d}, K::kNorm});
    for (auto [name, out] : {std::pair{"q_proj", q_out}, {"k_proj", kv_out}, {"v_proj", kv_out}}) {
      specs.push_back({p + "self_attn." + name + ".weight", {out, d}, K::kMatrix});
      if (c.qkv_bias) specs.push_back({p + "self_attn." + name + ".bias", {out}, K::kBias});
    }
    specs.push_back({p + "self_attn.o_proj.weight", {d, q_out}, K::kMatrix});
    if (c.o_bias) specs.push_back({p + "self_attn.o_proj.bias", {d}, K::kBias});
    if (c.qk_norm) {
      specs.push_back({p + "self_attn.q_norm.weight", {c.head_dim}, K::kNorm});
      specs.push_back({p + "self_attn.k_norm.weight", {c.head_dim}, K::kNorm});
    }
    specs.push_back({p + "post_attention_layernorm.weight", {d}, K::kNorm});
    for (auto [name, shape] : {std::pair{"gate_proj", std::vector<int64_t>{c.intermediate_size, d}},
                               {"up_proj", {c.intermediate_size, d}},
                               {"down_proj", {d, c.intermediate_size}}}) {
      specs.push_back({p + "mlp." + name + ".weight", shape, K::kMatrix});
      if (c.mlp_bias) specs.push_back({p + "mlp." + name + ".bias", {shape[0]}, K::kBias});
    }
  }
  specs.push_back({c.weight_prefix + "norm.weight", {d}, K::kNorm});
  if (!c.tie_word_embeddings) specs.push_back({"lm_head.weight", {c.vocab_size, d}, K::kMatrix});
  return specs;
}

namespace {

// Which slice of a whole-model tensor of shape `whole` a shard of shape `local` is: the one dim
// they differ in (rows of column-parallel, columns of row-parallel projections), or -1 (a
// replicated tensor).
int64_t sharded_dim(const std::vector<int64_t>& whole, const std::vector<int64_t>& local) {
  for (size_t d = 0; d < whole.size(); ++d)
    if (whole[d] != local[d]) return static_cast<int64_t>(d);
  return -1;
}

}  // namespace

Decoder Decoder::load(const fs::path& model_dir, const LoadOptions& options) {
  ModelConfig config = ModelConfig::load(model_dir);
  const ModelConfig whole = config;
  if (options.tensor_parallel)
    config = config.shard(options.tensor_parallel->rank(), options.tensor_parallel->world(),
                          (model_dir / "config.json").string());
  auto ckpt = SafetensorsCheckpoint::open_dir(model_dir);
  std::string vision_prefix;
  if (config.multimodal) {
    // transformers 5 saves model.language_model.* and model.visual.*; Qwen2.5-VL's first
    // release has model.* and visual.*.
    const bool legacy = !ckpt.contains("model.language_model.embed_tokens.weight") &&
                        ckpt.contains("model.embed_tokens.weight");
    config.weight_prefix = legacy ? "model." : "model.language_model.";
    vision_prefix = legacy ? "visual." : "model.visual.";
  }
  auto tensor_options = at::TensorOptions().dtype(options.dtype).device(options.device);
  std::vector<std::pair<std::string, at::Tensor>> params;
  ModelConfig whole_named = whole;
  whole_named.weight_prefix = config.weight_prefix;
  // The shard's specs and the whole model's come in the same order, name for name.
  const auto specs = decoder_param_specs(config), whole_specs = decoder_param_specs(whole_named);
  for (size_t i = 0; i < specs.size(); ++i) {
    const ParamSpec& spec = specs[i];
    const StTensorInfo& info = ckpt.info(spec.name);
    RETAIN_CHECK(info.shape == whole_specs[i].shape, ckpt.where(), ": tensor '", spec.name,
                 "' has shape ", at::IntArrayRef(info.shape), " but config.json implies ",
                 at::IntArrayRef(whole_specs[i].shape));
    // One copy, from the mapped file straight into the target dtype and device; a shard copies
    // only its slice (a view of the mapping).
    at::Tensor stored = ckpt.tensor(spec.name);
    const int64_t dim = sharded_dim(whole_specs[i].shape, spec.shape);
    if (dim >= 0)
      stored = stored.narrow(dim, spec.shape[static_cast<size_t>(dim)] * config.tp.rank,
                             spec.shape[static_cast<size_t>(dim)]);
    auto param = at::empty(spec.shape, tensor_options);
    param.copy_(stored);
    params.emplace_back(spec.name, param);
  }
  std::unordered_set<std::string> used{"lm_head.weight"};  // a tied head may still be stored
  for (const auto& [name, _] : params) used.insert(name);
  std::shared_ptr<const VisionTower> vision;
  if (config.multimodal) {
    vision = std::make_shared<const VisionTower>(
        VisionTower::load(config.multimodal->vision, ckpt, vision_prefix, options));
    for (const auto& [name, _] : vision->named_parameters()) used.insert(vision_prefix + name);
  }
  size_t unused = 0;
  for (const auto& name : ckpt.names()) unused += used.count(name) ? 0 : 1;
  if (unused > 0)
    log_warn(ckpt.where(), ": ", unused, " tensors are not used by the ", config.model_type,
             " decoder");
  Decoder m = assemble(std::move(config), options, std::move(params));
  m.vision_ = std::move(vision);
  return m;
}

Decoder Decoder::random(const ModelConfig& whole, const LoadOptions& options, uint64_t seed) {
  ModelConfig config = whole;
  if (options.tensor_parallel) {
    config = whole.shard(options.tensor_parallel->rank(), options.tensor_parallel->world(),
                         "init-model preset " + whole.model_type);
    seed += static_cast<uint64_t>(config.tp.rank);
  }
  auto tensor_options = at::TensorOptions().dtype(options.dtype).device(options.device);
  // The device's own generator, so a 4B model's weights are drawn where they live and never pass
  // through host memory; seeded here, so a run is repeatable on its device.
  at::Generator generator = at::globalContext().defaultGenerator(options.device);
  {
    std::lock_guard<std::mutex> lock(generator.mutex());
    generator.set_current_seed(seed);
  }
  std::vector<std::pair<std::string, at::Tensor>> params;
  for (const auto& spec : decoder_param_specs(config)) {
    at::Tensor param;
    switch (spec.kind) {
      case ParamSpec::Kind::kNorm:
        param = at::ones(spec.shape, tensor_options);
        break;
      case ParamSpec::Kind::kBias:
        param = at::zeros(spec.shape, tensor_options);
        break;
      default:
        param = at::empty(spec.shape, tensor_options).normal_(0.0, 0.02, generator);
    }
    params.emplace_back(spec.name, param);
  }
  Decoder m = assemble(config, options, std::move(params));
  if (config.multimodal)
    m.vision_ = std::make_shared<const VisionTower>(
        VisionTower::random(config.multimodal->vision, options, seed + 1));
  return m;
}

Decoder Decoder::assemble(ModelConfig config, const LoadOptions& options,
                          std::vector<std::pair<std::string, at::Tensor>> params) {
  Decoder m;
  m.config_ = std::move(config);
  m.options_ = options;
  m.tp_ = options.tensor_parallel;
  m.params_ = std::move(params);
  std::unordered_map<std::string, at::Tensor> by_name(m.params_.begin(), m.params_.end());
  auto get = [&](const std::string& name) {
    auto it = by_name.find(name);
    return it == by_name.end() ? at::Tensor() : it->second;
  };
  const std::string& prefix = m.config_.weight_prefix;
  m.embed_ = get(prefix + "embed_tokens.weight");
  m.final_norm_ = get(prefix + "norm.weight");
  if (m.config_.multimodal)
    m.mrope_axis_ =
        mrope_axis_of_frequency(*m.config_.multimodal, m.config_.head_dim, options.device);
  m.lm_head_ = m.config_.tie_word_embeddings ? m.embed_ : get("lm_head.weight");
  for (int64_t l = 0; l < m.config_.num_layers; ++l) {
    std::string p = str_cat(prefix, "layers.", l, ".");
    Layer layer;
    layer.input_norm = get(p + "input_layernorm.weight");
    layer.q_w = get(p + "self_attn.q_proj.weight");
    layer.q_b = get(p + "self_attn.q_proj.bias");
    layer.k_w = get(p + "self_attn.k_proj.weight");
    layer.k_b = get(p + "self_attn.k_proj.bias");
    layer.v_w = get(p + "self_attn.v_proj.weight");
    layer.v_b = get(p + "self_attn.v_proj.bias");
    layer.o_w = get(p + "self_attn.o_proj.weight");
    layer.o_b = get(p + "self_attn.o_proj.bias");
    layer.q_norm = get(p + "self_attn.q_norm.weight");
    layer.k_norm = get(p + "self_attn.k_norm.weight");
    layer.post_norm = get(p + "post_attention_layernorm.weight");
    layer.gate_w = get(p + "mlp.gate_proj.weight");
    layer.gate_b = get(p + "mlp.gate_proj.bias");
    layer.up_w = get(p + "mlp.up_proj.weight");
    layer.up_b = get(p + "mlp.up_proj.bias");
    layer.down_w = get(p + "mlp.down_proj.weight");
    layer.down_b = get(p + "mlp.down_proj.bias");
    m.layers_.push_back(std::move(layer));
  }
  if (options.fuse_projections) {
    std::unordered_map<std::string, size_t> index;
    for (size_t i = 0; i < m.params_.size(); ++i) index.emplace(m.params_[i].first, i);
    by_name.clear();  // so each layer's separate tensors are freed as it is fused
    for (int64_t l = 0; l < m.config_.num_layers; ++l)
      m.fuse_layer(m.layers_[static_cast<size_t>(l)], str_cat(prefix, "layers.", l, "."), index);
  }
  return m;
}

namespace {

// Whether these weights (and their biases: all or none) can be one product: 2-D, contiguous, one
// dtype and device, no gradient.
bool fusable(const std::vector<at::Tensor>& weights, const std::vector<at::Tensor>& biases) {
  for (const auto& w : weights)
    if (!w.defined() || w.dim() != 2 || !w.is_contiguous() || w.requires_grad() ||
        w.scalar_type() != weights[0].scalar_type() || w.device() != weights[0].device() ||
        w.size(1) != weights[0].size(1))
      return false;
  const bool any_bias =
      std::any_of(biases.begin(), biases.end(), [](auto& b) { return b.defined(); });
  const bool all_bias =
      std::all_of(biases.begin(), biases.end(), [](auto& b) { return b.defined(); });
  return any_bias == all_bias;
}

// Rows [offset, offset + n) of `fused`, for each of `parts` in turn.
void view_parts(const at::Tensor& fused, std::vector<at::Tensor*> parts) {
  int64_t offset = 0;
  for (at::Tensor* part : parts) {
    const int64_t n = part->size(0);
    *part = fused.narrow(0, offset, n);
    offset += n;
  }
}

}  // namespace

void Decoder::fuse_layer(Layer& layer, const std::string& p,
                         const std::unordered_map<std::string, size_t>& index) {
  auto rebind = [&](const std::string& name, const at::Tensor& view) {
    if (view.defined()) params_[index.at(name)].second = view;
  };
  if (fusable({layer.q_w, layer.k_w, layer.v_w}, {layer.q_b, layer.k_b, layer.v_b})) {
    layer.qkv_w = at::cat({layer.q_w, layer.k_w, layer.v_w}, 0);
    view_parts(layer.qkv_w, {&layer.q_w, &layer.k_w, &layer.v_w});
    if (layer.q_b.defined()) {
      layer.qkv_b = at::cat({layer.q_b, layer.k_b, layer.v_b}, 0);
      view_parts(layer.qkv_b, {&layer.q_b, &layer.k_b, &layer.v_b});
    }
    rebind(p + "self_attn.q_proj.weight", layer.q_w);
    rebind(p + "self_attn.k_proj.weight", layer.k_w);
    rebind(p + "self_attn.v_proj.weight", layer.v_w);
    rebind(p + "self_attn.q_proj.bias", layer.q_b);
    rebind(p + "self_attn.k_proj.bias", layer.k_b);
    rebind(p + "self_attn.v_proj.bias", layer.v_b);
  }
  if (fusable({layer.gate_w, layer.up_w}, {layer.gate_b, layer.up_b})) {
    layer.gate_up_w = at::cat({layer.gate_w, layer.up_w}, 0);
    view_parts(layer.gate_up_w, {&layer.gate_w, &layer.up_w});
    if (layer.gate_b.defined()) {
      layer.gate_up_b = at::cat({layer.gate_b, layer.up_b}, 0);
      view_parts(layer.gate_up_b, {&layer.gate_b, &layer.up_b});
    }
    rebind(p + "mlp.gate_proj.weight", layer.gate_w);
    rebind(p + "mlp.gate_proj.bias", layer.gate_b);
    rebind(p + "mlp.up_proj.weight", layer.up_w);
    rebind(p + "mlp.up_proj.bias", layer.up_b);
  }
}

bool Decoder::projections_fused() const {
  return !layers_.empty() &&
         (layers_.front().qkv_w.defined() || layers_.front().gate_up_w.defined());
}

int64_t Decoder::weight_bytes() const {
  int64_t bytes = 0;
  for (const auto& [_, t] : params_) bytes += t.numel() * static_cast<int64_t>(t.element_size());
  return bytes;
}

at::Tensor Decoder::rms_norm(const at::Tensor& x, const at::Tensor& weight) const {
  return retain::rms_norm(x, weight, config_.rms_norm_eps);  // one kernel when no grad is asked
}

at::Tensor Decoder::mlp(const Layer& layer, const at::Tensor& x) const {
  at::Tensor gate, up;
  if (layer.gate_up_w.defined()) {
    const auto gate_up = project(x, layer.gate_up_w, layer.gate_up_b);
    const int64_t n = layer.gate_w.size(0);
    gate = gate_up.narrow(-1, 0, n);
    up = gate_up.narrow(-1, n, gate_up.size(-1) - n);
  } else {
    gate = project(x, layer.gate_w, layer.gate_b);
    up = project(x, layer.up_w, layer.up_b);
  }
  switch (config_.activation) {
    case Activation::kSilu:
      gate = at::silu(gate);
      break;
    case Activation::kGelu:
      gate = at::gelu(gate);
      break;
    case Activation::kGeluTanh:
      gate = at::gelu(gate, "tanh");
      break;
    case Activation::kRelu:
      gate = at::relu(gate);
      break;
  }
  return row_parallel_project(gate * up, layer.down_w, layer.down_b);
}

at::Tensor Decoder::column_parallel_input(const at::Tensor& h) const {
  return tp_ ? tensor_parallel_enter(*tp_, h) : h;
}

at::Tensor Decoder::row_parallel_project(const at::Tensor& a, const at::Tensor& weight,
                                         const at::Tensor& bias) const {
  if (!tp_) return project(a, weight, bias);
  // The partial products are summed, then the bias is added once.
  auto out = tensor_parallel_reduce(*tp_, project(a, weight));
  return bias.defined() ? out + bias : out;
}

at::Tensor Decoder::run_layer(int64_t l, const at::Tensor& x, const at::Tensor& cos,
                              const at::Tensor& sin, const at::Tensor& positions,
                              const ForwardContext& context) const {
  const ModelConfig& c = config_;
  const Layer& layer = layers_[l];
  const int64_t b = x.size(0), t = x.size(1);
  const auto h = column_parallel_input(rms_norm(x, layer.input_norm));
  at::Tensor q, k, v;
  if (layer.qkv_w.defined()) {
    // One product, split by columns: q and k go through kernels that take any strides (the
    // norms copy, the rotary writes anew); v is copied out, as the caches' appends expect the
    // layout a separate product gives.
    const auto parts =
        project(h, layer.qkv_w, layer.qkv_b)
            .split_with_sizes({layer.q_w.size(0), layer.k_w.size(0), layer.v_w.size(0)}, -1);
    q = parts[0];
    k = parts[1];
    v = parts[2].contiguous();
  } else {
    q = project(h, layer.q_w, layer.q_b);
    k = project(h, layer.k_w, layer.k_b);
    v = project(h, layer.v_w, layer.v_b);
  }
  q = q.view({b, t, c.num_heads, c.head_dim});
  k = k.view({b, t, c.num_kv_heads, c.head_dim});
  v = v.view({b, t, c.num_kv_heads, c.head_dim});
  if (c.qk_norm) {
    q = rms_norm(q, layer.q_norm);
    k = rms_norm(k, layer.k_norm);
  }
  const at::Tensor q_before_rope = q.transpose(1, 2);  // (B, H, T, D), a view
  q = apply_rope(q_before_rope, cos, sin);
  k = apply_rope(k.transpose(1, 2), cos, sin);  // (B, Hk, T, D)
  v = v.transpose(1, 2);
  at::Tensor a;
  const LayerTensors tensors{l, h, q, k, v, positions, q_before_rope, c.kv_head_offset()};
  if (context.hook != nullptr) {
    a = context.hook->attend(tensors);
  } else {
    const double scale = 1.0 / std::sqrt(static_cast<double>(c.head_dim));
    if (context.cache != nullptr) context.cache->observe(tensors);
    KvEntries entries = context.cache != nullptr ? context.cache->append(l, k, v, positions)
                                                 : KvEntries{k, v, positions.unsqueeze(1)};
    a = context.cache != nullptr
            ? context.cache->attend(l, q, positions, entries, scale, c.sliding_window[l])
            : attention(q, entries.keys, entries.values, positions, entries.positions, scale,
                        c.sliding_window[l]);
  }
  a = a.transpose(1, 2).reshape({b, t, c.num_heads * c.head_dim});
  const auto out = x + row_parallel_project(a, layer.o_w, layer.o_b);
  return out + mlp(layer, column_parallel_input(rms_norm(out, layer.post_norm)));
}

at::Tensor Decoder::run_layer_checkpointed(int64_t l, const at::Tensor& x, const at::Tensor& cos,
                                           const at::Tensor& sin, const at::Tensor& positions,
                                           const ForwardContext& context) const {
  // Captured by value: the backward pass re-runs this after forward_hidden has returned (the hook
  // itself must outlive the backward pass).
  auto outputs =
      checkpoint(CheckpointFn([this, l, cos, sin, positions, context](const at::Tensor& in) {
                   std::vector<at::Tensor> out{run_layer(l, in, cos, sin, positions, context)};
                   if (context.hook != nullptr)
                     for (auto& t : context.hook->layer_outputs(l)) out.push_back(t);
                   return out;
                 }),
                 x);
  if (context.hook != nullptr)
    context.hook->set_layer_outputs(l, std::vector<at::Tensor>(outputs.begin() + 1, outputs.end()));
  return outputs[0];
}

at::Tensor Decoder::forward_hidden(const at::Tensor& input_ids, const at::Tensor& positions,
                                   const ForwardContext& context) const {
  const ModelConfig& c = config_;
  RETAIN_CHECK(input_ids.dim() == 2 && positions.sizes() == input_ids.sizes(),
               "Decoder::forward: expected input_ids and positions of shape (B, T), found ",
               input_ids.sizes(), " and ", positions.sizes());
  RETAIN_CHECK(context.hook == nullptr || context.cache == nullptr,
               "Decoder::forward: a layer hook and a KV cache cannot be used together");
  if (tp_ && context.cache != nullptr) context.cache->bind_tensor_parallel(tp_.get());
  auto ids = input_ids.to(options_.device, at::kLong);
  auto pos = positions.to(options_.device, at::kLong);
  if (!context.ids_checked) {
    auto [lo, hi] = at::aminmax(ids);
    RETAIN_CHECK(lo.item<int64_t>() >= 0 && hi.item<int64_t>() < c.vocab_size,
                 "Decoder::forward: token ids must lie in [0, ", c.vocab_size, "), found [",
                 lo.item<int64_t>(), ", ", hi.item<int64_t>(), "]");
  }

  // Dynamic NTK depends on the longest position of the call; other types need no sync here.
  int64_t seq_len = c.rope.type == RopeType::kDynamic ? pos.max().item<int64_t>() + 1 : 0;
  auto freqs = rope_frequencies(c, seq_len, options_.device);
  const MultimodalInputs* mm = context.multimodal;
  RETAIN_CHECK(mm == nullptr || c.multimodal, "Decoder::forward: multimodal inputs given to ",
               c.model_type, ", a text-only model");
  at::Tensor cos, sin;
  if (mm != nullptr && (mm->rope_positions.defined() || mm->rope_delta.defined())) {
    at::Tensor pos3 = mm->rope_positions.defined()
                          ? mm->rope_positions.to(options_.device, at::kLong)
                          : (pos + mm->rope_delta.to(options_.device, at::kLong))
                                .unsqueeze(0)
                                .expand({3, -1, -1});
    RETAIN_CHECK(pos3.size(1) == pos.size(0) && pos3.size(2) == pos.size(1),
                 "Decoder::forward: rope positions of shape ", pos3.sizes(), " for tokens ",
                 pos.sizes());
    std::tie(cos, sin) = mrope_cos_sin(freqs, pos3, mrope_axis_, options_.dtype);
  } else {
    // Text only: the three axes are equal, and multimodal rotary reduces to the plain one.
    std::tie(cos, sin) = rope_cos_sin(freqs, pos, options_.dtype);
  }

  auto x = at::embedding(embed_, ids);  // (B, T, d)
  at::Tensor visual_mask;
  if (mm != nullptr && mm->visual_mask.defined()) {
    visual_mask = mm->visual_mask.to(options_.device, at::kBool);
    const int64_t n = visual_mask.sum().item<int64_t>();
    RETAIN_CHECK(n == 0 || (mm->visual_embeds.defined() && mm->visual_embeds.size(0) == n &&
                            mm->visual_embeds.size(-1) == c.hidden_size),
                 "Decoder::forward: ", n, " image tokens but visual embeddings of shape ",
                 mm->visual_embeds.defined() ? mm->visual_embeds.sizes() : at::IntArrayRef{});
    if (n > 0)
      x = x.masked_scatter(visual_mask.unsqueeze(-1),
                           mm->visual_embeds.to(options_.device, x.scalar_type()));
    else
      visual_mask = at::Tensor();
  }
  // DeepStack (Qwen3-VL): after decoder layer l, the image tokens get level l's features.
  auto add_deepstack = [&](int64_t l, const at::Tensor& h) {
    if (!visual_mask.defined() || l >= static_cast<int64_t>(mm->deepstack.size())) return h;
    auto out = h.clone();
    out.index_put_({visual_mask},
                   h.index({visual_mask}) + mm->deepstack[l].to(options_.device, h.scalar_type()));
    return out;
  };
  // What a checkpointed layer re-runs with in the backward pass, after forward_hidden has returned:
  // the multimodal inputs (the caller's, gone by then) are not part of it; a layer never reads
  // them (embeddings and DeepStack are applied here, outside the layers).
  ForwardContext layer_context = context;
  layer_context.multimodal = nullptr;
  const bool checkpointed = context.checkpoint_layers && at::GradMode::is_enabled();
  for (int64_t l = 0; l < c.num_layers; ++l) {
    x = checkpointed ? run_layer_checkpointed(l, x, cos, sin, pos, layer_context)
                     : run_layer(l, x, cos, sin, pos, context);
    x = add_deepstack(l, x);
  }
  if (context.cache != nullptr) context.cache->end_step();
  return rms_norm(x, final_norm_);
}

at::Tensor Decoder::logits(const at::Tensor& hidden) const {
  return project(hidden, lm_head_).to(at::kFloat);
}

at::Tensor positions_from_attention_mask(const at::Tensor& attention_mask) {
  auto mask = attention_mask.to(at::kLong);
  return at::where(mask > 0, mask.cumsum(-1) - 1, at::full_like(mask, -1));
}

}  // namespace retain
