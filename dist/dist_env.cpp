#include "dist/dist_env.h"

#include <cstdlib>

#include "core/error.h"

namespace retain {

namespace {

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? "" : v;
}

int env_int(const char* name, int fallback) {
  std::string v = env(name);
  if (v.empty()) return fallback;
  try {
    size_t used = 0;
    int value = std::stoi(v, &used);
    RETAIN_CHECK(used == v.size(), "");
    return value;
  } catch (...) {
    fail("environment variable ", name, "='", v, "' is not an integer");
  }
}

}  // namespace

std::string first_slurm_host(const std::string& nodelist) {
  // Up to the first top-level comma; a bracket range keeps its prefix and first number.
  std::string first;
  int depth = 0;
  for (char c : nodelist) {
    if (c == '[') ++depth;
    if (c == ']') --depth;
    if (c == ',' && depth == 0) break;
    first.push_back(c);
  }
  auto open = first.find('[');
  if (open == std::string::npos) return first;
  std::string inside = first.substr(open + 1, first.find(']') - open - 1);
  std::string number = inside.substr(0, inside.find_first_of(",-"));
  return first.substr(0, open) + number;
}

DistEnv detect_dist_env() {
  DistEnv e;
  if (!env("RANK").empty() && !env("WORLD_SIZE").empty()) {
    e.launcher = "torchrun";
    e.rank = env_int("RANK", 0);
    e.world = env_int("WORLD_SIZE", 1);
    e.local_rank = env_int("LOCAL_RANK", 0);
    e.agent_store = env("TORCHELASTIC_USE_AGENT_STORE") == "True";
    e.restart_count = env_int("TORCHELASTIC_RESTART_COUNT", 0);
  } else if (!env("SLURM_PROCID").empty() && !env("SLURM_NTASKS").empty()) {
    e.launcher = "slurm";
    e.rank = env_int("SLURM_PROCID", 0);
    e.world = env_int("SLURM_NTASKS", 1);
    e.local_rank = env_int("SLURM_LOCALID", 0);
    if (env("MASTER_ADDR").empty() && !env("SLURM_JOB_NODELIST").empty())
      e.master_addr = first_slurm_host(env("SLURM_JOB_NODELIST"));
  } else if (!env("OMPI_COMM_WORLD_RANK").empty()) {
    e.launcher = "mpi";
    e.rank = env_int("OMPI_COMM_WORLD_RANK", 0);
    e.world = env_int("OMPI_COMM_WORLD_SIZE", 1);
    e.local_rank = env_int("OMPI_COMM_WORLD_LOCAL_RANK", 0);
    RETAIN_CHECK(e.world == 1 || !env("MASTER_ADDR").empty(),
                 "mpirun: export MASTER_ADDR (e.g. mpirun -x MASTER_ADDR=<first host>) so the "
                 "ranks can meet");
  }
  if (!env("MASTER_ADDR").empty()) e.master_addr = env("MASTER_ADDR");
  e.master_port = env_int("MASTER_PORT", e.master_port);
  RETAIN_CHECK(e.world >= 1 && e.rank >= 0 && e.rank < e.world, e.launcher, ": rank ", e.rank,
               " is outside a world of ", e.world);
  return e;
}

}  // namespace retain
