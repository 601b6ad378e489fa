// libFuzzer target: raw bytes on a connection to the HTTP front end (cpp-httplib's request
// parser behind our framing checks, body limit and gate), with routes shaped like the
// API's, and the event loop's framing judgement. Whatever arrives, the answer is HTTP and the
// process survives.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "server/http_front.h"

namespace {

gantry::HttpFront& Front() {
  static gantry::HttpFront* front = [] {
    gantry::FrontLimits limits;
    limits.workers = 1;
    limits.max_body_bytes = 4096;
    auto* f = new gantry::HttpFront(limits, nullptr);
    f->SetGate([](const httplib::Request& req, httplib::Response& res) {
      if (req.path.rfind("/v1/", 0) == 0 && req.get_header_value("Authorization") != "Bearer ok") {
        res.status = 401;
        return true;
      }
      return false;
    });
    f->Get("/healthz", [](const httplib::Request&, httplib::Response& res) { res.set_content("ok", "text/plain"); });
    f->Post("/v1/jobs", [](const httplib::Request& req, httplib::Response& res) {
      if (req.body.size() > 4096 + 65536) std::abort();  // the chunked budget held
      res.set_content(req.body, "application/json");
    });
    f->Get(R"(/v1/jobs/([^/]+))", [](const httplib::Request& req, httplib::Response& res) {
      res.set_content(std::string(req.matches[1]), "text/plain");
    });
    return f;
  }();
  return *front;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // The event loop's framing judgement (server/http_framing.h) on the same bytes, with and
  // without a body gate: any input, no crash.
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  gantry::AssessRequest(bytes, 4096, nullptr);
  gantry::AssessRequest(bytes, 4096, [](std::string_view path, std::string_view) { return path.size() % 2 == 0; });
  std::string out = Front().ServeBytes(std::string(reinterpret_cast<const char*>(data), size));
  if (!out.empty() && out.rfind("HTTP/1.", 0) != 0) std::abort();
  return 0;
}
