// Cutting and reading capped logs.
#include "core/log_window.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <string>

#include "core/read_file.h"

namespace gantry {

int64_t LogCutBytes(const std::string& path) {
  std::string text = ReadFileNoThrow(path + ".cut", 64).value_or("");
  int64_t cut = 0;
  std::from_chars(text.data(), text.data() + text.size(), cut);
  return std::max<int64_t>(cut, 0);
}

int64_t LogLogicalSize(const std::string& path) {
  struct stat st {};
  int64_t size = stat(path.c_str(), &st) == 0 ? st.st_size : 0;
  return LogCutBytes(path) + size;
}

namespace {

bool WriteCut(const std::string& path, int64_t cut) {
  std::string tmp = path + ".cut.tmp", text = std::to_string(cut) + "\n";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return false;
  bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  ::close(fd);
  return ok && std::rename(tmp.c_str(), (path + ".cut").c_str()) == 0;
}

// Moves bytes [from, end) to the front and truncates: for file systems without
// COLLAPSE_RANGE. Output appended while it copies may be lost.
bool CopyNewestToFront(int fd, int64_t from) {
  struct stat st {};
  if (fstat(fd, &st) != 0) return false;
  std::string buf(static_cast<size_t>(st.st_size - from), '\0');
  ssize_t n = pread(fd, buf.data(), buf.size(), from);
  if (n < 0) return false;
  return pwrite(fd, buf.data(), static_cast<size_t>(n), 0) == n && ftruncate(fd, n) == 0;
}

}  // namespace

bool TrimLog(const std::string& path, int64_t cap_bytes) {
  if (cap_bytes <= 0) return false;
  int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return false;
  struct stat st {};
  bool cut_done = false;
  if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > cap_bytes) {
    int64_t block = st.st_blksize > 0 ? st.st_blksize : 4096;
    int64_t cut = (st.st_size - cap_bytes / 2) / block * block;  // whole blocks, as COLLAPSE_RANGE wants
    if (cut > 0) {
      int64_t before = LogCutBytes(path);
      cut_done = fallocate(fd, FALLOC_FL_COLLAPSE_RANGE, 0, cut) == 0 || CopyNewestToFront(fd, cut);
      if (cut_done) WriteCut(path, before + cut);
    }
  }
  ::close(fd);
  return cut_done;
}

bool DropLog(const std::string& path) {
  int64_t size = LogLogicalSize(path);
  int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return false;
  bool ok = ftruncate(fd, 0) == 0 && WriteCut(path, size);
  ::close(fd);
  return ok;
}

std::string ReadLog(const std::string& path, int64_t offset, size_t max_bytes, int64_t* next) {
  int64_t cut = LogCutBytes(path);
  int64_t physical = std::max<int64_t>(offset - cut, 0);
  std::string data = ReadFileRange(path, physical, max_bytes);
  *next = cut + physical + static_cast<int64_t>(data.size());
  return data;
}

}  // namespace gantry
