// The server's HTTP front end: cpp-httplib parses requests and routes them, but the
// connections are ours. An idle connection (keep-alive, or a client that sends nothing)
// waits in one epoll set and costs a descriptor, not a thread; a request gets a worker
// only once it has arrived whole (line, headers, body), which it must within a deadline;
// node agents' requests have workers of their own;
// a long poll answers later through Defer() and holds no thread while it waits. Limits on
// connections per client address and in total, the body limit on every transfer encoding
// before any handler runs, and TLS (OpenSSL) on the same path.
#pragma once

#include <httplib.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "core/byte_stream.h"
#include "core/status.h"
#include "server/http_framing.h"

typedef struct ssl_ctx_st SSL_CTX;

namespace gantry {

struct FrontLimits {
  int workers = 16;                 // threads that parse requests and run handlers (and 4 for agents)
  int max_connections = 10000;      // open connections in total; more are answered 503
  int max_per_client = 1000;        // open connections from one client address
  int request_timeout_s = 10;       // a request's line, headers and body must arrive within this
  int idle_timeout_s = 60;          // a keep-alive connection idle this long is closed
  int write_timeout_s = 30;         // a client that takes no bytes this long is dropped
  size_t max_body_bytes = 1 << 20;  // larger bodies get 413, whatever their transfer encoding
};

// TLS 1.2 suites offered by default: forward-secret AEAD only (no CBC, no SHA-1 MACs, no
// static RSA key exchange). TLS 1.3's suites are all AEAD.
inline constexpr const char* kDefaultTlsCiphers =
    "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:"
    "ECDHE-RSA-AES256-GCM-SHA384:ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305";
// TLS 1.2 at least, and `ciphers` (OpenSSL's cipher list syntax; empty: the default) for
// TLS 1.2; false when the list names no suite OpenSSL knows.
bool RestrictTls(SSL_CTX* ctx, const std::string& ciphers);

// A server certificate and key (PEM) for TLS 1.2+.
class TlsContext {
 public:
  static Expected<std::shared_ptr<TlsContext>> Load(const std::string& cert_file, const std::string& key_file,
                                                    const std::string& ciphers = "");
  ~TlsContext();
  SSL_CTX* get() const { return ctx_; }

 private:
  explicit TlsContext(SSL_CTX* ctx) : ctx_(ctx) {}
  SSL_CTX* ctx_;
};

// A whole HTTP/1.1 answer: status line, Content-Type, Content-Length, Connection.
std::string RenderResponse(int status, const std::string& content_type, const std::string& body, bool close);

// Options of a listening socket: SO_REUSEADDR (a restart binds at once) but not
// cpp-httplib's default SO_REUSEPORT, with which a second server on a port in use would
// start too and take half of its connections.
void ListenSocketOptions(int socket);

class HttpFront : public httplib::Server {
 public:
  struct Conn;
  // One client address: its open connections and the bytes their unfinished requests hold.
  struct ClientUse {
    int connections = 0;
    std::atomic<int64_t> buffered{0};
  };
  // An answer given later: status, content type, body. Call it once, from any thread.
  using Answer = std::function<void(int status, const std::string& content_type, const std::string& body)>;
  // Runs before a handler, with the request's headers (its body not read yet): return true
  // after filling `res` to answer at once (the body is never read).
  using Gate = std::function<bool(const httplib::Request& req, httplib::Response& res)>;
  // Whether a request with this path and Authorization header may have its body read: the
  // event loop waits for a body only then, else a worker answers at once (the Gate refuses
  // it). Called on the poller thread: no side effects.
  using BodyGate = gantry::BodyGate;

  HttpFront(FrontLimits limits, std::shared_ptr<TlsContext> tls);
  ~HttpFront() override;

