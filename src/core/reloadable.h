// A config file that is re-read when it changes on disk, so quota (and other) changes
// apply without a restart. A malformed edit keeps the last good version and reports why.
// Not thread-safe: the state owner polls it (e.g. once per scheduling cycle).
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <string>

#include "core/status.h"

namespace gantry {

template <typename T>
class ReloadableFile {
 public:
  using Loader = std::function<Expected<T>(const std::string& path)>;

  ReloadableFile(std::string path, Loader loader) : path_(std::move(path)), loader_(std::move(loader)) {}

  // Loads the file if it changed since the last look. Returns OK when the current version
  // is good (new or unchanged); on a bad edit returns the error and keeps the old one.
  Status Refresh() {
    std::error_code ec;
    auto stamp = std::filesystem::last_write_time(path_, ec);
    auto size = std::filesystem::file_size(path_, ec);
    if (ec) return Status::NotFound("cannot read " + path_);
    if (current_ && stamp == stamp_ && size == size_) return Status::Ok();
    stamp_ = stamp;
    size_ = size;
    auto loaded = loader_(path_);
    if (!loaded) return loaded.status();
    current_ = std::make_shared<const T>(std::move(*loaded));
    ++version_;
    return Status::Ok();
  }

  // The last good version (null before the first good load). Holders keep theirs alive.
  std::shared_ptr<const T> current() const { return current_; }
  int version() const { return version_; }

 private:
  std::string path_;
  Loader loader_;
  std::shared_ptr<const T> current_;
  std::filesystem::file_time_type stamp_{};
  std::uintmax_t size_ = 0;
  int version_ = 0;
};

}  // namespace gantry
