#include "dist/parallel_groups.h"

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <numeric>

#include "core/error.h"

namespace retain {

ParallelGroups make_parallel_groups(const DistEnv& env, const at::Device& device,
                                    std::chrono::seconds timeout, int tensor_parallel) {
  RETAIN_CHECK(tensor_parallel >= 1, "tensor parallel size must be >= 1, found ", tensor_parallel);
  RETAIN_CHECK(env.world % tensor_parallel == 0, "tensor parallel size ", tensor_parallel,
               " does not divide the ", env.world, " ranks of the run (WORLD_SIZE): start a ",
               "multiple of ", tensor_parallel, " ranks");
  ParallelGroups groups;
  if (env.world == 1) {
    groups.world = make_local_collectives();
    groups.tp = groups.world;
    groups.dp = groups.world;
    return groups;
  }
  auto store = open_store(env, timeout);
  const std::string where = store_address(env);
  std::vector<int> all(static_cast<size_t>(env.world));
  std::iota(all.begin(), all.end(), 0);
  groups.world = make_group_collectives(store, "", all, env.rank, device, where, timeout);
  if (tensor_parallel == 1) {
    groups.tp = make_local_collectives();
    groups.dp = groups.world;
    return groups;
  }
  const int tp_rank = env.rank % tensor_parallel, dp_rank = env.rank / tensor_parallel;
  std::vector<int> tp_ranks, dp_ranks;
  for (int r = 0; r < tensor_parallel; ++r) tp_ranks.push_back(dp_rank * tensor_parallel + r);
  for (int r = 0; r < env.world / tensor_parallel; ++r)
    dp_ranks.push_back(r * tensor_parallel + tp_rank);
  groups.tp = make_group_collectives(store, str_cat("tp", dp_rank), tp_ranks, env.rank, device,
                                     where, timeout);
  groups.dp = dp_ranks.size() == 1 ? std::shared_ptr<Collectives>(make_local_collectives())
                                   : make_group_collectives(store, str_cat("dp", tp_rank), dp_ranks,
                                                            env.rank, device, where, timeout);
  return groups;
}

ParallelGroups join_tensor_parallel(int tensor_parallel, at::Device& device,
                                    std::chrono::seconds timeout) {
  const DistEnv env = detect_dist_env();
  RETAIN_CHECK(env.world == tensor_parallel, "--tp ", tensor_parallel, " needs ", tensor_parallel,
               " ranks started by a launcher (retain launch --nproc ", tensor_parallel,
               " -- COMMAND ... --tp ", tensor_parallel, ", torchrun, srun); found WORLD_SIZE ",
               env.world);
  if (device.is_cuda())
    device = at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(env.local_rank));
  return make_parallel_groups(env, device, timeout, tensor_parallel);
}

}  // namespace retain
