// Connections of the HTTP front end: accept with limits, park in epoll while idle, serve
// one request at a time on a worker with deadlines, answer deferred requests later.
#include "server/http_front.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <charconv>
#include <chrono>

#include "core/ssl_stream.h"
#include "server/http_framing.h"

namespace gantry {

using Clock = std::chrono::steady_clock;

struct HttpFront::Conn {
  HttpFront* front = nullptr;
  int fd = -1;
  SSL* ssl = nullptr;
  bool handshaken = false;
  bool registered = false;  // in the epoll set
  std::string peer_ip, local_ip;
  int peer_port = 0, local_port = 0;
  std::string in;  // bytes read and not yet consumed
  size_t in_pos = 0;
  int64_t counted = 0;                           // bytes of `in` counted in the front's buffered_ (read by the poller)
  std::shared_ptr<HttpFront::ClientUse> client;  // its address's use (none for ServeBytes)
  // The request being served.
  int64_t body_budget = -1;  // bytes the body may still take (chunked); -1: not counted
  bool over_limit = false;
  bool bad_framing = false;
  // RequestReady found the chunked body past the limit before all of it came: what the
  // worker reads ends there, and it answers 413.
  mutable bool chunks_over_limit = false;
  bool close_after = false;
  Clock::time_point parked_at;
  Clock::time_point head_since;  // when the first bytes of an incomplete request head came
  bool head_pending = false;
  // Answered and half-closed, its unread body discarded until EOF or `drain_until`, so the
  // client reads the answer instead of a reset (lingering close).
  bool draining = false;
  Clock::time_point drain_until;
  size_t drained = 0;
  bool parked = false;      // guarded by the front's mu_
  bool agent_lane = false;  // the request is a node agent's (Dispatch)
  // A deferred answer (guarded by mu).
  std::mutex mu;
  bool busy = false;      // a worker holds the connection
  bool detached = false;  // the request is answered later
  bool answered = false;  // the later answer is in `pending`
  std::string pending;
  std::atomic<bool> closed{false};
  std::string* capture = nullptr;  // ServeBytes: writes go here, not to a socket
  HttpFront::Taker taker;          // the request upgraded it: the connection goes to this

