// The process grid of a run with tensor parallelism: WORLD_SIZE = tp x dp ranks. The tp ranks of
// one data-parallel replica are consecutive (rank = dp_rank * tp + tp_rank), so with launchers
// that number a node's ranks consecutively (torchrun, retain launch, SLURM, mpirun) a tensor-
// parallel group sits inside one node, on its fast links; data-parallel groups (the same tp_rank
// of every replica) span the nodes. All groups share the run's one c10d store.
#pragma once

#include <chrono>
#include <memory>

#include "dist/collectives.h"
#include "dist/dist_env.h"

namespace retain {

struct ParallelGroups {
  std::shared_ptr<Collectives> world;  // every rank
  std::shared_ptr<Collectives> tp;     // the ranks sharing one model replica's shards
  std::shared_ptr<Collectives> dp;     // the ranks holding the same shard in other replicas

  int tensor_parallel() const { return tp->world(); }
  int data_parallel() const { return dp->world(); }
};

// `tensor_parallel` must divide env.world (a clear error otherwise). 1: tp is the identity and
// dp the world; a single process gets identities everywhere.
ParallelGroups make_parallel_groups(const DistEnv& env, const at::Device& device,
                                    std::chrono::seconds timeout, int tensor_parallel);

// The groups of a command run with --tp N (generate, eval, bench): the launcher must have started
// exactly N ranks (a clear error otherwise); on CUDA, `device` becomes this rank's GPU
// (cuda:LOCAL_RANK, one GPU per rank).
ParallelGroups join_tensor_parallel(int tensor_parallel, at::Device& device,
                                    std::chrono::seconds timeout);

}  // namespace retain
