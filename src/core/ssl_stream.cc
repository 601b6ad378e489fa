// TLS byte streams: non-blocking SSL_read and SSL_write on a socket.
#include "core/ssl_stream.h"

#include <fcntl.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <unistd.h>

#include <chrono>
#include <cstring>

namespace gantry {

SslStream::SslStream(int fd, SSL* ssl) : fd_(fd), ssl_(ssl) { fcntl(fd_, F_SETFL, fcntl(fd_, F_GETFL) | O_NONBLOCK); }

SslStream::~SslStream() {
  if (ssl_) SSL_free(ssl_);
  if (fd_ >= 0) ::close(fd_);
}

bool SslStream::Pending() const { return HasKept() || SSL_pending(ssl_) > 0; }

ssize_t SslStream::ReadSome(char* buffer, size_t size) {
  if (size_t n = ReadKept(buffer, size)) return static_cast<ssize_t>(n);
  int r = SSL_read(ssl_, buffer, static_cast<int>(std::min<size_t>(size, 1 << 20)));
  if (r > 0) return r;
  int e = SSL_get_error(ssl_, r);
  if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) return kWouldBlock;
  if (e == SSL_ERROR_ZERO_RETURN) return 0;
  return kBroken;
}

bool SslStream::WriteAll(const char* data, size_t size, int timeout_ms) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (size > 0) {
    int r = SSL_write(ssl_, data, static_cast<int>(std::min<size_t>(size, 1 << 20)));
    if (r > 0) {
      data += r;
      size -= static_cast<size_t>(r);
      continue;
    }
    int e = SSL_get_error(ssl_, r);
    if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE) return false;
    auto ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
    if (ms <= 0) return false;
    pollfd p{fd_, static_cast<short>(e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT), 0};
    ::poll(&p, 1, static_cast<int>(ms));
  }
  return true;
}

void SslStream::ShutdownWrite() { SSL_shutdown(ssl_); }

}  // namespace gantry