  bool Buffered() const { return in_pos < in.size() || (ssl && SSL_pending(ssl) > 0); }
  // A whole request head (line and headers) is buffered.
  bool HeadReady() const { return in.find("\r\n\r\n", in_pos) != std::string::npos; }
  // The whole request (head and body) is buffered: a worker serves it without waiting for
  // a byte. A body it will refuse unread (over the limit, bad framing, no valid token by
  // `gate`) need not be there.
  bool RequestReady(size_t max_body, const HttpFront::BodyGate& gate) const;
};

bool HttpFront::Conn::RequestReady(size_t max_body, const HttpFront::BodyGate& gate) const {
  RequestFraming f = AssessRequest(std::string_view(in).substr(in_pos), max_body, gate);
  chunks_over_limit = f.chunks_over_limit;
  return f.ready;
}

namespace {

thread_local std::shared_ptr<HttpFront::Conn> t_conn;

int MsUntil(Clock::time_point deadline) {
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return ms <= 0 ? 0 : static_cast<int>(std::min<int64_t>(ms, 60000));
}

// Waits for `events` on fd until `deadline`; false on timeout or error.
bool WaitFor(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    int ms = MsUntil(deadline);
    if (ms == 0) return false;
    pollfd p{fd, events, 0};
    int n = ::poll(&p, 1, ms);
    if (n > 0) return true;
    if (n < 0 && errno == EINTR) continue;
    if (n == 0 && Clock::now() < deadline) continue;
    return false;
  }
}

bool WriteAll(HttpFront::Conn& c, const char* p, size_t n, int timeout_s) {
  Clock::time_point deadline = Clock::now() + std::chrono::seconds(timeout_s);
  while (n > 0) {
    short want = POLLOUT;
    ssize_t w = -1;
    if (c.ssl) {
      int r = SSL_write(c.ssl, p, static_cast<int>(std::min<size_t>(n, 1 << 20)));
      if (r > 0) {
        w = r;
      } else {
        int e = SSL_get_error(c.ssl, r);
        if (e == SSL_ERROR_WANT_READ) {
          want = POLLIN;
        } else if (e != SSL_ERROR_WANT_WRITE) {
          return false;
        }
      }
    } else {
      w = ::send(c.fd, p, n, MSG_NOSIGNAL);
      if (w < 0 && errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK) return false;
    }
    if (w > 0) {
      p += w;
      n -= static_cast<size_t>(w);
      continue;
    }
    if (!WaitFor(c.fd, want, deadline)) return false;
  }
  return true;
}

constexpr size_t kMaxHead = 64 * 1024;  // a request line and headers larger than this are refused

enum class Fill { kReady, kWait, kClose };

constexpr size_t kMaxDrain = 16 << 20;  // a lingering close discards at most this much

// A draining connection: discards what arrived; kClose at EOF, an error or the cap.
Fill Drain(HttpFront::Conn& c) {
  char buf[65536];
  for (;;) {
    ssize_t n = ::recv(c.fd, buf, sizeof(buf), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK ? Fill::kWait : Fill::kClose;
    if (n == 0) return Fill::kClose;
    c.drained += static_cast<size_t>(n);
    if (c.drained > kMaxDrain) return Fill::kClose;
  }
}

// The poller's part, without blocking: finishes a TLS handshake and reads what has
// arrived until a whole request (head and body) is there. So a client that sends its
// request, or its body, a byte at a time (slowloris) holds a parked connection, never a
// worker, and its deadline closes it. What parked connections buffer is counted in
// `buffered` (and the client address's share); past `budget`, a connection still waiting
// for bytes is dropped when its address holds more than budget / `clients`.
Fill FillRequest(HttpFront::Conn& c, size_t max_body, const HttpFront::BodyGate& gate, std::atomic<int64_t>& buffered,
                 int64_t budget, int clients) {
  if (c.ssl && !c.handshaken) {
    if (!c.head_pending) {  // a handshake is part of the first request: on the head's timer
      c.head_pending = true;
      c.head_since = Clock::now();
    }
    int r = SSL_accept(c.ssl);
    if (r != 1) {
      int e = SSL_get_error(c.ssl, r);
      return e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE ? Fill::kWait : Fill::kClose;
    }
    c.handshaken = true;
  }
  if (c.in_pos == c.in.size()) {
    c.in.clear();
    c.in_pos = 0;
  }
  char buf[16384];
  for (;;) {
    if (c.HeadReady()) {
      if (c.RequestReady(max_body, gate)) return Fill::kReady;
    } else if (c.in.size() - c.in_pos > kMaxHead) {
      return Fill::kClose;
    }
    if (buffered.load() > budget && c.client->buffered.load() > budget / std::max(clients, 1)) return Fill::kClose;
    ssize_t n;
    if (c.ssl) {
      int r = SSL_read(c.ssl, buf, sizeof(buf));
      if (r <= 0) {
        int e = SSL_get_error(c.ssl, r);
        return e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE ? Fill::kWait : Fill::kClose;
      }
      n = r;
    } else {
      n = ::recv(c.fd, buf, sizeof(buf), 0);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK ? Fill::kWait : Fill::kClose;
      if (n == 0) return Fill::kClose;
    }
    c.in.append(buf, static_cast<size_t>(n));
    buffered += n;
    c.client->buffered += n;
    c.counted += n;
    if (!c.head_pending) {
      c.head_pending = true;
      c.head_since = Clock::now();
    }
  }
}

// httplib's view of a connection. Reads come from the connection's buffer alone (kept
// across requests, so pipelined bytes are not lost), within the body budget: the event loop
// handed the request over whole, or to be refused, so its end is the end of what arrived
// and a worker never waits on the socket. Writes of a deferred request are dropped (its
// answer comes later).
class ConnStream : public httplib::Stream {
 public:
  ConnStream(HttpFront::Conn& c, int write_timeout_s) : c_(c), write_timeout_s_(write_timeout_s) {}
  bool is_readable() const override { return c_.Buffered(); }
  bool is_writable() const override { return true; }
  ssize_t read(char* ptr, size_t size) override {
    if (c_.in_pos == c_.in.size()) {  // the end of what arrived: a refused body stays unread
      if (!c_.chunks_over_limit) return 0;
      c_.over_limit = true;
      c_.close_after = true;
      return -1;
    }
    size_t n = std::min(size, c_.in.size() - c_.in_pos);
    if (c_.body_budget >= 0) {
      if (static_cast<int64_t>(n) > c_.body_budget) {
        c_.over_limit = true;
        c_.close_after = true;
        return -1;
      }
      c_.body_budget -= static_cast<int64_t>(n);
    }
    std::memcpy(ptr, c_.in.data() + c_.in_pos, n);
    c_.in_pos += n;
    return static_cast<ssize_t>(n);
  }
  ssize_t write(const char* ptr, size_t size) override {
    {
      std::lock_guard<std::mutex> lock(c_.mu);
      if (c_.detached || c_.taker) return static_cast<ssize_t>(size);
    }
    if (c_.capture) {
      c_.capture->append(ptr, size);
      return static_cast<ssize_t>(size);
    }
    return WriteAll(c_, ptr, size, write_timeout_s_) ? static_cast<ssize_t>(size) : -1;
  }
  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    ip = c_.peer_ip;
    port = c_.peer_port;
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    ip = c_.local_ip;
    port = c_.local_port;
  }
  socket_t socket() const override { return c_.fd; }

 private:
  HttpFront::Conn& c_;
  int write_timeout_s_;
};

// cpp-httplib hands each accepted socket to the task queue; ours takes it at once (the
// front's own threads do the work).
class InlineQueue : public httplib::TaskQueue {
 public:
  void enqueue(std::function<void()> fn) override { fn(); }
  void shutdown() override {}
};

void AddressOf(const sockaddr_storage& a, std::string* ip, int* port) {
  char text[INET6_ADDRSTRLEN] = {};
  if (a.ss_family == AF_INET) {
    const auto* v4 = reinterpret_cast<const sockaddr_in*>(&a);
    inet_ntop(AF_INET, &v4->sin_addr, text, sizeof(text));
    *port = ntohs(v4->sin_port);
  } else if (a.ss_family == AF_INET6) {
    const auto* v6 = reinterpret_cast<const sockaddr_in6*>(&a);
    inet_ntop(AF_INET6, &v6->sin6_addr, text, sizeof(text));
    *port = ntohs(v6->sin6_port);
  }
  *ip = text;
}

const char* Reason(int status) {
  switch (status) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 409: return "Conflict";
    case 429: return "Too Many Requests";
    case 502: return "Bad Gateway";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    default: return status < 500 ? "Client Error" : "Server Error";
  }
}

