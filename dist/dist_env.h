// Where a process sits in a multi-process run, read from the launcher's environment:
//   torchrun / retain launch: RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT
//     (TORCHELASTIC_USE_AGENT_STORE=True: the agent hosts the store; keys live under
//     /worker/attempt_<TORCHELASTIC_RESTART_COUNT>)
//   SLURM (srun): SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, master = first host of
//   SLURM_JOB_NODELIST Open MPI (mpirun): OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE,
//   OMPI_COMM_WORLD_LOCAL_RANK
//     (MASTER_ADDR must be exported, e.g. mpirun -x MASTER_ADDR=host0)
// With none of these, the run is a single process.
#pragma once

#include <cstdint>
#include <string>

namespace retain {

struct DistEnv {
  std::string launcher = "none";  // torchrun | slurm | mpi | none
  int rank = 0;
  int world = 1;
  int local_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  bool agent_store = false;  // torchrun's agent hosts the store
  int restart_count = 0;
};

DistEnv detect_dist_env();

// The first host of a SLURM node list: "gpu[03-05,07],cpu01" -> "gpu03".
std::string first_slurm_host(const std::string& nodelist);

}  // namespace retain
