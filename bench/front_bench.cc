// Front-end benchmark (not a test): latency of /healthz and of an authenticated GET
// /v1/queue while the server holds idle connections, waiting agent polls and half-sent
// requests, against the real `gantry server` on loopback. Prints a table.
//
//   ./build/gantry_front_bench [--idle 1000] [--polls 500] [--slow 200] [--requests 300]
#include <arpa/inet.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <openssl/evp.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include <cstring>
#include <nlohmann/json.hpp>

#include "bench_server.h"

namespace {

using namespace gantry::bench;

std::string Sha256(const std::string& text) {
  unsigned char d[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  EVP_Digest(text.data(), text.size(), d, &n, EVP_sha256(), nullptr);
  std::string hex;
  for (unsigned int i = 0; i < n; ++i) hex += fmt::format("{:02x}", d[i]);
  return hex;
}

// A TCP connection from `from` (a 127.x address) that sends `bytes`; -1 on failure.
int Open(const std::string& address, const std::string& from, const std::string& bytes) {
  std::string rest = address.substr(address.find("://") + 3);
  int port = std::stoi(rest.substr(rest.rfind(':') + 1));
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in local{}, addr{};
  local.sin_family = addr.sin_family = AF_INET;
  inet_pton(AF_INET, from.c_str(), &local.sin_addr);
  inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (bind(fd, reinterpret_cast<sockaddr*>(&local), sizeof(local)) != 0 ||
      connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return -1;
  }
  if (!bytes.empty() && send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL) < 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// Milliseconds of `n` sequential GETs of `path` on one keep-alive connection.
std::vector<double> Latencies(const Server& s, const std::string& path, const std::string& token, int n) {
  httplib::Client c(s.address);
  c.set_keep_alive(true);
  c.set_tcp_nodelay(true);
  c.set_read_timeout(10);
  if (!token.empty()) c.set_bearer_token_auth(token);
  std::vector<double> ms;
  for (int i = 0; i < n; ++i) {
    auto t = Clock::now();
    auto r = c.Get(path);
    if (r && r->status == 200) ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t).count());
  }
  return ms;
}

}  // namespace

int main(int argc, char** argv) {
  int idle = 1000, polls = 500, slow = 200, requests = 300;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--idle")) idle = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--polls")) polls = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--slow")) slow = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--requests")) requests = std::atoi(argv[i + 1]);
  }
  rlimit r{};
  getrlimit(RLIMIT_NOFILE, &r);
  r.rlim_cur = r.rlim_max;
  setrlimit(RLIMIT_NOFILE, &r);
  std::string users = fmt::format(
      "users:\n  - {{name: ana, team: vision, role: user, token_sha256: {}}}\n"
      "  - {{name: agent-n1, team: ops, role: agent, node: n1, token_sha256: {}}}\n",
      Sha256("bench-user"), Sha256("bench-agent"));
  std::string dir = std::filesystem::temp_directory_path().string() + "/gantry-front-bench";
  Server s = StartServer(dir, {"--db", dir + "/cluster.db"}, users);
  httplib::Client agent(s.address);
  agent.set_bearer_token_auth("bench-agent");
  nlohmann::json reg = {
      {"node_id", "n1"},
      {"inventory",
       {{"gpus", {{{"index", 0}, {"uuid", "GPU-1"}, {"name", "Tesla T4"}, {"memory_total_mib", 15360}}}}}}};
  auto answer = agent.Post("/v1/agent/register", reg.dump(), "application/json");
  std::string session = answer ? nlohmann::json::parse(answer->body).value("session", "") : "";

  fmt::print("{:<52} {:>11} {:>11} {:>11} {:>11}\n", "held by the server", "healthz p50", "healthz p99", "queue p50",
             "queue p99");
  std::vector<int> held;
  auto row = [&](const std::string& what) {
    auto h = Latencies(s, "/healthz", "", requests);
    auto q = Latencies(s, "/v1/queue", "bench-user", requests);
    fmt::print("{:<52} {:>8.3f} ms {:>8.3f} ms {:>8.3f} ms {:>8.3f} ms{}\n", what, Percentile(h, 0.5),
               Percentile(h, 0.99), Percentile(q, 0.5), Percentile(q, 0.99),
               static_cast<int>(h.size() + q.size()) == 2 * requests ? "" : "  (some requests failed)");
  };
  row("nothing");
  for (int i = 0; i < idle; ++i) held.push_back(Open(s.address, "127.0.0.2", ""));
  row(fmt::format("{} idle connections", idle));
  std::string poll = fmt::format(
      "GET /v1/agent/orders?node=n1&session={}&ack=0&wait=25 HTTP/1.1\r\nHost: b\r\nAuthorization: Bearer "
      "bench-agent\r\n\r\n",
      session);
  for (int i = 0; i < polls; ++i) held.push_back(Open(s.address, "127.0.0.3", poll));
  row(fmt::format("+ {} waiting agent polls", polls));
  for (int i = 0; i < slow; ++i)
    held.push_back(Open(s.address, "127.0.0.4", "POST /v1/jobs HTTP/1.1\r\nHost: b\r\nCont"));
  row(fmt::format("+ {} half-sent requests (slowloris)", slow));
  int failed = static_cast<int>(std::count(held.begin(), held.end(), -1));
  if (failed > 0) fmt::print("({} of the held connections could not be opened)\n", failed);
  for (int fd : held) {
    if (fd >= 0) close(fd);
  }
  StopServer(s);
  return 0;
}
