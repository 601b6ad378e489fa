// Test certificates for TLS on loopback: a CA and a server certificate for 127.0.0.1.
#pragma once

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "command_util.h"

namespace gantry::testing {

// A test CA (DIR/ca.pem) and a server certificate for 127.0.0.1 signed by it (DIR/server.pem,
// DIR/server.key), EC P-256; the openssl commands' exit code, their output in `out`.
inline int MakeTestCertificates(const std::string& dir, std::string* out) {
  std::filesystem::create_directories(dir);
  return RunCommand(
      fmt::format("cd {} && openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
                  "-keyout ca.key -out ca.pem -days 2 -subj /CN=gantry-test-ca 2>&1 && "
                  "openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout server.key "
                  "-out server.csr -subj /CN=127.0.0.1 2>&1 && printf 'subjectAltName=IP:127.0.0.1' > ext && "
                  "openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 "
                  "-extfile ext -out server.pem 2>&1",
                  dir),
      out);
}

// One set of test certificates for this test process, made when first asked for: the
// directory holding ca.pem, server.pem and server.key.
inline const std::string& SharedTestCertificates() {
  static const std::string dir = [] {
    std::string d = ::testing::TempDir() + "gantry-test-tls-" + std::to_string(::getpid());
    std::string out;
    if (MakeTestCertificates(d, &out) != 0) ADD_FAILURE() << "openssl: " << out;
    return d;
  }();
  return dir;
}

}  // namespace gantry::testing
