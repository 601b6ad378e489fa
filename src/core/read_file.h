// Reading files that another process may change or remove while they are read (/proc,
// cgroupfs, exit files): a read error is an answer ("gone"), never an exception.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace gantry {

// The file's bytes (at most `max_bytes`), or nullopt when it cannot be opened or a read
// fails (the process behind a /proc file exited, the file was removed).
std::optional<std::string> ReadFileNoThrow(const std::string& path, size_t max_bytes = 64 << 20);

// Bytes [offset, offset + max_bytes) of a file; empty past its end or when unreadable.
std::string ReadFileRange(const std::string& path, int64_t offset, size_t max_bytes);

}  // namespace gantry
