#include "dist/collectives.h"

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <algorithm>
#include <cstring>
#include <numeric>

#include "core/error.h"
#include "core/log.h"

namespace retain {

// Defined in nccl_collectives.cpp (CUDA builds) or below (CPU-only builds).
std::unique_ptr<Collectives> make_nccl_collectives(const c10::intrusive_ptr<c10d::Store>& store,
                                                   int rank, int world, const at::Device& device,
                                                   std::chrono::seconds timeout);

namespace {

class LocalCollectives : public Collectives {
 public:
  int rank() const override { return 0; }
  int world() const override { return 1; }
  std::string name() const override { return "single process"; }
  void broadcast(std::vector<at::Tensor>&, int) override {}
  void all_reduce_sum(at::Tensor&) override {}
  void barrier() override {}
};

class StoreCollectives : public Collectives {
 public:
  // `global_ranks`: the run's rank of each member of the group (errors name those).
  StoreCollectives(c10::intrusive_ptr<c10d::Store> store, int rank, std::vector<int> global_ranks,
                   std::string where)
      : store_(std::move(store)),
        rank_(rank),
        world_(static_cast<int>(global_ranks.size())),
        global_ranks_(std::move(global_ranks)),
        where_(std::move(where)) {}

  int rank() const override { return rank_; }
  int world() const override { return world_; }
  std::string name() const override {
    return str_cat("c10d TCPStore collective, ", world_, " ranks");
  }

  void all_reduce_sum(at::Tensor& tensor) override {
    const std::string key = str_cat("retain/ar/", seq_++);
    auto mine = tensor.detach().to(at::kCPU).contiguous();
    store_set(str_cat(key, "/", rank_), bytes_of(mine));
    // Every rank adds the same values in the same (rank) order: identical results everywhere.
    auto sum = at::zeros_like(mine);
    for (int r = 0; r < world_; ++r) {
      auto data = get(str_cat(key, "/", r), key, r);
      RETAIN_CHECK(data.size() == mine.nbytes(), "collective: rank ", r, " sent ", data.size(),
                   " bytes, expected ", mine.nbytes(), " (ranks disagree on the tensor)");
      sum.add_(at::from_blob(data.data(), mine.sizes(), mine.options()));
    }
    tensor.copy_(sum);
    finish(key, [&] {
      for (int r = 0; r < world_; ++r) store_delete(str_cat(key, "/", r));
    });
  }

  void broadcast(std::vector<at::Tensor>& tensors, int root) override {
    const std::string key = str_cat("retain/bc/", seq_++);
    std::vector<at::Tensor> cpu;
    int64_t total = 0;
    for (auto& t : tensors) {
      cpu.push_back(t.detach().to(at::kCPU).contiguous());
      total += static_cast<int64_t>(cpu.back().nbytes());
    }
    if (rank_ == root) {
      std::vector<uint8_t> all;
      all.reserve(static_cast<size_t>(total));
      for (const auto& t : cpu) {
        auto b = bytes_of(t);
        all.insert(all.end(), b.begin(), b.end());
      }
      store_set(key, all);
    } else {
      auto data = get(key, key, root);
      RETAIN_CHECK(static_cast<int64_t>(data.size()) == total, "broadcast: rank ", root, " sent ",
                   data.size(), " bytes, expected ", total);
      size_t offset = 0;
      for (size_t i = 0; i < tensors.size(); ++i) {
        auto src = at::from_blob(data.data() + offset, cpu[i].sizes(), cpu[i].options());
        tensors[i].detach().copy_(src);
        offset += cpu[i].nbytes();
      }
    }
    finish(key, [&] { store_delete(key); });
  }

  void shutdown() override {
    if (rank_ != 0) {
      store_set(str_cat("retain/exit/", rank_), std::vector<uint8_t>{1});
      return;
    }
    for (int r = 1; r < world_; ++r) get(str_cat("retain/exit/", r), "retain/exit", r);
  }

