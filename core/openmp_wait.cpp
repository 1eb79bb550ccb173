#include "core/openmp_wait.h"

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

namespace retain {

int runnable_processes(const std::string& proc_stat) {
  std::istringstream in(proc_stat);
  std::string line;
  while (std::getline(in, line))
    if (line.starts_with("procs_running ")) return std::atoi(line.c_str() + 14);
  return -1;
}

namespace {

// Whether another process wants a core: procs_running counts this one too. A competitor for the
// cores is runnable in most of 5 reads 10 ms apart; a process only starting beside retain (the
// other end of a shell pipe) is not.
bool cores_are_shared() {
  int busy = 0;
  for (int sample = 0; sample < 5; ++sample) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    std::ifstream file("/proc/stat");
    std::stringstream text;
    text << file.rdbuf();
    busy += runnable_processes(text.str()) > 1;
  }
  return busy >= 3;
}

}  // namespace

void choose_openmp_wait_policy(char** argv) {
  if (std::getenv("OMP_WAIT_POLICY") != nullptr || std::getenv("GOMP_SPINCOUNT") != nullptr) return;
  // A team of one has no barrier to wait at.
  const char* threads = std::getenv("OMP_NUM_THREADS");
  if ((threads != nullptr && std::string(threads) == "1") || sysconf(_SC_NPROCESSORS_ONLN) <= 1)
    return;
  if (!cores_are_shared()) return;
  setenv("OMP_WAIT_POLICY", "PASSIVE", /*overwrite=*/1);
  // The same binary and arguments, now with the policy set; execv returns only on failure.
  execv("/proc/self/exe", argv);
}

}  // namespace retain
