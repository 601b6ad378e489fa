// Who hears of a job's start, end, failure or preemption, and how: the events a job or a
// team asks for, webhook URLs, mail addresses. Pure checks; the controller sends.
#pragma once

#include <string>
#include <vector>

#include "core/status.h"

namespace gantry {

// "start", "end", "fail", "preempt", "all" from "end,fail" (errors name `field`).
Expected<std::vector<std::string>> ParseNotifyEvents(const std::string& field, const std::string& text);
Status CheckNotifyEvents(const std::string& field, const std::vector<std::string>& events);
// Whether a job asking for `events` hears of `event`: "all" hears everything; "end" hears
// every end, a failure included (as Slurm's --mail-type=END).
bool NotifyWants(const std::vector<std::string>& events, const std::string& event);

// An http:// or https:// URL of at most 2048 characters, no spaces or quotes.
Status CheckWebhookUrl(const std::string& field, const std::string& url);
// The host of a checked URL, lower case, without port or user: "hooks.slack.com".
std::string UrlHost(const std::string& url);
// Whether `host` matches one of `patterns` (exact, or "*.example.org" for its subdomains).
bool HostAllowed(const std::string& host, const std::vector<std::string>& patterns);

// json (the job as JSON) or slack ({"text": ...}).
Status CheckNotifyFormat(const std::string& field, const std::string& format);
// A plain address: name@example.org (no spaces, quotes or shell syntax).
Status CheckMailAddress(const std::string& field, const std::string& address);

}  // namespace gantry
