// The login node's service: a Unix socket anyone may connect to, answered with a session of
// the connecting process's own Unix account.
#include "cli/login_node_command.h"

#include <fmt/format.h>
#include <grp.h>
#include <poll.h>
#include <pwd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <ostream>
#include <thread>
#include <vector>

#include "client/http_client.h"
#include "core/json_fields.h"

namespace gantry {

namespace {

// The name and Unix groups of `uid`, from the system's account database.
bool AccountOf(uid_t uid, std::string* name, std::vector<std::string>* groups) {
  std::vector<char> buf(16384);
  passwd pw{};
  passwd* found = nullptr;
  if (getpwuid_r(uid, &pw, buf.data(), buf.size(), &found) != 0 || !found) return false;
  *name = pw.pw_name;
  int count = 64;
  std::vector<gid_t> gids(static_cast<size_t>(count));
  if (getgrouplist(pw.pw_name, pw.pw_gid, gids.data(), &count) < 0) {
    gids.resize(static_cast<size_t>(count));
    if (getgrouplist(pw.pw_name, pw.pw_gid, gids.data(), &count) < 0) return false;
  }
  gids.resize(static_cast<size_t>(count));
  for (gid_t gid : gids) {
    group gr{};
    group* g = nullptr;
    std::vector<char> gbuf(65536);
    if (getgrgid_r(gid, &gr, gbuf.data(), gbuf.size(), &g) == 0 && g) groups->push_back(g->gr_name);
  }
  return true;
}

void Answer(int fd, const nlohmann::json& answer) {
  std::string text = answer.dump() + "\n";
  size_t sent = 0;
  while (sent < text.size()) {
    ssize_t n = ::send(fd, text.data() + sent, text.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) return;
    sent += static_cast<size_t>(n);
  }
}

class LoginNodeService {
 public:
  LoginNodeService(ClientConfig config, std::ostream& err) : config_(std::move(config)), err_(err) {}

  // One connection: who is it (the kernel says), and their session.
  void Serve(int fd) {
    ucred cred{};
    socklen_t len = sizeof cred;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
      return Answer(fd, {{"error", "the caller's credentials are unknown"}});
    }
    std::string user;
    std::vector<std::string> groups;
    if (!AccountOf(cred.uid, &user, &groups)) {
      return Answer(fd, {{"error", fmt::format("uid {} has no account on this host", cred.uid)}});
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto cached = cache_.find(cred.uid);
      // A session with 5 minutes left is handed out again, to its own account only.
      if (cached != cache_.end() &&
          cached->second.second - std::chrono::minutes(5) > std::chrono::steady_clock::now()) {
        return Answer(fd, cached->second.first);
      }
    }
    ApiClient api(config_);
    auto a = api.Post("/v1/auth/login-node",
                      nlohmann::json{{"user", user}, {"uid", cred.uid}, {"groups", groups}}.dump(), "application/json");
    if (!a) return Answer(fd, {{"error", a.status().message()}});
    if (a->status != 200) {
      err_ << fmt::format("gantry login-node: no session for {} (uid {}): {}\n", user, cred.uid, DescribeError(*a));
      return Answer(fd, {{"error", DescribeError(*a)}});
    }
    nlohmann::json session = a->body;
    session["server"] = config_.server;
    {
      std::lock_guard<std::mutex> lock(mu_);
      cache_[cred.uid] = {session, std::chrono::steady_clock::now() + std::chrono::seconds(std::clamp<int64_t>(
                                                                          IntAt(session, "expires_in"), 0, 86400))};
    }
    Answer(fd, session);
  }

 private:
  ClientConfig config_;
  std::ostream& err_;
  std::mutex mu_;
  std::map<uid_t, std::pair<nlohmann::json, std::chrono::steady_clock::time_point>> cache_;
};

int Listen(const std::string& path, std::ostream& err) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path dir = fs::path(path).parent_path();
  if (!dir.empty() && !fs::exists(dir)) {
    fs::create_directories(dir, ec);
    ::chmod(dir.c_str(), 0755);
  }
  sockaddr_un addr{};
  if (path.size() >= sizeof(addr.sun_path)) {
    err << "gantry login-node: --socket path too long\n";
    return -1;
  }
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  ::unlink(path.c_str());
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(fd, 64) != 0 ||
      ::chmod(path.c_str(), 0666) != 0) {
    err << "gantry login-node: cannot listen on " << path << ": " << std::strerror(errno) << "\n";
    if (fd >= 0) ::close(fd);
    return -1;
  }
  return fd;
}

}  // namespace

int RunLoginNode(const LoginNodeOptions& o, std::ostream& out, std::ostream& err) {
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);
  ClientConfig config;
  config.server = o.server;
  config.token_file = o.token_file;
  config.ca_cert = o.ca_cert;
  config.no_session = true;  // never this service's own socket
  if (Status s = ResolveClientConfig(config); !s.ok()) {
    err << "gantry login-node: " << s.ToString() << "\n";
    return 2;
  }
  if (config.token.empty()) {
    err << "gantry login-node: the host's token is required (--token-file; gantry token --role login-node)\n";
    return 2;
  }
  int listener = Listen(o.socket, err);
  if (listener < 0) return 2;
  auto service = std::make_shared<LoginNodeService>(config, err);
  std::atomic<bool> stopping{false};
  std::thread acceptor([&] {
    while (!stopping) {
      pollfd p{listener, POLLIN, 0};
      if (::poll(&p, 1, 200) != 1) continue;
      int fd = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) continue;
      std::thread([service, fd] {
        timeval tv{20, 0};
        ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
        service->Serve(fd);
        // What a client wrote is never read (nothing it says counts); drained before the
        // close, so the answer is not cut by a reset.
        ::shutdown(fd, SHUT_WR);
        char sink[4096];
        pollfd p{fd, POLLIN, 0};
        for (int i = 0; i < 16 && ::poll(&p, 1, 200) == 1 && ::read(fd, sink, sizeof sink) > 0; ++i) {
        }
        ::close(fd);
      }).detach();
    }
  });
  out << "gantry login-node: serving " << o.socket << " for " << config.server << std::endl;
  int sig = 0;
  sigwait(&stop, &sig);
  stopping = true;
  acceptor.join();
  ::close(listener);
  ::unlink(o.socket.c_str());
  return 0;
}

}  // namespace gantry
