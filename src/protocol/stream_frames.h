// The frames of an interactive session (gantry exec, shell, attach) between the user's
// client and the node's agent. The server only relays the bytes; both ends frame them:
// one type byte, a 4-byte big-endian length, then the payload. The agent never trusts
// what the client sends: what to run, as whom, comes from the server's order, and the
// frames can only type, resize, signal or end input.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace gantry {

enum class FrameType : char {
  kStdin = 'i',     // client to agent: bytes for the process's input
  kStdinEnd = 'd',  // client to agent: no more input (EOF)
  kResize = 'w',    // client to agent: "COLS ROWS" of the user's terminal
  kSignal = 'k',    // client to agent: a signal's name (INT, TERM, HUP, QUIT) for the process group
  kStdout = 'o',    // agent to client: the process's output (its terminal's, with a TTY)
  kStderr = 'e',    // agent to client: the process's error output (without a TTY)
  kExit = 'x',      // agent to client: the exit status, in decimal; the last frame
  kError = '!',     // agent to client: why the session could not start (then kExit)
};

inline constexpr size_t kMaxFramePayload = 64 * 1024;

struct Frame {
  FrameType type = FrameType::kStdout;
  std::string payload;
};

std::string EncodeFrame(FrameType type, std::string_view payload);
// A resize frame's payload read back: false unless two numbers in 1..10000.
bool ParseResize(std::string_view payload, int* cols, int* rows);

// Reads frames out of the bytes as they arrive.
class FrameReader {
 public:
  enum class Result { kFrame, kNeedMore, kBad };
  void Feed(std::string_view bytes) { buffer_.append(bytes); }
  // The next whole frame into `frame`; kBad (for good) on an unknown type or a payload
  // over kMaxFramePayload, with `error` saying which.
  Result Next(Frame* frame);
  const std::string& error() const { return error_; }
  size_t buffered() const { return buffer_.size() - pos_; }

 private:
  std::string buffer_;
  size_t pos_ = 0;
  std::string error_;
};

}  // namespace gantry
