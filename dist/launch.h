// `retain launch --nproc N [--master-port P] -- train RECIPE ...`: runs N local ranks of a retain
// command with the torchrun environment (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,
// MASTER_ADDR, MASTER_PORT), forwards SIGINT/SIGTERM, and when a rank fails stops the others and
// exits non-zero naming it.
#pragma once

#include <string>
#include <vector>

namespace retain {

int run_launch(int nproc, int master_port, const std::vector<std::string>& command);

}  // namespace retain
