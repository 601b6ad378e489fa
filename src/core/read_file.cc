// POSIX reads without iostreams: std::filebuf throws from underflow when read(2) fails
// (ESRCH on a /proc file whose process just exited), and that aborted the agent.
#include "core/read_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

namespace gantry {

namespace {

// Reads from `fd` into `out` until EOF, `max_bytes` or an error (false).
bool ReadAllFd(int fd, std::string* out, size_t max_bytes) {
  char buf[8192];
  while (out->size() < max_bytes) {
    size_t want = std::min(sizeof(buf), max_bytes - out->size());
    ssize_t n = ::read(fd, buf, want);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return false;
    if (n == 0) break;
    out->append(buf, static_cast<size_t>(n));
  }
  return true;
}

}  // namespace

std::optional<std::string> ReadFileNoThrow(const std::string& path, size_t max_bytes) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::string out;
  bool ok = ReadAllFd(fd, &out, max_bytes);
  ::close(fd);
  if (!ok) return std::nullopt;
  return out;
}

std::string ReadFileRange(const std::string& path, int64_t offset, size_t max_bytes) {
  std::string out;
  if (offset < 0) return out;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return out;
  if (::lseek(fd, offset, SEEK_SET) == offset && !ReadAllFd(fd, &out, max_bytes)) out.clear();
  ::close(fd);
  return out;
}

}  // namespace gantry