bool IEquals(const std::string& a, const char* b) { return strcasecmp(a.c_str(), b) == 0; }

}  // namespace

std::string RenderResponse(int status, const std::string& content_type, const std::string& body, bool close) {
  return fmt::format("HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: {}\r\n\r\n{}", status,
                     Reason(status), content_type, body.size(), close ? "close" : "keep-alive", body);
}

HttpFront::HttpFront(FrontLimits limits, std::shared_ptr<TlsContext> tls)
    : limits_(limits), tls_(std::move(tls)), epoll_fd_(epoll_create1(EPOLL_CLOEXEC)) {
  new_task_queue = [] { return new InlineQueue(); };
  set_socket_options(ListenSocketOptions);
  set_payload_max_length(limits_.max_body_bytes);
  set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    Conn* c = t_conn.get();
    bool answered = c && c->bad_framing;
    if (answered) res.status = 400;
    if (!answered) answered = gate_ && gate_(req, res);
    if (!answered) return HandlerResponse::Unhandled;
    // Answered before its body was read: the connection cannot be reused.
    std::string length = req.get_header_value("Content-Length");
    bool body = req.has_header("Transfer-Encoding") || (!length.empty() && length != "0");
    if (c && (body || c->bad_framing)) {
      c->close_after = true;
      res.set_header("Connection", "close");  // the client reconnects instead of reusing it
    }
    return HandlerResponse::Handled;
  });
  poller_ = std::thread([this] { PollLoop(); });
  for (int i = 0; i < limits_.workers; ++i) workers_.emplace_back([this] { WorkLoop(false); });
  for (int i = 0; i < kAgentWorkers; ++i) workers_.emplace_back([this] { WorkLoop(true); });
}

HttpFront::~HttpFront() { Shutdown(); }

void HttpFront::Shutdown() {
  if (stopping_.exchange(true)) return;
  {
    std::lock_guard<std::mutex> lock(work_mu_);  // a worker between its check and its wait sees it
  }
  stop();
  work_cv_.notify_all();
  agent_cv_.notify_all();
  if (poller_.joinable()) poller_.join();
  for (std::thread& t : workers_) t.join();
  workers_.clear();
  std::vector<std::shared_ptr<Conn>> all;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [fd, c] : conns_) all.push_back(c);
  }
  for (auto& c : all) Close(c);
  if (epoll_fd_ >= 0) ::close(epoll_fd_);
  epoll_fd_ = -1;
}

