// libFuzzer target: a job's answer head as the port proxy reads it (a hostile job writes
// what it likes), and a browser's Cookie header as the proxy filters it. A head is either
// refused or rewritten into one that is well formed: a status line, whole header lines
// with no bare CR or LF, no cookie in Gantry's name, a blank line at the end.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "server/port_proxy_http.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string bytes(reinterpret_cast<const char*>(data), size);
  for (bool upgrade : {false, true}) {
    auto answer = gantry::BrowserAnswerHead(bytes, upgrade);
    if (!answer) continue;
    const std::string& head = answer->head;
    if (answer->status < 100 || answer->status > 999) std::abort();
    if (head.size() < 4 || head.compare(head.size() - 4, 4, "\r\n\r\n") != 0) std::abort();
    if (head.find("\r\n\r\n") != head.size() - 4) std::abort();  // one blank line, at the end
    for (size_t i = 0; i < head.size(); ++i) {
      if (head[i] == '\n' && (i == 0 || head[i - 1] != '\r')) std::abort();
      if (head[i] == '\r' && (i + 1 == head.size() || head[i + 1] != '\n')) std::abort();
    }
    std::string lower = head;
    for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (lower.find("\r\nset-cookie: gantry_") != std::string::npos) std::abort();
    if (!(upgrade && answer->status == 101) && lower.find("\r\nconnection: close\r\n") == std::string::npos)
      std::abort();
  }
  std::string kept = gantry::CookiesForUpstream(bytes);
  std::string lower = kept;
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (lower.rfind("gantry_", 0) == 0 || lower.find("; gantry_") != std::string::npos) std::abort();
  return 0;
}