  void barrier() override {
    const std::string key = str_cat("retain/barrier/", seq_++);
    store_set(str_cat(key, "/", rank_), std::vector<uint8_t>{1});
    for (int r = 0; r < world_; ++r) get(str_cat(key, "/", r), key, r);
    finish(key, [&] {
      for (int r = 0; r < world_; ++r) store_delete(str_cat(key, "/", r));
    });
  }

 private:
  static std::vector<uint8_t> bytes_of(const at::Tensor& t) {
    const auto* p = static_cast<const uint8_t*>(t.data_ptr());
    return {p, p + t.nbytes()};
  }

  // Reads rank `from`'s contribution; a timeout or a lost store becomes an error naming the
  // ranks that never arrived.
  std::vector<uint8_t> get(const std::string& key, const std::string& collective, int from) {
    try {
      return store_->get(key);
    } catch (const std::exception& e) {
      std::string missing;
      try {
        for (int r = 0; r < world_; ++r)
          if (!store_->check({str_cat(collective, "/", r)}) && !store_->check({collective}))
            missing += (missing.empty() ? "" : ", ") + std::to_string(global_ranks_[r]);
      } catch (const std::exception&) {
        fail("rank ", me(), ": lost the rendezvous store at ", where_,
             " (it lives in rank 0 or the launcher; did it die?): ", e.what());
      }
      fail("rank ", me(), ": rank ",
           missing.empty() ? std::to_string(global_ranks_[from]) : missing,
           " did not reach collective ", collective,
           " (died or hung; dist.timeout_s passed): ", e.what());
    }
  }

  // Every other store operation: a lost store (rank 0 or the launcher died) becomes an error that
  // says so, not the socket's "Connection reset by peer".
  template <typename Op>
  auto on_store(Op op) -> decltype(op()) {
    try {
      return op();
    } catch (const std::exception& e) {
      fail("rank ", me(), ": lost the rendezvous store at ", where_,
           " (it lives in rank 0 or the launcher; did it die?): ", e.what());
    }
  }
  int me() const { return global_ranks_[rank_]; }
  void store_set(const std::string& key, const std::vector<uint8_t>& value) {
    on_store([&] { store_->set(key, value); });
  }
  void store_delete(const std::string& key) {
    on_store([&] { store_->deleteKey(key); });
  }
  int64_t store_add(const std::string& key, int64_t n) {
    return on_store([&] { return store_->add(key, n); });
  }

  // The last rank through a collective removes its keys, so the store does not grow.
  template <typename Cleanup>
  void finish(const std::string& key, Cleanup cleanup) {
    if (store_add(key + "/done", 1) == world_) {
      cleanup();
      store_delete(key + "/done");
    }
  }

