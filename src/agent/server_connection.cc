// The remote agent's HTTP loops: register, long-poll orders, send reports.
#include "agent/server_connection.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <chrono>
#include <ostream>
#include <set>
#include <thread>

#include "net/stream_upgrade_tls.h"
#include "net/tls_http_connection.h"
#include "protocol/order_wire.h"
#include "protocol/spec_json.h"

namespace gantry {

namespace {

// Each request tries every server once (following what standbys say); the loops wait and
// try again themselves.
constexpr std::chrono::milliseconds kOneRound{0};
// A report is answered at once; one not answered in this long is sent again.
constexpr std::chrono::seconds kReportTimeout{5};

// Connections with the agent's CA and `read_timeout` (a long poll's wait and more).
HttpConnector Connector(const ServerConnectionOptions& o, std::chrono::seconds read_timeout) {
  HttpConnectionOptions options;
  options.ca_cert = o.ca_cert;
  options.read_timeout = read_timeout;
  return [options](const std::string& url) { return ConnectAnyScheme(url, options); };
}

}  // namespace

HttpRequest ServerConnection::Request(std::string method, std::string path, std::string body) {
  HttpRequest q{std::move(method), std::move(path), {}, std::move(body), "application/json"};
  q.headers.emplace("Authorization", "Bearer " + Token());
  return q;
}

std::string ServerConnection::Token() {
  std::string rotated = token_file_ ? token_file_->Current() : "";
  return rotated.empty() ? options_.token : rotated;
}

nlohmann::json RegistrationToJson(const Registration& reg) {
  nlohmann::json runs = nlohmann::json::array();
  for (const RunReport& r : reg.runs) runs.push_back(RunReportToJson(r));
  nlohmann::json body = {{"node_id", reg.node_id}, {"inventory", InventoryToJson(reg.inventory)}, {"runs", runs}};
  if (reg.cpus >= 0) body["cpus"] = reg.cpus;
  if (reg.memory_mib >= 0) body["memory_mib"] = reg.memory_mib;
  if (!reg.labels.empty()) body["labels"] = reg.labels;
  if (!reg.network.address.empty()) body["address"] = reg.network.address;
  body["ports"] = fmt::format("{}-{}", reg.network.port_first, reg.network.port_last);
  return body;
}

ServerConnection::ServerConnection(ServerConnectionOptions options, std::ostream& err)
    : options_(std::move(options)),
      err_(err),
      token_file_(options_.token_file.empty() ? nullptr : std::make_unique<TokenFile>(options_.token_file)),
      poller_(options_.servers, Connector(options_, std::chrono::seconds(options_.poll_wait_s + 10))),
      reporter_(options_.servers, Connector(options_, kReportTimeout)) {}

bool ServerConnection::Register(const Registration& registration) {
  std::string body = RegistrationToJson(registration).dump(-1, ' ', false, kReplaceBadUtf8);
  for (int attempt = 0; !stop_; ++attempt) {
    auto r = poller_.Send(Request("POST", "/v1/agent/register", body), true, kOneRound);
    if (r && r.status == 200) {
      nlohmann::json answer = ParseAnswerJson(r.body);
      if (!session_.empty()) {  // the first registration is the caller's to report
        err_ << "gantry agent: registered again, with " << poller_.current() << " (a restart or a take-over); "
             << registration.runs.size() << " run(s) still here reported for adoption" << std::endl;
      }
      session_ = answer.value("session", "");
      acked_ = answer.value("ack", uint64_t{0});
      return true;
    }
    if (r && r.status < 500 && r.status != 404) {
      err_ << "gantry agent: registration refused: " << r.status << " " << r.body << "\n";
      return false;
    }
    if (attempt % 10 == 0) {
      // A standby's 503 names the leader; a pool's scale-up that has not printed this node
      // yet says so.
      std::string why = r ? fmt::format("not registered yet ({} {})", r.status, r.body) : "no server reachable";
      err_ << "gantry agent: " << why << " at " << fmt::format("{}", fmt::join(poller_.urls(), ", ")) << "; retrying\n";
    }
    std::this_thread::sleep_for(std::chrono::seconds(1));
  }
  return false;
}

void ServerConnection::PollOrders(NodeLink& node, NodeReports& reports,
                                  const std::function<Registration()>& registration) {
  while (!stop_) {
    const std::string path = fmt::format("/v1/agent/orders?node={}&session={}&ack={}&wait={}", options_.node_id,
                                         session_, acked_, options_.poll_wait_s);
    auto r = poller_.Send(Request("GET", path, ""), true, kOneRound);
    if (r && (r.status == 404 || r.status == 409)) {  // a restarted or new leader: register again
      Register(registration());
      continue;
    }
    if (!r || r.status != 200) {  // no leader reachable yet, or a refusal: not a busy loop
      if (r && r.status != 503) err_ << "gantry agent: orders refused: " << r.status << " " << r.body << "\n";
      std::this_thread::sleep_for(std::chrono::seconds(1));
      continue;
    }
    nlohmann::json body = ParseAnswerJson(r.body);
    for (const auto& order : FieldOr(body, "orders", EmptyList())) {
      uint64_t seq = order.value("seq", uint64_t{0});
      if (seq <= acked_) continue;  // applied already; its acknowledgement was lost
      acked_ = seq;
      if (order.value("type", "") == "start") {
        auto start = StartOrderFromJson(order);
        if (start) {
          node.Start(*start);
        } else {
          reports.RunExited({order.value("job_id", ""), order.value("run", 0), options_.node_id, true, 127,
                             "bad order: " + start.status().ToString(), -1});
        }
      } else if (order.value("type", "") == "stop") {
        node.Stop(StopOrderFromJson(order));
      } else if (order.value("type", "") == "stream") {
        if (auto stream = StreamOrderFromJson(order)) ConnectBack(*stream, node);
      }
    }
  }
  stream_threads_.JoinAll();
}

void ServerConnection::ConnectBack(const StreamOrder& order, NodeLink& node) {
  std::string server = poller_.current();
  HttpRequest request{"GET", fmt::format("/v1/agent/streams/{}?node={}", order.session, options_.node_id), {}, "", ""};
  request.headers.emplace("Authorization", "Bearer " + Token());
  stream_threads_.Spawn([this, order, &node, server, request] {
    HttpConnectionOptions options;
    options.ca_cert = options_.ca_cert;
    options.read_timeout = std::chrono::seconds(30);
    auto stream = server.rfind("https://", 0) == 0 ? OpenUpgradedTlsStream(server, request, options, nullptr)
                                                   : OpenUpgradedStream(server, request, options, nullptr);
    if (!stream) {
      err_ << "gantry agent: session " << order.session.substr(0, 8) << " for job " << order.job_id
           << ": cannot connect back to " << server << ": " << stream.status().message() << std::endl;
      return;
    }
    node.OpenStream(order, std::move(*stream));
  });
}

void ServerConnection::SendReports(ReportOutbox& outbox, LogShipper& logs) {
  while (!stop_) {
    AgentReport report = outbox.Take(static_cast<int>(options_.heartbeat_s * 1000));
    nlohmann::json shipped = logs.Collect(256 * 1024);
    // An exit whose run's output did not all fit waits for the next report, which comes at
    // once (the held exit is pending): the server must have every byte before the end.
    AgentReport held;
    std::set<std::pair<std::string, int>> behind = logs.Behind();
    std::erase_if(report.events, [&](ReportEvent& e) {
      if (e.kind != ReportEvent::Kind::kExited || !behind.count({e.run.job_id, e.run.run})) return false;
      held.events.push_back(std::move(e));
      return true;
    });
    nlohmann::json body = AgentReportToJson(report);
    body["logs"] = std::move(shipped);
    const std::string text = body.dump(-1, ' ', false, kReplaceBadUtf8);
    auto r = reporter_.Send(Request("POST", "/v1/agent/report", text), true, kOneRound);
    if (r && r.status == 200) {
      logs.Acknowledge(body["logs"]);
      if (!held.events.empty()) outbox.Return(std::move(held));
    } else {
      for (ReportEvent& e : held.events) report.events.push_back(std::move(e));
      outbox.Return(std::move(report));
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
    }
  }
}

}  // namespace gantry
