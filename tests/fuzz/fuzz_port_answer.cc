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
    auto answer = gantry::BrowserAnswerHead(bytes, upgrade, "/jobs/7/ports/web/");
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
    for (size_t at = lower.find("\r\nset-cookie: "); at != std::string::npos;
         at = lower.find("\r\nset-cookie: ", at + 1)) {
      std::string line = head.substr(at + 2, head.find("\r\n", at + 2) - at - 2);
      size_t path = line.find("; Path=");
      if (path == std::string::npos || line.compare(path + 7, 18, "/jobs/7/ports/web/") != 0) std::abort();
      // No Domain attribute (a name "domain", whatever its case and spaces).
      for (size_t semi = line.find(';'); semi != std::string::npos; semi = line.find(';', semi + 1)) {
        std::string name = line.substr(semi + 1, line.find_first_of("=;", semi + 1) - semi - 1);
        std::string trimmed;
        for (char c : name) {
          if (c != ' ' && c != '\t') trimmed += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        }
        if (trimmed == "domain") std::abort();
      }
    }
    if (!(upgrade && answer->status == 101) && lower.find("\r\nconnection: close\r\n") == std::string::npos)
      std::abort();
  }
  std::string kept = gantry::CookiesForUpstream(bytes);
  std::string lower = kept;
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (lower.rfind("gantry_", 0) == 0 || lower.find("; gantry_") != std::string::npos) std::abort();
  return 0;
}
