// TokenFile: a token file read again when its modification time changes.
#include "core/token_file.h"

#include <sys/stat.h>

#include <cctype>

#include "core/read_file.h"

namespace gantry {

std::string TokenFile::Current() {
  struct stat st {};
  int64_t mtime =
      ::stat(path_.c_str(), &st) == 0 ? static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec : -1;
  std::lock_guard<std::mutex> lock(mu_);
  if (mtime != mtime_ns_ || token_.empty()) {
    std::string text = ReadFileNoThrow(path_, 16384).value_or("");
    while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.pop_back();
    if (!text.empty()) {  // else caught mid-rotation: read again next time
      token_ = text;
      mtime_ns_ = mtime;
    }
  }
  return token_;
}

}  // namespace gantry
