// A byte stream over TLS: an OpenSSL session on a socket, after its handshake (the server's
// accepted connections, or a client's after SSL_connect). In its own file so that a
// program that never speaks TLS (the `gantry` CLI) links no OpenSSL for it.
#pragma once

#include "core/byte_stream.h"

typedef struct ssl_st SSL;

namespace gantry {

class SslStream : public ByteStream {
 public:
  // Takes `ssl` (freed with the stream) and `fd` (closed with it).
  SslStream(int fd, SSL* ssl);
  ~SslStream() override;
  SslStream(const SslStream&) = delete;
  SslStream& operator=(const SslStream&) = delete;
  int fd() const override { return fd_; }
  ssize_t ReadSome(char* buffer, size_t size) override;
  bool WriteAll(const char* data, size_t size, int timeout_ms) override;
  using ByteStream::WriteAll;
  bool Pending() const override;
  void ShutdownWrite() override;

 private:
  int fd_;
  SSL* ssl_;
};

}  // namespace gantry
