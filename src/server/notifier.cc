// Webhook delivery with cpp-httplib; mail through the local sendmail, fed on a pipe.
#include "server/notifier.h"

#include <fmt/format.h>
#include <httplib.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>

#include "core/command.h"
#include "core/notify.h"
#include "state/job_record.h"

namespace gantry {

namespace {

constexpr size_t kMaxQueued = 1000;
constexpr int kMailTimeoutS = 30;

// Each sender gives why a message did not go ("" when it went).
std::string SendWebhook(const std::string& url, const std::string& body) {
  size_t scheme = url.find("://");
  size_t path_at = url.find('/', scheme == std::string::npos ? 0 : scheme + 3);
  std::string origin = path_at == std::string::npos ? url : url.substr(0, path_at);
  std::string path = path_at == std::string::npos ? "/" : url.substr(path_at);
  httplib::Client client(origin);
  client.set_connection_timeout(3);
  client.set_read_timeout(5);
  client.set_write_timeout(5);
  auto res = client.Post(path, body, "application/json");
  if (!res) return "no answer: " + httplib::to_string(res.error());
  if (res->status < 200 || res->status >= 300) return fmt::format("it answered HTTP {}", res->status);
  return "";
}

// Runs `sendmail -t -oi` with the message on its stdin; it went when it exits 0 in time.
std::string SendMail(const std::string& sendmail, const std::string& message) {
  if (::access(sendmail.c_str(), X_OK) != 0) return sendmail + " is not an executable file";
  int in[2];
  if (::pipe2(in, O_CLOEXEC) != 0) return "no pipe to it";
  pid_t pid = ::fork();
  if (pid < 0) {
    ::close(in[0]);
    ::close(in[1]);
    return "it could not be started";
  }
  if (pid == 0) {
    ::dup2(in[0], 0);
    int null = ::open("/dev/null", O_WRONLY);
    if (null >= 0) {
      ::dup2(null, 1);
      ::dup2(null, 2);
    }
    ::execl(sendmail.c_str(), sendmail.c_str(), "-t", "-oi", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::close(in[0]);
  bool wrote = true;
  for (size_t off = 0; off < message.size() && wrote;) {
    ssize_t n = ::write(in[1], message.data() + off, message.size() - off);
    if (n < 0 && errno == EINTR) continue;
    wrote = n > 0;
    if (wrote) off += static_cast<size_t>(n);
  }
  ::close(in[1]);
  int status = 0;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(kMailTimeoutS);
  while (::waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      return fmt::format("it did not finish in {} s", kMailTimeoutS);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (!wrote) return "it did not read the message";
  if (WIFSIGNALED(status)) return fmt::format("it was killed by signal {}", WTERMSIG(status));
  if (WEXITSTATUS(status) != 0) return fmt::format("it exited with status {}", WEXITSTATUS(status));
  return "";
}

}  // namespace

Notifier::Notifier(std::string sendmail) : sendmail_(std::move(sendmail)), thread_([this] { Loop(); }) {}

Notifier::~Notifier() { Stop(); }

void Notifier::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_) return;
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void Notifier::Post(const std::string& url, nlohmann::json body, Done done) {
  if (url.empty()) return;
  Enqueue({url, std::move(body), "", "", "", std::move(done)});
}

void Notifier::Mail(const std::string& to, const std::string& subject, const std::string& body, Done done) {
  if (to.empty()) return;
  Enqueue({"", nullptr, to, subject, body, std::move(done)});
}

void Notifier::Enqueue(Message m) {
  Message dropped;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_) {
      dropped = std::move(m);
    } else {
      if (queue_.size() >= kMaxQueued) {
        (queue_.front().url.empty() ? mails_failed_ : failed_)++;
        dropped = std::move(queue_.front());
        queue_.pop_front();
      }
      queue_.push_back(std::move(m));
    }
  }
  cv_.notify_one();
  if (dropped.done) dropped.done(false, "dropped unsent: too many messages were waiting");
}

uint64_t Notifier::sent() const {
  std::lock_guard<std::mutex> lock(mu_);
  return sent_;
}

uint64_t Notifier::failed() const {
  std::lock_guard<std::mutex> lock(mu_);
  return failed_;
}

uint64_t Notifier::mails_sent() const {
  std::lock_guard<std::mutex> lock(mu_);
  return mails_sent_;
}

uint64_t Notifier::mails_failed() const {
  std::lock_guard<std::mutex> lock(mu_);
  return mails_failed_;
}

std::string Notifier::Deliver(const Message& m) const {
  if (!m.url.empty()) return SendWebhook(m.url, m.body.dump(-1, ' ', false, kReplaceBadUtf8));
  // Header values on one line (no header injection).
  std::string message = "To: " + OneLineExcerpt(m.to) + "\nSubject: " + OneLineExcerpt(m.subject) +
                        "\nContent-Type: text/plain; charset=utf-8\n\n" + m.text;
  return SendMail(sendmail_, message);
}

void Notifier::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping with nothing left to send
    Message m = std::move(queue_.front());
    queue_.pop_front();
    bool stopping = stop_;
    lock.unlock();
    std::string why = "not sent";
    int attempts = 0;
    while (attempts < (stopping ? 1 : 3) && !why.empty()) {
      why = Deliver(m);
      ++attempts;
    }
    const bool ok = why.empty();
    if (!ok) {
      // A webhook's address is a secret (Slack's is its credential): its host only.
      std::string where = m.url.empty() ? m.to : UrlHost(m.url);
      std::fprintf(stderr, "gantry server: %s to %s failed (%d tries): %s\n", m.url.empty() ? "mail" : "webhook",
                   OneLineExcerpt(where).c_str(), attempts, OneLineExcerpt(why).c_str());
    }
    if (m.done) {
      m.done(ok, ok ? ""
                    : fmt::format("{} did not take it ({} tries): {}", m.url.empty() ? sendmail_ : "the webhook",
                                  attempts, why));
    }
    lock.lock();
    if (m.url.empty()) {
      (ok ? mails_sent_ : mails_failed_)++;
    } else {
      (ok ? sent_ : failed_)++;
    }
  }
}

}  // namespace gantry
