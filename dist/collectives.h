// The collectives the trainer needs (broadcast, all-reduce of a sum, barrier) over the run's
// processes, on c10d:
//   CUDA: c10d::ProcessGroupNCCL over a c10d::TCPStore rendezvous.
//   CPU:  this LibTorch wheel ships no Gloo headers, so CPU multi-process runs (tests, debugging)
//         use a small collective built on the same c10d::TCPStore: every rank posts its tensor
//         under a sequence-numbered key and sums all ranks' tensors in rank order (identical
//         results on every rank). It is meant for small gate gradients, not for bandwidth.
// A rank that dies makes the others fail within `timeout` with an error naming it.
#pragma once

#include <ATen/ATen.h>
#include <c10/util/intrusive_ptr.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "dist/dist_env.h"

namespace c10d {
class Store;
}

namespace retain {

class Collectives {
 public:
  virtual ~Collectives() = default;
  virtual int rank() const = 0;
  virtual int world() const = 0;
  virtual std::string name() const = 0;
  // In place: every rank ends with root's values.
  virtual void broadcast(std::vector<at::Tensor>& tensors, int root) = 0;
  // In place: every rank ends with the sum over ranks.
  virtual void all_reduce_sum(at::Tensor& tensor) = 0;
  virtual void barrier() = 0;
  // Called once at the end of a run: rank 0 (which may host the store) returns only after every
  // other rank is done with it, so nobody loses the store while finishing its last collective.
  virtual void shutdown() {}
};

// World size 1: everything is the identity.
std::unique_ptr<Collectives> make_local_collectives();

// The collectives of every rank of `env` on `device` (NCCL for CUDA, the store collective for
// CPU).
std::unique_ptr<Collectives> make_collectives(const DistEnv& env, const at::Device& device,
                                              std::chrono::seconds timeout);

// The run's rendezvous store (rank 0 hosts it, or torchrun's agent), and its address for errors.
c10::intrusive_ptr<c10d::Store> open_store(const DistEnv& env, std::chrono::seconds timeout);
std::string store_address(const DistEnv& env);

// The collectives of the group of run ranks `ranks` (this process is `global_rank`, one of them)
// over `store`: `group` names the group's keys ("" for the whole world).
std::unique_ptr<Collectives> make_group_collectives(const c10::intrusive_ptr<c10d::Store>& store,
                                                    const std::string& group,
                                                    const std::vector<int>& ranks, int global_rank,
                                                    const at::Device& device,
                                                    const std::string& where,
                                                    std::chrono::seconds timeout);

// Sums tensors across ranks through one flat buffer (one collective for all of them).
void all_reduce_flat(Collectives& c, const std::vector<at::Tensor>& tensors);

// Every rank's `tensor` concatenated along `dim` in rank order (the ranks' sizes along `dim` may
// differ; every other size must agree). Built on all_reduce_sum (each rank writes its part into a
// zero buffer), so it is exact for any values, infinities included, on every backend.
at::Tensor all_gather_cat(Collectives& c, const at::Tensor& tensor, int64_t dim);

}  // namespace retain
