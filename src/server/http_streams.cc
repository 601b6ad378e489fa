// The routes of interactive sessions: a user's GET /v1/jobs/ID/exec and /attach, and a node
// agent's GET /v1/agent/streams/SESSION, each an upgrade (Upgrade: gantry-stream) whose
// connection goes to the StreamHub once the request is checked; a request that fails a
// check is answered as any other, with the field named.
#include <fmt/format.h>

#include "server/agent_hub.h"
#include "server/http_api.h"
#include "server/port_proxy.h"
#include "server/stream_hub.h"

namespace gantry {

namespace {

constexpr size_t kMaxArgs = 256;
constexpr size_t kMaxArgBytes = 8192;
constexpr size_t kMaxCommandBytes = 65536;

bool UpgradeAsked(const httplib::Request& req, httplib::Response& res) {
  std::string upgrade = req.get_header_value("Upgrade");
  for (char& c : upgrade) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (upgrade == "gantry-stream") return true;
  ReplyError(res, 400, "invalid_argument",
             "this endpoint upgrades the connection (Upgrade: gantry-stream): use gantry exec, shell or attach",
             "Upgrade");
  return false;
}

bool BoolParam(const httplib::Request& req, httplib::Response& res, const char* name, bool* out) {
  if (!req.has_param(name)) return true;
  std::string v = req.get_param_value(name);
  if (v == "true" || v == "1") {
    *out = true;
  } else if (v == "false" || v == "0") {
    *out = false;
  } else {
    ReplyError(res, 400, "invalid_argument", "must be true or false", name);
    return false;
  }
  return true;
}

// Every value of query parameter `name` in a request target ("/path?a=1&a=2"), decoded
// (%XX and +), in order and with repeats: cpp-httplib's parsed parameters drop a repeated
// name=value pair, which would drop a command's repeated words (`echo x x`).
std::vector<std::string> QueryValues(std::string_view target, std::string_view name) {
  std::vector<std::string> values;
  size_t q = target.find('?');
  if (q == std::string_view::npos) return values;
  std::string_view query = target.substr(q + 1);
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  while (!query.empty()) {
    size_t amp = query.find('&');
    std::string_view pair = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    size_t eq = pair.find('=');
    auto decode = [&hex](std::string_view raw) {
      std::string value;
      for (size_t i = 0; i < raw.size(); ++i) {
        if (raw[i] == '+') {
          value += ' ';
        } else if (raw[i] == '%' && i + 2 < raw.size() && hex(raw[i + 1]) >= 0 && hex(raw[i + 2]) >= 0) {
          value += static_cast<char>(hex(raw[i + 1]) * 16 + hex(raw[i + 2]));
          i += 2;
        } else {
          value += raw[i];
        }
      }
      return value;
    };
    if (decode(pair.substr(0, eq)) != name) continue;  // comm%61nd is command, as for cpp-httplib
    values.push_back(decode(eq == std::string_view::npos ? std::string_view() : pair.substr(eq + 1)));
  }
  return values;
}

// The command's words (repeated `command`, as Kubernetes' exec takes them), read from the
// request target itself: every repeat counts.
bool CommandParam(const httplib::Request& req, httplib::Response& res, std::vector<std::string>* out) {
  std::vector<std::string> words = QueryValues(req.target, "command");
  if (words.size() > kMaxArgs) {
    ReplyError(res, 400, "invalid_argument", fmt::format("at most {} words", kMaxArgs), "command");
    return false;
  }
  size_t total = 0;
  for (size_t i = 0; i < words.size(); ++i) {
    const std::string& word = words[i];
    total += word.size();
    if (word.size() > kMaxArgBytes || total > kMaxCommandBytes) {
      ReplyError(res, 400, "invalid_argument",
                 fmt::format("a word is at most {} bytes, the command {} in all", kMaxArgBytes, kMaxCommandBytes),
                 "command");
      return false;
    }
    if (word.find('\0') != std::string::npos) {
      ReplyError(res, 400, "invalid_argument", "a word of the command holds a NUL byte", "command");
      return false;
    }
    if (i == 0 && word.empty()) {
      ReplyError(res, 400, "invalid_argument", "the command's first word (the program) is empty", "command");
      return false;
    }
  }
  *out = std::move(words);
  return true;
}

}  // namespace

void HttpApi::StreamRoutes() {
  StreamHub* hub = options_.streams;
  if (!hub) return;
  auto authed = [this](Handler fn) { return Authed(std::move(fn)); };
  for (StreamKind kind : {StreamKind::kExec, StreamKind::kAttach}) {
    const std::string verb = ToString(kind);
    server_->Get(
        fmt::format(R"(/v1/jobs/([^/]+)/{})", verb),
        authed([this, hub, kind, verb](const Actor& who, const httplib::Request& req, httplib::Response& res) {
          const std::string id = req.matches[1];
          const std::string action = "session " + verb;
          if (kind == StreamKind::kExec && !OnlyParams(req, res, {"command", "tty", "cols", "rows", "rank", "end_job"}))
            return;
          if (kind == StreamKind::kAttach && !OnlyParams(req, res, {"rank"})) return;
          if (who.role == Role::kAgent) {
            controller_.RecordAudit(who, action, id, "forbidden", "a node agent's token opens no session");
            return ReplyError(res, 403, "forbidden", "a node agent's token opens no session", "Authorization");
          }
          if (!UpgradeAsked(req, res)) return;
          StreamOrder order;
          order.kind = kind;
          int64_t rank = 0, cols = 80, rows = 24;
          if (!IntParam(req, res, "rank", 0, 65535, &rank) || !IntParam(req, res, "cols", 1, 10000, &cols) ||
              !IntParam(req, res, "rows", 1, 10000, &rows) || !BoolParam(req, res, "tty", &order.tty) ||
              !BoolParam(req, res, "end_job", &order.end_job) || !CommandParam(req, res, &order.command)) {
            return;
          }
          order.cols = static_cast<int>(cols);
          order.rows = static_cast<int>(rows);
          std::string why;
          if (!hub->Admit(who, &why)) {
            controller_.RecordAudit(who, action, id, "over_limit", why);
            return ReplyError(res, 429, "over_limit", why, "id");
          }
          auto target = controller_.FindStreamTarget(who, id, kind, static_cast<int>(rank), "", action);
          if (!target) {
            hub->Release(who);
            return Reply(res, target.status());
          }
          bool taken = HttpFront::TakeOver([hub, who, target = *target, order](std::unique_ptr<ByteStream> client) {
            hub->Start(who, target, order, std::move(client));
          });
          if (!taken) {
            hub->Release(who);
            ReplyError(res, 500, "internal", "the connection could not be taken over");
          }
        }));
  }
  if (PortProxy* ports = options_.ports) {
    // A browser's way into a job's port: a ticket the dashboard opens the port's address with.
    server_->Post(R"(/v1/jobs/([^/]+)/ports/([^/]+)/ticket)",
                  authed([ports](const Actor& who, const httplib::Request& req, httplib::Response& res) {
                    if (!OnlyParams(req, res, {})) return;
                    const std::string header = req.get_header_value("Authorization");
                    Reply(res, ports->IssueTicket(who, header.substr(7), req.get_header_value("X-Gantry-Team"),
                                                  req.matches[1], req.matches[2]));
                  }));
  }
  if (AgentHub* agents = options_.agents) {
    server_->Get(
        R"(/v1/agent/streams/([A-Za-z0-9_-]{1,64}))",
        authed([hub, agents](const Actor& who, const httplib::Request& req, httplib::Response& res) {
          if (!OnlyParams(req, res, {"node"})) return;
          const std::string node = req.get_param_value("node");
          if (auto refused = agents->CheckNode(who, node, "GET /v1/agent/streams")) {
            return Reply(res, *refused);
          }
          if (!UpgradeAsked(req, res)) return;
          HttpFront::TakeOver([hub, node, session = std::string(req.matches[1])](std::unique_ptr<ByteStream> agent) {
            hub->AgentConnected(node, session, std::move(agent));
          });
        }));
  }
}

}  // namespace gantry
