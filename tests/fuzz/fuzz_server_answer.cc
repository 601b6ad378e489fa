// libFuzzer target: whatever bytes a server (or a machine in the middle of plain HTTP)
// sends back, the CLI's plain-HTTP transport ends the request with an answer or a failure,
// never a crash or a hang. A loopback server thread reads each request and answers with
// the fuzzer's input, then closes.
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>

#include "net/plain_http_connection.h"

namespace {

std::mutex answer_mu;
std::string answer;

// Listens on a loopback port for the life of the process; returns its port.
int StartServer() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 || listen(fd, 16) != 0) std::abort();
  socklen_t len = sizeof(a);
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  std::thread([fd] {
    for (;;) {
      int c = accept(fd, nullptr, nullptr);
      if (c < 0) continue;
      std::string request;
      char buf[4096];
      while (request.find("\r\n\r\n") == std::string::npos) {
        ssize_t n = read(c, buf, sizeof(buf));
        if (n <= 0) break;
        request.append(buf, static_cast<size_t>(n));
      }
      std::string bytes;
      {
        std::lock_guard<std::mutex> lock(answer_mu);
        bytes = answer;
      }
      (void)!send(c, bytes.data(), bytes.size(), MSG_NOSIGNAL);
      shutdown(c, SHUT_WR);
      close(c);
    }
  }).detach();
  return ntohs(a.sin_port);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const int port = StartServer();
  {
    std::lock_guard<std::mutex> lock(answer_mu);
    answer.assign(reinterpret_cast<const char*>(data), size);
  }
  gantry::HttpConnectionOptions options;
  options.read_timeout = std::chrono::seconds(2);
  auto connection = gantry::ConnectPlainHttp("http://127.0.0.1:" + std::to_string(port), options);
  gantry::HttpResponse r = connection->Send({"GET", "/v1/queue", {{"Authorization", "Bearer t"}}, "", ""});
  if (r && (r.status < 0 || r.status > 999)) std::abort();
  if (!r && gantry::DescribeFailure(r).empty()) std::abort();
  return 0;
}
