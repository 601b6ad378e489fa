// Job logs kept to a size. A log past its cap loses its oldest part, so that about the
// newest half remains; offsets stay logical (bytes ever written), because the number of
// bytes cut is kept beside the log in `<log>.cut`: readers by offset (`gantry logs -f`, the
// log shipper, the server's copy of remote logs) keep their place across a cut.
#pragma once

#include <cstdint>
#include <string>

namespace gantry {

// Bytes cut from the front of the log so far (0 when none).
int64_t LogCutBytes(const std::string& path);
// The log's logical size: bytes cut plus bytes in the file.
int64_t LogLogicalSize(const std::string& path);
// Cuts the oldest part when the log is over `cap_bytes` (0: no cap); true when it cut.
// In place (fallocate COLLAPSE_RANGE) where the file system can, so a job appending
// through its own descriptor keeps writing at the end; else by copying the newest part.
bool TrimLog(const std::string& path, int64_t cap_bytes);
// Empties the log, counting all it held as cut (a dropped log reads as cut from 0).
bool DropLog(const std::string& path);
// Up to `max_bytes` from logical offset `offset` (an offset before the cut reads from
// the oldest byte kept); `*next` is the logical offset after what was read.
std::string ReadLog(const std::string& path, int64_t offset, size_t max_bytes, int64_t* next);

}  // namespace gantry
