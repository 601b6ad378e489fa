// Byte streams over sockets, the wait for a readable one, an HTTP head reader and the
// two-way relay.
#include "core/byte_stream.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <functional>

namespace gantry {

namespace {

using SteadyClock = std::chrono::steady_clock;

int MsLeft(SteadyClock::time_point deadline) {
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - SteadyClock::now()).count();
  return ms <= 0 ? 0 : static_cast<int>(ms);
}

}  // namespace

void ByteStream::Unread(std::string bytes) {
  kept_ = std::move(bytes) + kept_.substr(kept_pos_);
  kept_pos_ = 0;
}

size_t ByteStream::ReadKept(char* buffer, size_t size) {
  size_t n = std::min(size, kept_.size() - kept_pos_);
  std::memcpy(buffer, kept_.data() + kept_pos_, n);
  kept_pos_ += n;
  if (kept_pos_ == kept_.size()) {
    kept_.clear();
    kept_pos_ = 0;
  }
  return n;
}

FdStream::FdStream(int fd) : fd_(fd) {
  if (fd_ >= 0) fcntl(fd_, F_SETFL, fcntl(fd_, F_GETFL) | O_NONBLOCK);
}

FdStream::~FdStream() {
  if (fd_ >= 0) ::close(fd_);
}

int FdStream::Release() {
  int fd = fd_;
  fd_ = -1;
  return fd;
}

ssize_t FdStream::ReadSome(char* buffer, size_t size) {
  if (size_t n = ReadKept(buffer, size)) return static_cast<ssize_t>(n);
  for (;;) {
    ssize_t n = ::read(fd_, buffer, size);
    if (n >= 0) return n;
    if (errno == EINTR) continue;
    // A terminal's master side ends with EIO once its last process closed the other side.
    if (errno == EIO) return 0;
    return errno == EAGAIN || errno == EWOULDBLOCK ? kWouldBlock : kBroken;
  }
}

bool FdStream::WriteAll(const char* data, size_t size, int timeout_ms) {
  SteadyClock::time_point deadline = SteadyClock::now() + std::chrono::milliseconds(timeout_ms);
  while (size > 0) {
    ssize_t n = ::send(fd_, data, size, MSG_NOSIGNAL);
    if (n < 0 && errno == ENOTSOCK) n = ::write(fd_, data, size);  // a terminal or a pipe
    if (n > 0) {
      data += n;
      size -= static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK) return false;
    int ms = MsLeft(deadline);
    if (ms == 0) return false;
    pollfd p{fd_, POLLOUT, 0};
    if (::poll(&p, 1, ms) < 0 && errno != EINTR) return false;
  }
  return true;
}

void FdStream::ShutdownWrite() {
  if (fd_ >= 0) ::shutdown(fd_, SHUT_WR);
}

bool WaitReadable(const ByteStream& stream, int timeout_ms, const std::atomic<bool>* stop) {
  SteadyClock::time_point deadline = SteadyClock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    if (stream.Pending()) return true;
    if (stop && stop->load()) return false;
    int ms = MsLeft(deadline);
    if (ms == 0) return false;
    pollfd p{stream.fd(), POLLIN, 0};
    int n = ::poll(&p, 1, std::min(ms, 200));
    if (n > 0) return true;
    if (n < 0 && errno != EINTR) return false;
  }
}

bool ReadHttpHead(ByteStream& stream, size_t max, int timeout_ms, std::string* head, std::string* rest) {
  SteadyClock::time_point deadline = SteadyClock::now() + std::chrono::milliseconds(timeout_ms);
  std::string got;
  char buf[4096];
  for (;;) {
    if (size_t end = got.find("\r\n\r\n"); end != std::string::npos) {
      *head = got.substr(0, end + 4);
      *rest = got.substr(end + 4);
      return true;
    }
    if (got.size() > max) return false;
    if (!WaitReadable(stream, MsLeft(deadline))) return false;
    ssize_t n = stream.ReadSome(buf, sizeof(buf));
    if (n == ByteStream::kWouldBlock) continue;
    if (n <= 0) return false;
    got.append(buf, static_cast<size_t>(n));
  }
}

namespace {

// Waits for bytes (or an end) on either stream and calls `on_ready(ready_a, ready_b)` until it
// returns false, `stop` is set, polling fails, or nothing moved for `idle_timeout_ms` (0:
// no limit) since `last`, which `on_ready` moves on when bytes move.
void WhileEither(ByteStream& a, ByteStream& b, int idle_timeout_ms, const std::atomic<bool>* stop,
                 const SteadyClock::time_point& last, const std::function<bool(bool, bool)>& on_ready) {
  for (;;) {
    if (stop && stop->load()) return;
    bool ready_a = a.Pending(), ready_b = b.Pending();
    if (!ready_a && !ready_b) {
      pollfd p[2] = {{a.fd(), POLLIN, 0}, {b.fd(), POLLIN, 0}};
      int n = ::poll(p, 2, 500);
      if (n < 0 && errno != EINTR) return;
      if (n <= 0) {
        auto idle = std::chrono::duration_cast<std::chrono::milliseconds>(SteadyClock::now() - last).count();
        if (idle_timeout_ms > 0 && idle > idle_timeout_ms) return;
        continue;
      }
      ready_a = p[0].revents != 0;
      ready_b = p[1].revents != 0;
    }
    if (!on_ready(ready_a, ready_b)) return;
  }
}

}  // namespace

RelayCounts Relay(ByteStream& a, ByteStream& b, int write_timeout_ms, int idle_timeout_ms,
                  const std::atomic<bool>* stop) {
  RelayCounts counts;
  char buf[65536];
  SteadyClock::time_point last = SteadyClock::now();
  // Moves what `from` has to `to`; false when the relay ends.
  auto pump = [&](ByteStream& from, ByteStream& to, int64_t& count) {
    for (int round = 0; round < 16; ++round) {  // a busy side cannot starve the other
      ssize_t n = from.ReadSome(buf, sizeof(buf));
      if (n == ByteStream::kWouldBlock) return true;
      if (n <= 0) {
        to.ShutdownWrite();
        return false;
      }
      if (!to.WriteAll(buf, static_cast<size_t>(n), write_timeout_ms)) return false;
      count += n;
      last = SteadyClock::now();
      if (!from.Pending()) return true;
    }
    return true;
  };
  WhileEither(a, b, idle_timeout_ms, stop, last, [&](bool ready_a, bool ready_b) {
    return (!ready_a || pump(a, b, counts.a_to_b)) && (!ready_b || pump(b, a, counts.b_to_a));
  });
  return counts;
}

int64_t CopyToEnd(ByteStream& from, ByteStream& to, int write_timeout_ms, int idle_timeout_ms,
                  const std::atomic<bool>* stop) {
  int64_t copied = 0;
  char buf[65536];
  SteadyClock::time_point last = SteadyClock::now();
  WhileEither(from, to, idle_timeout_ms, stop, last, [&](bool ready_from, bool ready_to) {
    if (ready_to) {  // the reader's own bytes go nowhere; its end ends the copy
      ssize_t n = to.ReadSome(buf, sizeof(buf));
      if (n == 0 || (n < 0 && n != ByteStream::kWouldBlock)) return false;
    }
    if (!ready_from) return true;
    ssize_t n = from.ReadSome(buf, sizeof(buf));
    if (n == ByteStream::kWouldBlock) return true;
    if (n <= 0 || !to.WriteAll(buf, static_cast<size_t>(n), write_timeout_ms)) return false;
    copied += n;
    last = SteadyClock::now();
    return true;
  });
  to.ShutdownWrite();
  return copied;
}

}  // namespace gantry
