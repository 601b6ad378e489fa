// A bearer token kept in a file another process replaces (the kubelet rotates a pod's
// projected service-account token): read again whenever the file changes.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>

namespace gantry {

class TokenFile {
 public:
  explicit TokenFile(std::string path) : path_(std::move(path)) {}
  const std::string& path() const { return path_; }
  // The token as the file holds it now, without trailing white space; while the file is
  // missing or empty (caught mid-rotation), the last one read. Any thread.
  std::string Current();

 private:
  std::string path_;
  std::mutex mu_;
  std::string token_;
  int64_t mtime_ns_ = -1;
};

}  // namespace gantry
