// The HTTP the port proxy rewrites: the browser's request as the job's server gets it (no
// Gantry credentials, X-Forwarded-* set by us, one request per connection unless it
// upgrades) and the job's answer head as the browser gets it (no cookie in Gantry's name).
// The answer comes from a job, which may be hostile: its head is parsed here, whole lines
// only, and anything malformed makes no answer (the browser gets a 502).
#pragma once

#include <httplib.h>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gantry {

// What the proxy forwards for `req` under `prefix` ("/jobs/ID/ports/NAME"): request line,
// headers less hop-by-hop ones, Authorization, Gantry's cookies and forwarding headers a
// client could forge, then ours, and the body (Content-Length). `tls`: the browser came over
// https.
std::string UpstreamRequest(const httplib::Request& req, const std::string& prefix, bool upgrade, bool tls);

// Whether the request asks for a protocol upgrade (WebSocket): Connection names "upgrade"
// and Upgrade is set.
bool AsksUpgrade(const httplib::Request& req);

// The Cookie header without cookies whose names start with gantry_ (the proxy's own).
std::string CookiesForUpstream(std::string_view cookie_header);

// The values of the cookies named `name` in the request's Cookie headers.
std::vector<std::string> CookieValues(const httplib::Request& req, std::string_view name);

struct BrowserAnswer {
  int status = 0;
  std::string head;  // status line and headers, ending in a blank line
};
// The job's answer head (up to and with its blank line) for the browser: cookies kept to
// the port's path `prefix` ("/jobs/ID/ports/NAME/"; none of gantry_* names, nameless or for
// a Domain); not an upgrade: Connection: close. Nothing when the head is not HTTP/1.x with
// a three-digit status, or a header line has no name.
std::optional<BrowserAnswer> BrowserAnswerHead(std::string_view head, bool upgrade_asked, std::string_view prefix);

}  // namespace gantry