  void SetGate(Gate gate) { gate_ = std::move(gate); }
  void SetBodyGate(BodyGate gate) { body_gate_ = std::move(gate); }
  // After binding: a listen backlog for bursts of connections (cpp-httplib listens with 5,
  // which makes a burst of clients wait out SYN retransmits).
  void SetBacklog(int backlog);
  // Stops listening, closes every connection and joins the threads.
  void Shutdown();
  // Serves `request` as if a client had sent these bytes and then waited: returns what the
  // front end writes back (the fuzz target of the request path; no socket, no thread).
  std::string ServeBytes(const std::string& request);

  // From a handler: this request is answered later through the returned Answer; what
  // the handler itself puts in its Response is dropped. Null outside a front worker.
  static Answer Defer();
  // From a handler of an upgrade (an answer of 101, or a refusal the taker writes itself):
  // the connection leaves the front end when the handler returns, with nothing written on
  // it by the front end, and `take` gets it as a stream (TLS included, and whatever the
  // client sent past the request), on the worker's thread: it must hand it on at once.
  // False outside a front worker.
  using Taker = std::function<void(std::unique_ptr<ByteStream> stream)>;
  static bool TakeOver(Taker take);
  // From a handler or the error handler: the request's body was over the limit.
  static bool BodyOverLimit();
  // The request had both Content-Length and Transfer-Encoding, two of either, an encoding
  // other than chunked, or a malformed length (it is answered 400 before any handler).
  static bool BadFraming();

 private:
  bool process_and_close_socket(socket_t sock) override;
  void PollLoop();
  void WorkLoop(bool agent_lane);
  // Runs `task` on a worker of the agent lane (node agents' calls) or the main lane (the
  // rest): agents' heartbeats and reports never wait behind users' requests.
  void RunOnWorker(std::function<void()> task, bool agent_lane);
  // Hands a connection whose request is buffered to a worker of its lane.
  void Dispatch(const std::shared_ptr<Conn>& c);
  void Serve(const std::shared_ptr<Conn>& c);
  // One request on the connection: framing checks, cpp-httplib's parse and routing, the
  // handler. False when the connection must close.
  bool ServeOne(const std::shared_ptr<Conn>& c);
  void AfterRequest(const std::shared_ptr<Conn>& c);
  // Waits for the connection's next bytes in the epoll set; `idle` starts its idle timer
  // (else it waits for the rest of a request head, on the head's timer).
  void Park(const std::shared_ptr<Conn>& c, bool idle);
  void Close(const std::shared_ptr<Conn>& c);
  // Takes a connection out of the tables, the counts and the epoll set (its socket stays
  // open); false when it was gone already.
  bool Forget(const std::shared_ptr<Conn>& c);
  // Gives a taken-over connection (TakeOver) to its taker, out of the front end's tables.
  void HandOver(const std::shared_ptr<Conn>& c);
  void SweepIdle();
  // A connection's buffered bytes leave the count (a worker took it, or it closed).
  void Uncount(Conn& c);

  FrontLimits limits_;
  std::shared_ptr<TlsContext> tls_;
  Gate gate_;
  BodyGate body_gate_;
  int epoll_fd_ = -1;
  std::atomic<bool> stopping_{false};
  // Bytes parked connections hold (requests and bodies not whole yet); past this many
  // bodies' worth in all, a connection whose client address holds more than its fair share
  // (the total over the addresses connected) is closed: many slow senders cannot fill the
  // memory, and one address's cannot push out another's requests.
  std::atomic<int64_t> buffered_{0};
  static constexpr int64_t kBufferedBodies = 64;

  std::mutex mu_;  // guards conns_, per_client_ and each ClientUse's connections
  std::map<int, std::shared_ptr<Conn>> conns_;
  std::map<std::string, std::shared_ptr<ClientUse>> per_client_;
  std::atomic<int> clients_{0};  // per_client_.size(), for the poller's fair share

  std::mutex work_mu_;
  std::condition_variable work_cv_;               // the main lane's
  std::condition_variable agent_cv_;              // the agent lane's
  std::deque<std::function<void()>> work_;        // the main lane
  std::deque<std::function<void()>> agent_work_;  // the agent lane
  std::vector<std::thread> workers_;
  static constexpr int kAgentWorkers = 4;
  std::thread poller_;
};

}  // namespace gantry
