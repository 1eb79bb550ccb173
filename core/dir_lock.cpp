#include "core/dir_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/error.h"

namespace retain {

DirLock::DirLock(const fs::path& dir, const std::string& what) {
  fs::create_directories(dir);
  const fs::path path = dir / ".retain.lock";
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  RETAIN_CHECK(fd_ >= 0, what, ": cannot open ", path.string(), " (", std::strerror(errno), ")");
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int error = errno;
    char holder[256] = {};
    const ssize_t n = ::pread(fd_, holder, sizeof holder - 1, 0);
    ::close(fd_);
    fd_ = -1;
    if (error == EWOULDBLOCK)
      fail(what, ": ", dir.string(), " is in use by another retain command (",
           n > 0 ? std::string(holder, static_cast<size_t>(n)) : "its holder unknown",
           "); wait for it to end or choose another directory");
    fail(what, ": cannot lock ", path.string(), " (", std::strerror(error), ")");
  }
  // Who holds it, for the error above. Best effort: the flock is the lock, and a full disk must
  // not stop a run that the checks after this would let through.
  char host[128] = {};
  ::gethostname(host, sizeof host - 1);
  const std::string holder = str_cat("host ", host, ", pid ", ::getpid());
  if (::ftruncate(fd_, 0) == 0) {
    [[maybe_unused]] const ssize_t written = ::pwrite(fd_, holder.data(), holder.size(), 0);
  }
}

DirLock::~DirLock() {
  // Closing the descriptor releases the flock; the file stays (removing it would let a third
  // command lock a new file while a second still holds the old one).
  if (fd_ >= 0) ::close(fd_);
}

}  // namespace retain
