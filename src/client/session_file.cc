// Sessions kept by the CLI, their refresh, and the login node's local socket.
#include "client/session_file.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "client/http_client.h"
#include "core/json_fields.h"
#include "core/yaml_util.h"

namespace gantry {

namespace {

constexpr int64_t kRefreshBeforeS = 60;  // an access token this close to its end is renewed first

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

int64_t NowS() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// An exclusive lock on the sessions file's lock file, held while a session is refreshed.
// Without a writable config directory there is nothing to share, so no lock either.
class RefreshLock {
 public:
  RefreshLock() {
    std::error_code ec;
    std::filesystem::create_directories(std::filesystem::path(SessionFilePath()).parent_path(), ec);
    fd_ = ::open((SessionFilePath() + ".lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd_ >= 0) ::flock(fd_, LOCK_EX);
  }
  ~RefreshLock() {
    if (fd_ >= 0) ::close(fd_);
  }
  RefreshLock(const RefreshLock&) = delete;
  RefreshLock& operator=(const RefreshLock&) = delete;

 private:
  int fd_ = -1;
};

nlohmann::json ReadAll() {
  auto text = ReadTextFile(SessionFilePath());
  if (!text) return nlohmann::json::object();
  nlohmann::json all = nlohmann::json::parse(*text, nullptr, false);
  return all.is_object() ? all : nlohmann::json::object();
}

Status WriteAll(const nlohmann::json& all) {
  namespace fs = std::filesystem;
  const std::string path = SessionFilePath();
  std::error_code ec;
  fs::create_directories(fs::path(path).parent_path(), ec);
  const std::string tmp = path + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return Status::Internal("cannot write " + tmp + ": " + std::strerror(errno));
  std::string text = all.dump(2) + "\n";
  bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  ok = ::fchmod(fd, 0600) == 0 && ok;
  ::close(fd);
  if (!ok) return Status::Internal("cannot write " + tmp);
  fs::rename(tmp, path, ec);
  if (ec) return Status::Internal("cannot write " + path + ": " + ec.message());
  return Status::Ok();
}

}  // namespace

std::string SessionFilePath() {
  std::string config_home = Env("XDG_CONFIG_HOME").empty() ? Env("HOME") + "/.config" : Env("XDG_CONFIG_HOME");
  return config_home + "/gantry/sessions.json";
}

std::optional<SavedSession> LoadSession(const std::string& server) {
  nlohmann::json all = ReadAll();
  auto it = all.find(server);
  if (it == all.end() || !it->is_object()) return std::nullopt;
  SavedSession s;
  s.server = server;
  s.access_token = StringAt(*it, "access_token");
  s.refresh_token = StringAt(*it, "refresh_token");
  s.access_expires_s = IntAt(*it, "access_expires_s");
  s.user = StringAt(*it, "user");
  s.team = StringAt(*it, "team");
  s.source = StringAt(*it, "source");
  if (s.access_token.empty()) return std::nullopt;
  return s;
}

Status SaveSession(const SavedSession& s) {
  nlohmann::json all = ReadAll();
  all[s.server] = {{"access_token", s.access_token},
                   {"refresh_token", s.refresh_token},
                   {"access_expires_s", s.access_expires_s},
                   {"user", s.user},
                   {"team", s.team},
                   {"source", s.source}};
  return WriteAll(all);
}

void ForgetSession(const std::string& server) {
  nlohmann::json all = ReadAll();
  if (all.erase(server)) WriteAll(all).ok();
}

SavedSession SessionOfAnswer(const std::string& server, const nlohmann::json& answer, const std::string& source) {
  SavedSession s;
  s.server = server;
  s.access_token = StringAt(answer, "access_token");
  s.refresh_token = StringAt(answer, "refresh_token");
  s.access_expires_s = NowS() + std::clamp<int64_t>(IntAt(answer, "expires_in"), 0, 7 * 86400);
  s.user = StringAt(answer, "user");
  s.team = StringAt(answer, "team");
  s.source = source;
  return s;
}

std::string ImpliedServer() {
  nlohmann::json all = ReadAll();
  if (all.size() == 1 && all.begin().value().is_object()) return all.begin().key();
  struct stat st;
  const std::string socket_path = LoginSocketPath();
  if (!all.empty() || ::stat(socket_path.c_str(), &st) != 0 || !S_ISSOCK(st.st_mode)) return "";
  auto answer = AskLoginNode(socket_path);
  if (!answer || StringAt(*answer, "server").empty()) return "";
  SaveSession(SessionOfAnswer(StringAt(*answer, "server"), *answer, "login-node")).ok();
  return StringAt(*answer, "server");
}

std::string LoginSocketPath() {
  std::string env = Env("GANTRY_LOGIN_SOCKET");
  return env.empty() ? "/run/gantry/login.sock" : env;
}

Expected<nlohmann::json> AskLoginNode(const std::string& socket_path) {
  // Only root's service (or one of this account's own) is asked: a socket another user put
  // there would hand out a session of its choosing, and see what is submitted with it.
  struct stat st;
  if (::stat(socket_path.c_str(), &st) != 0 || (st.st_uid != 0 && st.st_uid != ::geteuid())) {
    return Status{StatusCode::kUnauthenticated,
                  "the login node's socket " + socket_path + " is not root's: not asked for a session"};
  }
  sockaddr_un addr{};
  if (socket_path.size() >= sizeof(addr.sun_path)) return Status::Invalid("GANTRY_LOGIN_SOCKET", "path too long");
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, socket_path.c_str(), socket_path.size() + 1);
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Status::Internal(std::string("socket: ") + std::strerror(errno));
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    int e = errno;
    ::close(fd);
    return Status{StatusCode::kUnavailable,
                  "the login node's service (" + socket_path + ") does not answer: " + std::strerror(e)};
  }
  std::string answer;
  char buf[4096];
  pollfd p{fd, POLLIN, 0};
  while (answer.size() < 64 * 1024 && ::poll(&p, 1, 15000) == 1) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n <= 0) break;
    answer.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  nlohmann::json doc = nlohmann::json::parse(answer, nullptr, false);
  if (doc.is_discarded() || !doc.is_object()) {
    return Status{StatusCode::kUnavailable, "the login node's service (" + socket_path + ") gave no session"};
  }
  if (doc.contains("error")) {
    return Status{StatusCode::kUnauthenticated, "the login node's service: " + StringAt(doc, "error")};
  }
  return doc;
}

