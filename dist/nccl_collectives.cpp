// The CUDA collectives: c10d::ProcessGroupNCCL over the run's TCPStore. Compiled only in CUDA
// builds (RETAIN_WITH_NCCL).
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>

#include "core/error.h"
#include "dist/collectives.h"

namespace retain {

namespace {

class NcclCollectives : public Collectives {
 public:
  NcclCollectives(const c10::intrusive_ptr<c10d::Store>& store, int rank, int world,
                  const at::Device& device, std::chrono::seconds timeout)
      : rank_(rank), world_(world), device_(device) {
    auto options = c10d::ProcessGroupNCCL::Options::create();
    options->timeout = timeout;
    group_ = c10::make_intrusive<c10d::ProcessGroupNCCL>(store, rank, world, options);
  }
  int rank() const override { return rank_; }
  int world() const override { return world_; }
  std::string name() const override { return str_cat("c10d ProcessGroupNCCL, ", world_, " ranks"); }
  void broadcast(std::vector<at::Tensor>& tensors, int root) override {
    c10d::BroadcastOptions options;
    options.rootRank = root;
    for (auto& t : tensors) {
      std::vector<at::Tensor> one{on_device(t)};
      group_->broadcast(one, options)->wait();
      if (!one[0].is_same(t)) t.detach().copy_(one[0]);
    }
  }
  void all_reduce_sum(at::Tensor& tensor) override {
    std::vector<at::Tensor> one{on_device(tensor)};
    group_->allreduce(one)->wait();
    if (!one[0].is_same(tensor)) tensor.copy_(one[0]);
  }
  void barrier() override { group_->barrier()->wait(); }

 private:
  // NCCL reduces device memory only: host tensors (token counts, statistics, the sizes of a
  // gather) travel through a contiguous device copy; device tensors go as they are (contiguous).
  at::Tensor on_device(const at::Tensor& t) const {
    if (t.device() == device_ && t.is_contiguous()) return t;
    return t.detach().to(device_).contiguous();
  }

  int rank_, world_;
  at::Device device_;
  c10::intrusive_ptr<c10d::ProcessGroupNCCL> group_;
};

}  // namespace

std::unique_ptr<Collectives> make_nccl_collectives(const c10::intrusive_ptr<c10d::Store>& store,
                                                   int rank, int world, const at::Device& device,
                                                   std::chrono::seconds timeout) {
  return std::make_unique<NcclCollectives>(store, rank, world, device, timeout);
}

}  // namespace retain
