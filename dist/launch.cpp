#include "dist/launch.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "core/error.h"
#include "core/log.h"

namespace retain {

namespace {

std::vector<pid_t> g_children;

void forward_signal(int sig) {
  for (pid_t pid : g_children)
    if (pid > 0) ::kill(pid, sig);
}

// A port the kernel considers free right now (bind to 0, read it back).
int free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  RETAIN_CHECK(fd >= 0, "launch: cannot open a socket to find a free port");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
            ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0;
  ::close(fd);
  RETAIN_CHECK(ok, "launch: cannot find a free port (pass --master-port)");
  return ntohs(addr.sin_port);
}

std::string describe_status(int status) {
  if (WIFEXITED(status)) return str_cat("exited with code ", WEXITSTATUS(status));
  if (WIFSIGNALED(status))
    return str_cat("was killed by signal ", WTERMSIG(status), " (", strsignal(WTERMSIG(status)),
                   ")");
  return "stopped";
}

}  // namespace

int run_launch(int nproc, int master_port, const std::vector<std::string>& command) {
  RETAIN_CHECK(nproc >= 1, "launch: --nproc must be >= 1");
  RETAIN_CHECK(
      !command.empty(),
      "launch: give the retain command after --, e.g. retain launch --nproc 2 -- train R.yaml");
  const int port = master_port > 0 ? master_port : free_port();
  char self[4096];
  ssize_t n = ::readlink("/proc/self/exe", self, sizeof(self) - 1);
  RETAIN_CHECK(n > 0, "launch: cannot find the retain binary (/proc/self/exe)");
  self[n] = '\0';

  std::vector<std::string> argv_strings{self};
  argv_strings.insert(argv_strings.end(), command.begin(), command.end());
  log_info("launch: ", nproc, " ranks of `retain ", command[0], " ...` on 127.0.0.1:", port);
  g_children.assign(static_cast<size_t>(nproc), -1);
  for (int rank = 0; rank < nproc; ++rank) {
    pid_t pid = ::fork();
    RETAIN_CHECK(pid >= 0, "launch: fork failed: ", std::strerror(errno));
    if (pid == 0) {
      setenv("RANK", std::to_string(rank).c_str(), 1);
      setenv("LOCAL_RANK", std::to_string(rank).c_str(), 1);
      setenv("WORLD_SIZE", std::to_string(nproc).c_str(), 1);
      setenv("LOCAL_WORLD_SIZE", std::to_string(nproc).c_str(), 1);
      setenv("MASTER_ADDR", "127.0.0.1", 1);
      setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
      unsetenv("TORCHELASTIC_USE_AGENT_STORE");
      // As torchrun does: split the cores between the ranks unless the user chose.
      if (std::getenv("OMP_NUM_THREADS") == nullptr)
        setenv("OMP_NUM_THREADS",
               std::to_string(std::max(1u, std::thread::hardware_concurrency() / nproc)).c_str(),
               1);
      std::vector<char*> argv;
      for (auto& s : argv_strings) argv.push_back(s.data());
      argv.push_back(nullptr);
      ::execv(self, argv.data());
      std::fprintf(stderr, "launch: exec of %s failed: %s\n", self, std::strerror(errno));
      ::_exit(127);
    }
    g_children[static_cast<size_t>(rank)] = pid;
  }
  struct sigaction action {};
  action.sa_handler = forward_signal;
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);

  int remaining = nproc, exit_code = 0;
  while (remaining > 0) {
    int status = 0;
    pid_t pid = ::waitpid(-1, &status, 0);
    if (pid < 0) {
      if (errno == EINTR) continue;
      break;
    }
    int rank = -1;
    for (int r = 0; r < nproc; ++r)
      if (g_children[static_cast<size_t>(r)] == pid) rank = r;
    if (rank < 0) continue;
    g_children[static_cast<size_t>(rank)] = -1;
    --remaining;
    bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    if (ok || exit_code != 0) continue;
    exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    std::fprintf(stderr, "retain launch: rank %d %s; stopping the other ranks\n", rank,
                 describe_status(status).c_str());
    forward_signal(SIGTERM);
    // Ranks blocked in a collective get 10 s to exit on SIGTERM before SIGKILL.
    std::thread([] {
      std::this_thread::sleep_for(std::chrono::seconds(10));
      forward_signal(SIGKILL);
    }).detach();
  }
  return exit_code;
}

}  // namespace retain
