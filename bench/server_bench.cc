// Server benchmark (not a test): durable submits per second over HTTP keep-alive from
// concurrent clients, and submit-to-assignment latency, against the real `gantry server
// --standalone` with fake GPUs on loopback. Prints a table.
//
//   ./build/gantry_server_bench [--clients 8] [--jobs 20000] [--latency-jobs 4000] [--db postgresql://...]
//
// With --db, every server runs on that PostgreSQL database, emptied (its public schema
// dropped, with psql) before each start; without it, on SQLite in the data directory.
#include <fmt/format.h>
#include <httplib.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>
#include <vector>

#include "bench_server.h"

namespace {

using namespace gantry::bench;

// CPU seconds (user + system) the process has used so far.
double CpuSeconds(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  std::istringstream rest(stat.substr(stat.rfind(')') + 2));
  std::string field;
  double ticks = 0;
  for (int i = 3; i <= 15 && rest >> field; ++i) {
    if (i == 14 || i == 15) ticks += std::stod(field);
  }
  return ticks / static_cast<double>(sysconf(_SC_CLK_TCK));
}

struct Result {
  double seconds = 0;
  int ok = 0;
  int started_at_once = 0;
  std::vector<double> latency_ms;
};

// `clients` threads share `jobs` submits of `body`, each on its own keep-alive connection.
Result Submit(const Server& s, int clients, int jobs, const std::string& body) {
  std::string token = Token(s);
  std::atomic<int> next{0};
  std::vector<Result> per(clients);
  auto t0 = Clock::now();
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&, c] {
      httplib::Client http(s.address);
      http.set_keep_alive(true);
      http.set_tcp_nodelay(true);
      http.set_bearer_token_auth(token);
      while (next++ < jobs) {
        auto a = Clock::now();
        auto r = http.Post("/v1/jobs", body, "application/json");
        double ms = std::chrono::duration<double, std::milli>(Clock::now() - a).count();
        if (!r || r->status != 201) continue;
        per[c].ok++;
        per[c].latency_ms.push_back(ms);
        if (r->body.find("\"state\":\"running\"") != std::string::npos) per[c].started_at_once++;
      }
    });
  }
  for (auto& t : threads) t.join();
  Result all;
  all.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  for (auto& p : per) {
    all.ok += p.ok;
    all.started_at_once += p.started_at_once;
    all.latency_ms.insert(all.latency_ms.end(), p.latency_ms.begin(), p.latency_ms.end());
  }
  return all;
}

}  // namespace

int main(int argc, char** argv) {
  int clients = 8, jobs = 20000, latency_jobs = 4000;
  std::string db;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--db")) db = argv[i + 1];
    if (!std::strcmp(argv[i], "--clients")) clients = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--jobs")) jobs = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--latency-jobs")) latency_jobs = std::atoi(argv[i + 1]);
  }
  std::string dir = std::filesystem::temp_directory_path().string() + "/gantry-server-bench";
  // Each server starts on an empty store.
  auto with_db = [&](std::vector<std::string> args) {
    if (db.empty()) return args;
    std::string reset = "psql -q '" + db + "' -c 'DROP SCHEMA public CASCADE; CREATE SCHEMA public' >/dev/null 2>&1";
    if (std::system(reset.c_str()) != 0) fmt::print(stderr, "cannot empty {}\n", db);
    args.insert(args.end(), {"--db", db});
    return args;
  };
  if (!db.empty()) fmt::print("store: PostgreSQL {}\n", db);
  fmt::print("{:<58} {:>10} {:>9} {:>9} {:>9} {:>12}\n", "scenario", "submits/s", "p50 ms", "p99 ms", "started",
             "server us/op");
  for (bool fsync : {true, false}) {
    // Throughput: the queue grows far past the cluster (512 GPUs, jobs that hold theirs).
    std::vector<std::string> args = {"--standalone", "--fake-gpus", "64x8xA100-80GB"};
    if (!fsync) args.push_back("--no-fsync");
    Server s = StartServer(dir, with_db(args));
    double cpu0 = CpuSeconds(s.pid);
    Result r = Submit(s, clients, jobs, R"({"gpus": 1, "name": "bench", "hold_gpus": "1d"})");
    double cpu_us = (CpuSeconds(s.pid) - cpu0) * 1e6 / std::max(1, r.ok);
    fmt::print("{:<58} {:>10.0f} {:>9.2f} {:>9.2f} {:>9} {:>12.0f}\n",
               fmt::format("{} submits, {} clients, queue grows to {}{}", jobs, clients, jobs - 512,
                           fsync ? "" : " (--no-fsync)"),
               r.ok / r.seconds, Percentile(r.latency_ms, 0.5), Percentile(r.latency_ms, 0.99), r.started_at_once,
               cpu_us);
    StopServer(s);
  }
  // Submit to assignment: every job fits on free GPUs (0.1 of a GPU, 1 s long); the reply
  // comes after the commit that holds the start, so its latency bounds submit-to-assignment.
  Server s = StartServer(dir, with_db({"--standalone", "--fake-gpus", "64x8xA100-80GB"}));
  double cpu0 = CpuSeconds(s.pid);
  Result r = Submit(s, clients, latency_jobs, R"({"gpu_fraction": 0.1, "hold_gpus": "1s"})");
  double cpu_us = (CpuSeconds(s.pid) - cpu0) * 1e6 / std::max(1, r.ok);
  fmt::print("{:<58} {:>10.0f} {:>9.2f} {:>9.2f} {:>9} {:>12.0f}\n",
             fmt::format("submit-to-assignment, {} jobs on free GPUs", latency_jobs), r.ok / r.seconds,
             Percentile(r.latency_ms, 0.5), Percentile(r.latency_ms, 0.99), r.started_at_once, cpu_us);
  std::string metrics;
  {
    httplib::Client http(s.address);
    auto m = http.Get("/metrics");
    if (m) metrics = m->body;
  }
  // The server's own submit-to-start histogram (monotonic clock, first start of each job):
  // the quantile is the upper bound of the bucket that holds it.
  std::vector<std::pair<double, double>> buckets;  // le, cumulative count
  std::istringstream lines(metrics);
  std::string line;
  const std::string prefix = "gantry_submit_to_start_seconds_bucket{le=\"";
  while (std::getline(lines, line)) {
    if (line.rfind(prefix, 0) != 0) continue;
    std::string le = line.substr(prefix.size(), line.find('"', prefix.size()) - prefix.size());
    double bound = le == "+Inf" ? INFINITY : std::stod(le);
    buckets.emplace_back(bound, std::stod(line.substr(line.rfind(' ') + 1)));
  }
  auto quantile = [&](double q) {
    double total = buckets.empty() ? 0 : buckets.back().second;
    for (auto& [bound, count] : buckets) {
      if (count >= q * total) return bound * 1000;
    }
    return static_cast<double>(INFINITY);
  };
  fmt::print("server-side submit-to-start over {} jobs: p50 <= {} ms, p99 <= {} ms (histogram bucket bounds)\n",
             buckets.empty() ? 0 : static_cast<int>(buckets.back().second), quantile(0.5), quantile(0.99));
  StopServer(s);
  std::filesystem::remove_all(dir);
  return 0;
}