void HttpFront::SetBacklog(int backlog) {
  if (svr_sock_ != INVALID_SOCKET) ::listen(svr_sock_, backlog);
}

HttpFront::Answer HttpFront::Defer() {
  std::shared_ptr<Conn> c = t_conn;
  if (!c) return nullptr;
  {
    std::lock_guard<std::mutex> lock(c->mu);
    c->detached = true;
  }
  return [c](int status, const std::string& content_type, const std::string& body) {
    std::string out = RenderResponse(status, content_type, body, false);
    bool run = false;
    {
      std::lock_guard<std::mutex> lock(c->mu);
      if (c->answered || !c->detached || c->closed) return;
      c->answered = true;
      c->pending = std::move(out);
      run = !c->busy;
      if (run) c->busy = true;
    }
    if (run) c->front->RunOnWorker([c] { c->front->AfterRequest(c); }, c->agent_lane);
  };
}

bool HttpFront::TakeOver(Taker take) {
  std::shared_ptr<Conn> c = t_conn;
  if (!c || !take) return false;
  std::lock_guard<std::mutex> lock(c->mu);
  c->taker = std::move(take);
  return true;
}

void HttpFront::HandOver(const std::shared_ptr<Conn>& c) {
  Taker take = std::move(c->taker);
  c->taker = nullptr;
  if (c->capture || !Forget(c)) return;  // ServeBytes: no socket to give
  std::string kept = c->in.substr(std::min(c->in_pos, c->in.size()));
  std::unique_ptr<ByteStream> stream;
  if (c->ssl) {
    stream = std::make_unique<SslStream>(c->fd, c->ssl);
  } else {
    stream = std::make_unique<FdStream>(c->fd);
  }
  stream->Unread(std::move(kept));
  c->ssl = nullptr;
  c->fd = -1;
  take(std::move(stream));
}

void HttpFront::Uncount(Conn& c) {
  buffered_ -= c.counted;
  if (c.client) c.client->buffered -= c.counted;
  c.counted = 0;
}

bool HttpFront::BodyOverLimit() { return t_conn && t_conn->over_limit; }

bool HttpFront::BadFraming() { return t_conn && t_conn->bad_framing; }

bool HttpFront::process_and_close_socket(socket_t sock) {
  sockaddr_storage peer{}, local{};
  socklen_t plen = sizeof(peer), llen = sizeof(local);
  getpeername(sock, reinterpret_cast<sockaddr*>(&peer), &plen);
  getsockname(sock, reinterpret_cast<sockaddr*>(&local), &llen);
  auto c = std::make_shared<Conn>();
  c->front = this;
  c->fd = sock;
  AddressOf(peer, &c->peer_ip, &c->peer_port);
  AddressOf(local, &c->local_ip, &c->local_port);
  ::fcntl(sock, F_SETFL, ::fcntl(sock, F_GETFL) | O_NONBLOCK);
  std::string refusal;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) {
      refusal = "the server is stopping";
    } else if (static_cast<int>(conns_.size()) >= limits_.max_connections) {
      refusal = fmt::format("too many connections (limit {})", limits_.max_connections);
    } else {
      std::shared_ptr<ClientUse>& use = per_client_[c->peer_ip];
      if (!use) use = std::make_shared<ClientUse>();
      if (use->connections >= limits_.max_per_client) {
        refusal = fmt::format("too many connections from {} (limit {})", c->peer_ip, limits_.max_per_client);
        if (use->connections == 0) per_client_.erase(c->peer_ip);
      } else {
        conns_[sock] = c;
        use->connections++;
        c->client = use;
      }
      clients_ = static_cast<int>(per_client_.size());
    }
  }
  if (!refusal.empty()) {
    if (!tls_) {  // a TLS client would not understand a plain answer
      std::string body = fmt::format(R"({{"error":{{"code":"unavailable","message":"{}","field":""}}}})", refusal);
      std::string out = RenderResponse(503, "application/json", body, true);
      ssize_t ignored = ::send(sock, out.data(), out.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      (void)ignored;
    }
    ::close(sock);
    return true;
  }
  if (tls_) {
    c->ssl = SSL_new(tls_->get());
    SSL_set_fd(c->ssl, sock);
  }
  Park(c, true);
  return true;
}

