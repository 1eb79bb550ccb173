#include "model/decode_graph.h"

#include "core/error.h"

#if RETAIN_CUDA_GRAPHS
#include <ATen/cuda/CUDAEvent.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace retain {

#if RETAIN_CUDA_GRAPHS

namespace {

// Work queued on `waiter` from now on starts after what is queued on `done` so far.
void wait(const c10::cuda::CUDAStream& waiter, const c10::cuda::CUDAStream& done) {
  at::cuda::CUDAEvent event;
  event.record(done);
  event.block(waiter);
}

}  // namespace

struct DecodeGraph::Impl {
  const Decoder& model;
  KvCache& cache;
  at::Tensor tokens, positions;  // the step's inputs, at fixed device addresses
  at::Tensor logits;             // the captured step's output
  // Capture needs a stream other than the default one; replays run there too, after the inputs
  // were copied on the caller's stream.
  c10::cuda::CUDAStream stream;
  std::unique_ptr<at::cuda::CUDAGraph> graph;
  bool warmed_up = false;
  int64_t captures = 0, replays = 0;

  Impl(const Decoder& m, KvCache& c, int64_t batch)
      : model(m),
        cache(c),
        tokens(at::zeros({batch, 1}, at::TensorOptions(m.device()).dtype(at::kLong))),
        positions(at::full({batch, 1}, -1, tokens.options())),
        stream(c10::cuda::getStreamFromPool(/*isHighPriority=*/false, m.device().index())) {}

  at::Tensor run_step() const {
    ForwardContext context{&cache};
    context.ids_checked = true;  // a device-to-host read cannot be captured
    return model.logits(model.forward_hidden(tokens, positions, context).select(1, 0));
  }
};

bool DecodeGraph::available(const Decoder& model) {
  // A tensor-parallel step all-reduces through c10d between kernels: replayed eagerly (a graph
  // would need NCCL's capture-safe collectives, not built here).
  return model.device().is_cuda() && model.config().rope.type != RopeType::kDynamic &&
         model.config().tp.size == 1;
}

DecodeGraph::DecodeGraph(const Decoder& model, KvCache& cache, int64_t batch)
    : impl_(std::make_unique<Impl>(model, cache, batch)) {
  RETAIN_CHECK(available(model), "DecodeGraph: CUDA graphs need a CUDA model without dynamic RoPE");
}

DecodeGraph::~DecodeGraph() = default;

at::Tensor DecodeGraph::step(const at::Tensor& tokens, const at::Tensor& positions) {
  Impl& s = *impl_;
  RETAIN_CHECK(tokens.sizes() == s.tokens.sizes() && positions.sizes() == s.positions.sizes(),
               "DecodeGraph: expected tokens and positions of shape ", s.tokens.sizes(), ", found ",
               tokens.sizes(), " and ", positions.sizes());
  s.tokens.copy_(tokens);
  s.positions.copy_(positions);
  auto caller = c10::cuda::getCurrentCUDAStream(s.model.device().index());
  wait(s.stream, caller);
  at::Tensor out;
  {
    c10::cuda::CUDAStreamGuard guard(s.stream);
    if (!s.warmed_up) {
      // The first step runs eagerly on the capture stream: lazy set-up (cuBLAS workspaces, kernel
      // attributes) happens here rather than inside a capture.
      out = s.run_step();
      s.warmed_up = true;
    } else {
      if (!s.graph) {
        auto graph = std::make_unique<at::cuda::CUDAGraph>();
        graph->capture_begin();
        try {
          s.logits = s.run_step();
        } catch (...) {
          // End the capture the failed step left open (the stream is unusable otherwise) and
          // keep no half-captured graph: the next step captures again.
          try {
            graph->capture_end();
          } catch (...) {
          }
          throw;
        }
        graph->capture_end();
        s.graph = std::move(graph);
        ++s.captures;
      }
      s.graph->replay();  // capture records the step without running it
      ++s.replays;
      out = s.logits;
    }
  }
  wait(caller, s.stream);
  // Host-side bookkeeping and eviction, outside the graph; moved buffers mean a new capture. A
  // failure part-way may have moved some: drop the graph either way.
  try {
    if (s.cache.end_static_step()) s.graph.reset();
  } catch (...) {
    s.graph.reset();
    throw;
  }
  return out;
}

void DecodeGraph::recapture() { impl_->graph.reset(); }

int64_t DecodeGraph::captures() const { return impl_->captures; }
int64_t DecodeGraph::replays() const { return impl_->replays; }

#else  // built without CUDA: never available

struct DecodeGraph::Impl {};

bool DecodeGraph::available(const Decoder& /*model*/) { return false; }

DecodeGraph::DecodeGraph(const Decoder& /*model*/, KvCache& /*cache*/, int64_t /*batch*/) {
  RETAIN_CHECK(false, "DecodeGraph: this build has no CUDA support");
}

DecodeGraph::~DecodeGraph() = default;

at::Tensor DecodeGraph::step(const at::Tensor& /*tokens*/, const at::Tensor& /*positions*/) {
  RETAIN_CHECK(false, "DecodeGraph: this build has no CUDA support");
  return {};
}

void DecodeGraph::recapture() {}

int64_t DecodeGraph::captures() const { return 0; }
int64_t DecodeGraph::replays() const { return 0; }

#endif

}  // namespace retain
