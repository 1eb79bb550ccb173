// One writer per output directory. A DirLock holds an exclusive flock on DIR/.retain.lock (the
// directory is created when missing) and writes its host and pid there; a second command on the
// same directory refuses at once, naming the holder, instead of interleaving its records with the
// first's. The kernel drops a flock when its process ends, however it ends (SIGKILL included), so
// a killed run never leaves a stale lock: the next run simply takes it.
#pragma once

#include <string>

#include "core/fs.h"

namespace retain {

class DirLock {
 public:
  // `what` names the command and flag in the error ("eval ruler: --out").
  DirLock(const fs::path& dir, const std::string& what);
  ~DirLock();
  DirLock(const DirLock&) = delete;
  DirLock& operator=(const DirLock&) = delete;

 private:
  int fd_ = -1;
};

}  // namespace retain