void HttpFront::Park(const std::shared_ptr<Conn>& c, bool idle) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (c->closed) return;
    c->parked = true;
    if (idle) {
      c->parked_at = Clock::now();
      c->head_pending = false;
    }
  }
  {
    std::lock_guard<std::mutex> lock(c->mu);
    c->busy = false;
  }
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLRDHUP | EPOLLONESHOT;
  ev.data.fd = c->fd;
  int op = c->registered ? EPOLL_CTL_MOD : EPOLL_CTL_ADD;
  c->registered = true;
  if (epoll_ctl(epoll_fd_, op, c->fd, &ev) != 0) Close(c);
}

bool HttpFront::Forget(const std::shared_ptr<Conn>& c) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (c->closed.exchange(true)) return false;
    conns_.erase(c->fd);
    if (--c->client->connections <= 0) per_client_.erase(c->peer_ip);
    clients_ = static_cast<int>(per_client_.size());
  }
  Uncount(*c);
  if (c->registered && epoll_fd_ >= 0) epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, c->fd, nullptr);
  return true;
}

void HttpFront::Close(const std::shared_ptr<Conn>& c) {
  if (!Forget(c)) return;
  if (c->ssl) {
    SSL_free(c->ssl);
    c->ssl = nullptr;
  }
  ::close(c->fd);
}

void HttpFront::PollLoop() {
  epoll_event events[256];
  Clock::time_point swept = Clock::now();
  while (!stopping_) {
    int n = epoll_wait(epoll_fd_, events, 256, 250);
    for (int i = 0; i < n; ++i) {
      std::shared_ptr<Conn> c;
      {
        std::lock_guard<std::mutex> lock(mu_);
        auto it = conns_.find(events[i].data.fd);
        if (it == conns_.end() || !it->second->parked) continue;
        c = it->second;
        c->parked = false;
      }
      Fill fill = c->draining
                      ? Drain(*c)
                      : FillRequest(*c, limits_.max_body_bytes, body_gate_, buffered_,
                                    kBufferedBodies * static_cast<int64_t>(limits_.max_body_bytes), clients_.load());
      if (fill == Fill::kClose) {
        Close(c);
      } else if (fill == Fill::kWait) {
        Park(c, false);  // more of the head to come
      } else {
        {
          std::lock_guard<std::mutex> lock(c->mu);
          c->busy = true;
        }
        Dispatch(c);
      }
    }
    if (Clock::now() - swept >= std::chrono::seconds(1)) {
      SweepIdle();
      swept = Clock::now();
    }
  }
}

void HttpFront::SweepIdle() {
  std::vector<std::shared_ptr<Conn>> idle;
  Clock::time_point now = Clock::now();
  Clock::time_point idle_limit = now - std::chrono::seconds(limits_.idle_timeout_s);
  Clock::time_point head_limit = now - std::chrono::seconds(limits_.request_timeout_s);
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [fd, c] : conns_) {
      if (!c->parked) continue;
      // Idle too long, a request head that did not arrive whole in time (slowloris), or a
      // lingering close that has lingered enough.
      bool over = c->draining       ? c->drain_until < now
                  : c->head_pending ? c->head_since < head_limit
                                    : c->parked_at < idle_limit;
      if (over) idle.push_back(c);
    }
  }
  for (auto& c : idle) Close(c);
}

void HttpFront::RunOnWorker(std::function<void()> task, bool agent_lane) {
  {
    std::lock_guard<std::mutex> lock(work_mu_);
    if (stopping_) return;
    (agent_lane ? agent_work_ : work_).push_back(std::move(task));
  }
  (agent_lane ? agent_cv_ : work_cv_).notify_one();
}

void HttpFront::Dispatch(const std::shared_ptr<Conn>& c) {
  // The request line: METHOD SP /v1/agent/... SP HTTP/1.1
  size_t space = c->in.find(' ', c->in_pos);
  c->agent_lane = space != std::string::npos && c->in.compare(space + 1, 10, "/v1/agent/") == 0;
  RunOnWorker([this, c] { Serve(c); }, c->agent_lane);
}

