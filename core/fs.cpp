#include "core/fs.h"

#include <fcntl.h>
#include <unistd.h>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <system_error>

#include "core/error.h"

namespace retain {

std::string read_text_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  RETAIN_CHECK(in.good(), path.string(), ": cannot open for reading (does it exist?)");
  std::ostringstream buffer;
  buffer << in.rdbuf();
  RETAIN_CHECK(!in.bad(), path.string(), ": read error");
  return buffer.str();
}

void write_file_atomic(const fs::path& path, const std::function<void(const fs::path&)>& write) {
  if (path.has_parent_path()) fs::create_directories(path.parent_path());
  // The pid keeps concurrent writers (several ranks, parallel tests) from sharing a temp name.
  fs::path tmp = path;
  tmp += str_cat(".tmp.", ::getpid());
  try {
    write(tmp);
    fs::rename(tmp, path);
  } catch (...) {
    std::error_code ignored;
    fs::remove(tmp, ignored);
    throw;
  }
}

void write_dir_atomic(const fs::path& dir, const std::function<void(const fs::path&)>& write) {
  fs::path tmp = dir;
  tmp += ".tmp";
  fs::remove_all(tmp);
  fs::create_directories(tmp);
  try {
    write(tmp);
    if (fs::exists(dir)) fs::remove_all(dir);
    fs::rename(tmp, dir);
  } catch (...) {
    std::error_code ignored;
    fs::remove_all(tmp, ignored);
    throw;
  }
}

void ensure_writable_dir(const fs::path& dir, const std::string& what) {
  // Nothing is created: a command that then fails on other input leaves no empty directory.
  // The probe goes into the deepest part of the path that exists.
  std::error_code error;
  fs::path place = dir;
  while (!place.empty() && !fs::exists(place, error)) place = place.parent_path();
  if (place.empty()) place = ".";
  RETAIN_CHECK(fs::is_directory(place, error), what, " ", dir.string(), ": cannot create it (",
               place.string(), " is not a directory)");
  const fs::path probe = place / str_cat(".retain-write-probe.", ::getpid());
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  RETAIN_CHECK(fd >= 0, what, " ", dir.string(), ": cannot write in ", place.string(), " (",
               std::strerror(errno), ")");
  ::close(fd);
  fs::remove(probe, error);
}

void write_text_file_atomic(const fs::path& path, const std::string& content) {
  write_file_atomic(path, [&](const fs::path& tmp) {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    RETAIN_CHECK(out.good(), tmp.string(), ": cannot open for writing");
    out << content;
    out.close();
    RETAIN_CHECK(out.good(), tmp.string(), ": write failed (", std::strerror(errno), ")");
  });
}

}  // namespace retain