  c10::intrusive_ptr<c10d::Store> store_;
  int rank_, world_;
  std::vector<int> global_ranks_;
  std::string where_;
  uint64_t seq_ = 0;
};

}  // namespace

std::unique_ptr<Collectives> make_local_collectives() {
  return std::make_unique<LocalCollectives>();
}

c10::intrusive_ptr<c10d::Store> open_store(const DistEnv& env, std::chrono::seconds timeout) {
  c10d::TCPStoreOptions options;
  options.port = static_cast<uint16_t>(env.master_port);
  // Under torchrun's agent store every rank is a client; otherwise rank 0 hosts it.
  options.isServer = !env.agent_store && env.rank == 0;
  options.numWorkers = env.agent_store ? std::nullopt : std::optional<size_t>(env.world);
  options.waitWorkers = false;
  options.timeout = timeout;
  c10::intrusive_ptr<c10d::Store> store;
  try {
    store = c10::make_intrusive<c10d::TCPStore>(env.master_addr, options);
  } catch (const std::exception& e) {
    fail("rank ", env.rank, ": cannot reach the rendezvous store at ", store_address(env), ": ",
         e.what());
  }
  if (env.agent_store)
    store = c10::make_intrusive<c10d::PrefixStore>(str_cat("/worker/attempt_", env.restart_count),
                                                   store);
  log_info("rank ", env.rank, "/", env.world, " (", env.launcher, ") joined the store at ",
           store_address(env));
  return store;
}

std::string store_address(const DistEnv& env) {
  return str_cat(env.master_addr, ":", env.master_port);
}

std::unique_ptr<Collectives> make_group_collectives(const c10::intrusive_ptr<c10d::Store>& store,
                                                    const std::string& group,
                                                    const std::vector<int>& ranks, int global_rank,
                                                    const at::Device& device,
                                                    const std::string& where,
                                                    std::chrono::seconds timeout) {
  const auto it = std::find(ranks.begin(), ranks.end(), global_rank);
  RETAIN_CHECK(it != ranks.end(), "internal: rank ", global_rank, " is not in group ", group);
  const int rank = static_cast<int>(it - ranks.begin());
  // The world keeps the store's own keys (nothing was prefixed before groups existed); a
  // sub-group's keys live under its name, so groups never see each other's sequence numbers.
  c10::intrusive_ptr<c10d::Store> group_store = store;
  if (!group.empty()) group_store = c10::make_intrusive<c10d::PrefixStore>(group + "/", store);
  if (device.is_cuda())
    return make_nccl_collectives(group_store, rank, static_cast<int>(ranks.size()), device,
                                 timeout);
  return std::make_unique<StoreCollectives>(group_store, rank, ranks, where);
}

std::unique_ptr<Collectives> make_collectives(const DistEnv& env, const at::Device& device,
                                              std::chrono::seconds timeout) {
  if (env.world == 1) return make_local_collectives();
  std::vector<int> all(static_cast<size_t>(env.world));
  std::iota(all.begin(), all.end(), 0);
  return make_group_collectives(open_store(env, timeout), "", all, env.rank, device,
                                store_address(env), timeout);
}

void all_reduce_flat(Collectives& c, const std::vector<at::Tensor>& tensors) {
  if (c.world() == 1 || tensors.empty()) return;
  std::vector<at::Tensor> flat;
  for (const auto& t : tensors) flat.push_back(t.reshape({-1}));
  auto buffer = at::cat(flat);
  c.all_reduce_sum(buffer);
  int64_t offset = 0;
  for (const auto& t : tensors) {
    auto view = const_cast<at::Tensor&>(t);
    view.copy_(buffer.narrow(0, offset, t.numel()).view(t.sizes()));
    offset += t.numel();
  }
}

at::Tensor all_gather_cat(Collectives& c, const at::Tensor& tensor, int64_t dim) {
  if (c.world() == 1) return tensor;
  dim = at::maybe_wrap_dim(dim, tensor.dim());
  auto sizes = at::zeros({c.world()}, at::TensorOptions().dtype(at::kLong).device(tensor.device()));
  sizes[c.rank()] = tensor.size(dim);
  c.all_reduce_sum(sizes);
  auto host = sizes.cpu();
  const int64_t* size = host.data_ptr<int64_t>();
  int64_t offset = 0, total = 0;
  for (int r = 0; r < c.world(); ++r) {
    if (r < c.rank()) offset += size[r];
    total += size[r];
  }
  auto shape = tensor.sizes().vec();
  shape[static_cast<size_t>(dim)] = total;
  auto out = at::zeros(shape, tensor.options());
  // A zero buffer with this rank's part in place: the sum over ranks is the concatenation (x + 0
  // == x for every x, +-inf included).
  out.narrow(dim, offset, tensor.size(dim)).copy_(tensor);
  c.all_reduce_sum(out);
  return out;
}

#ifndef RETAIN_WITH_NCCL
std::unique_ptr<Collectives> make_nccl_collectives(const c10::intrusive_ptr<c10d::Store>&, int, int,
                                                   const at::Device&, std::chrono::seconds) {
  fail(
      "multi-process CUDA training needs NCCL, and this build has no CUDA sources (rebuild with "
      "nvcc present)");
}
#endif

}  // namespace retain
