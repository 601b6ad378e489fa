// A test's own client for interactive sessions: the upgrade, frames sent and read, so a
// test can type, resize, signal and read exactly what the agent answered.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "core/byte_stream.h"
#include "core/encoding.h"
#include "net/stream_upgrade.h"
#include "protocol/stream_frames.h"

namespace gantry::testing {

struct SessionSeen {
  std::string out, err, error;
  int exit = -999;  // -999: no exit frame yet
  bool closed = false;
  FrameReader reader;  // keeps a frame cut between reads
};

// GET `path` upgraded, as the holder of `token`; on a refusal, its status and words.
inline Expected<std::unique_ptr<ByteStream>> OpenSession(const std::string& address, const std::string& token,
                                                         const std::string& path, UpgradeRefusal* refusal = nullptr) {
  HttpRequest request{"GET", path, {}, "", ""};
  if (!token.empty()) request.headers.emplace("Authorization", "Bearer " + token);
  HttpConnectionOptions options;
  options.read_timeout = std::chrono::seconds(40);
  return OpenUpgradedStream(address, request, options, refusal);
}

inline std::string ExecPath(const std::string& id, const std::vector<std::string>& command, bool tty = false,
                            const std::string& extra = "") {
  std::string path = "/v1/jobs/" + id + "/exec?tty=" + (tty ? "true" : "false") + extra;
  for (const std::string& w : command) path += "&command=" + UrlEncode(w);
  return path;
}

inline bool SendFrame(ByteStream& s, FrameType type, const std::string& payload = "") {
  return s.WriteAll(EncodeFrame(type, payload), 5000);
}

// Reads frames into `seen` until `done(seen)`, the exit frame, the end of the stream, or
// `timeout_ms`; true when `done` (or the exit, without `done`) was reached.
inline bool ReadFrames(ByteStream& s, SessionSeen& seen, int timeout_ms,
                       const std::function<bool(const SessionSeen&)>& done = nullptr) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  char buf[65536];
  for (;;) {
    if (done && done(seen)) return true;
    if (seen.exit != -999) return !done;
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    if (!WaitReadable(s, static_cast<int>(left.count()))) continue;
    ssize_t n = s.ReadSome(buf, sizeof(buf));
    if (n == ByteStream::kWouldBlock) continue;
    if (n <= 0) {
      seen.closed = true;
      return done ? done(seen) : false;
    }
    seen.reader.Feed(std::string_view(buf, static_cast<size_t>(n)));
    Frame f;
    while (seen.reader.Next(&f) == FrameReader::Result::kFrame) {
      if (f.type == FrameType::kStdout) seen.out += f.payload;
      if (f.type == FrameType::kStderr) seen.err += f.payload;
      if (f.type == FrameType::kError) seen.error += f.payload;
      if (f.type == FrameType::kExit) seen.exit = std::stoi(f.payload);
    }
  }
}

}  // namespace gantry::testing