void HttpFront::WorkLoop(bool agent_lane) {
  std::deque<std::function<void()>>& queue = agent_lane ? agent_work_ : work_;
  std::condition_variable& cv = agent_lane ? agent_cv_ : work_cv_;
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock<std::mutex> lock(work_mu_);
      cv.wait(lock, [&] { return stopping_ || !queue.empty(); });
      if (stopping_) return;
      task = std::move(queue.front());
      queue.pop_front();
    }
    task();
  }
}

void HttpFront::Serve(const std::shared_ptr<Conn>& c) {
  Uncount(*c);
  // The request is buffered (FillRequest): the worker reads nothing more.
  bool keep = ServeOne(c);
  if (c->taker) return HandOver(c);
  if (!keep) c->close_after = true;
  c->chunks_over_limit = false;
  AfterRequest(c);
}

bool HttpFront::ServeOne(const std::shared_ptr<Conn>& c) {
  c->body_budget = -1;
  c->over_limit = c->bad_framing = c->close_after = false;
  ConnStream stream(*c, limits_.write_timeout_s);
  bool client_closes = false;
  t_conn = c;
  bool ok = process_request(stream, false, client_closes, [this, c](httplib::Request& req) {
    // Framing before any handler: one of Content-Length or chunked, a body method without
    // either has an empty body, and a chunked body is counted against the limit as read.
    bool chunked = false;
    // Two lengths (or encodings) are read one way here and another by a proxy in front:
    // the rest of the body would be served as a second request (smuggling).
    if (req.get_header_value_count("Content-Length") > 1 || req.get_header_value_count("Transfer-Encoding") > 1) {
      c->bad_framing = true;
    }
    if (req.has_header("Transfer-Encoding")) {
      chunked = IEquals(req.get_header_value("Transfer-Encoding"), "chunked");
      if (!chunked || req.has_header("Content-Length")) c->bad_framing = true;
    }
    std::string length = req.get_header_value("Content-Length");
    uint64_t n = 0;
    auto [end, ec] = std::from_chars(length.data(), length.data() + length.size(), n);
    if (!length.empty() && (ec != std::errc() || end != length.data() + length.size())) c->bad_framing = true;
    bool body_method = req.method == "POST" || req.method == "PUT" || req.method == "PATCH" || req.method == "DELETE";
    if (body_method && !chunked && length.empty()) req.set_header("Content-Length", "0");
    if (chunked) c->body_budget = static_cast<int64_t>(limits_.max_body_bytes) + 65536;  // plus chunk framing
    // A form body is not parsed into query parameters (nor limited to 8 KiB by httplib).
    if (req.get_header_value("Content-Type").rfind("application/x-www-form-urlencoded", 0) == 0) {
      req.headers.erase("Content-Type");
      req.set_header("Content-Type", "application/octet-stream");
    }
  });
  t_conn.reset();
  return ok && !client_closes && !c->close_after;
}

std::string HttpFront::ServeBytes(const std::string& request) {
  auto c = std::make_shared<Conn>();
  c->front = this;
  c->in = request;
  c->busy = true;
  std::string out;
  c->capture = &out;
  while (ServeOne(c) && !c->taker && c->Buffered()) {
  }
  return out;
}

void HttpFront::AfterRequest(const std::shared_ptr<Conn>& c) {
  std::string answer;
  {
    std::lock_guard<std::mutex> lock(c->mu);
    if (c->detached && !c->answered) {
      c->busy = false;  // the later answer finishes it
      return;
    }
    if (c->detached) {
      answer = std::move(c->pending);
      c->detached = c->answered = false;
    }
  }
  if (!answer.empty() && !WriteAll(*c, answer.data(), answer.size(), limits_.write_timeout_s)) return Close(c);
  if (stopping_) return Close(c);
  if (c->close_after) {
    // Send FIN after the answer, then discard what the client still sends (a body we
    // refused unread) for a moment: closing at once would reset the connection, and the
    // client would lose the answer.
    if (c->ssl) SSL_shutdown(c->ssl);
    ::shutdown(c->fd, SHUT_WR);
    c->draining = true;
    c->drain_until = Clock::now() + std::chrono::seconds(2);
    return Park(c, true);
  }
  if (c->RequestReady(limits_.max_body_bytes, body_gate_)) return Dispatch(c);  // a pipelined request
  // Part of a next request may be buffered already: its head timer starts now.
  bool partial = c->Buffered();
  {
    std::lock_guard<std::mutex> lock(mu_);
    c->head_pending = partial;
    c->head_since = Clock::now();
  }
  Park(c, !partial);
}

}  // namespace gantry