Expected<std::string> SessionToken(const ClientConfig& c) {
  std::optional<SavedSession> saved = LoadSession(c.server);
  auto fresh = [](const std::optional<SavedSession>& s) { return s && s->access_expires_s - kRefreshBeforeS > NowS(); };
  if (fresh(saved)) return saved->access_token;
  std::optional<RefreshLock> lock;
  if (saved && !saved->refresh_token.empty()) {
    // One command refreshes at a time; one that waited finds the session renewed (a second
    // refresh with the spent token would be refused, and late enough, end the session).
    lock.emplace();
    saved = LoadSession(c.server);
    if (fresh(saved)) return saved->access_token;
  }
  if (saved && !saved->refresh_token.empty()) {
    ClientConfig anonymous = c;
    anonymous.token.clear();
    ApiClient api(anonymous);
    auto a = api.Post("/v1/auth/refresh", nlohmann::json{{"refresh_token", saved->refresh_token}}.dump(),
                      "application/json");
    if (!a) return a.status();
    if (a->status == 200) {
      SavedSession renewed = SessionOfAnswer(c.server, a->body, saved->source);
      if (Status s = SaveSession(renewed); !s.ok()) return s;
      return renewed.access_token;
    }
    if (a->status == 401 || a->status == 403) {
      ForgetSession(c.server);
      return Status{StatusCode::kUnauthenticated,
                    "your session with " + c.server + " has ended (" + DescribeError(*a) + "): run gantry login"};
    }
    return Status{StatusCode::kUnavailable, "the session could not be refreshed: " + DescribeError(*a)};
  }
  struct stat st;
  const std::string socket_path = LoginSocketPath();
  if (::stat(socket_path.c_str(), &st) == 0 && S_ISSOCK(st.st_mode)) {
    auto answer = AskLoginNode(socket_path);
    if (!answer) return answer.status();
    // The service speaks for one server: its session is no use at another.
    auto trimmed = [](std::string u) {
      while (!u.empty() && u.back() == '/') u.pop_back();
      return u;
    };
    if (!StringAt(*answer, "server").empty() && trimmed(StringAt(*answer, "server")) != trimmed(c.server)) {
      return std::string();
    }
    SavedSession s = SessionOfAnswer(c.server, *answer, "login-node");
    SaveSession(s).ok();  // a read-only home still works: the next command asks again
    return s.access_token;
  }
  return std::string();
}

}  // namespace gantry
