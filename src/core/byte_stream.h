// A connected byte stream that a thread can poll: a socket (or one end of a socketpair),
// or TLS over a socket (ssl_stream.h), with bytes that were read past an HTTP upgrade's
// head kept to be read first. Relay() joins two of them: the server's part of an
// interactive session (a user's connection to an agent's) and of a proxied port.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <memory>
#include <string>

namespace gantry {

class ByteStream {
 public:
  virtual ~ByteStream() = default;
  // The descriptor to poll for readability.
  virtual int fd() const = 0;
  // Reads what is there without blocking: > 0 bytes, 0 at the end of the stream, kWouldBlock
  // when nothing is there yet, kBroken on an error.
  virtual ssize_t ReadSome(char* buffer, size_t size) = 0;
  // Writes all of `data` within `timeout_ms`; false when it cannot (broken, or too slow).
  virtual bool WriteAll(const char* data, size_t size, int timeout_ms) = 0;
  // Bytes are ready to read without waiting on the descriptor (kept or decrypted).
  virtual bool Pending() const = 0;
  // Tells the peer no more bytes come (the write side's end), where the stream can.
  virtual void ShutdownWrite() = 0;
  // Puts bytes back, to be read before anything else (what was read past an HTTP head).
  void Unread(std::string bytes);

  bool WriteAll(const std::string& data, int timeout_ms) { return WriteAll(data.data(), data.size(), timeout_ms); }

  static constexpr ssize_t kWouldBlock = -1;
  static constexpr ssize_t kBroken = -2;

 protected:
  // Bytes put back are read first: how many were copied (0: none left).
  size_t ReadKept(char* buffer, size_t size);
  bool HasKept() const { return kept_pos_ < kept_.size(); }

 private:
  std::string kept_;
  size_t kept_pos_ = 0;
};

// A socket, pipe or terminal (made non-blocking), closed with the stream.
class FdStream : public ByteStream {
 public:
  explicit FdStream(int fd);
  ~FdStream() override;
  FdStream(const FdStream&) = delete;
  FdStream& operator=(const FdStream&) = delete;
  int fd() const override { return fd_; }
  ssize_t ReadSome(char* buffer, size_t size) override;
  bool WriteAll(const char* data, size_t size, int timeout_ms) override;
  using ByteStream::WriteAll;
  bool Pending() const override { return HasKept(); }
  void ShutdownWrite() override;
  // Gives up the descriptor (the caller owns it now); the stream is empty after.
  int Release();

 private:
  int fd_;
};

// Waits until `stream` has bytes (or its end) or `timeout_ms` passes; false on timeout.
// `stop`, when given and set, ends the wait early (checked every 200 ms).
bool WaitReadable(const ByteStream& stream, int timeout_ms, const std::atomic<bool>* stop = nullptr);

// Reads one line ending in "\r\n\r\n" (an HTTP head) of at most `max` bytes within
// `timeout_ms`; bytes read past it go to `rest`. False on EOF, an error, the cap or timeout.
bool ReadHttpHead(ByteStream& stream, size_t max, int timeout_ms, std::string* head, std::string* rest);

// Copies bytes both ways until either side ends or breaks, or `stop` is set; then tells the
// other side it ended. A side that takes no byte for `write_timeout_ms` ends the relay;
// `idle_timeout_ms` (0: none) with no byte either way ends it too. Returns the bytes
// copied a to b and b to a.
struct RelayCounts {
  int64_t a_to_b = 0;
  int64_t b_to_a = 0;
};
RelayCounts Relay(ByteStream& a, ByteStream& b, int write_timeout_ms, int idle_timeout_ms,
                  const std::atomic<bool>* stop = nullptr);

// Copies `from` to `to` until `from` ends, `to` hangs up or breaks, `stop` is set, or
// neither moves for `idle_timeout_ms`; what `to` sends meanwhile is read and dropped.
// Returns the bytes copied.
int64_t CopyToEnd(ByteStream& from, ByteStream& to, int write_timeout_ms, int idle_timeout_ms,
                  const std::atomic<bool>* stop = nullptr);

}  // namespace gantry
