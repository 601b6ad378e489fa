// Job notifications: when a job starts, ends, fails or is preempted, those it (or its
// team's defaults) names hear of it by webhook (JSON or Slack's {"text"}) and mail. They
// are effects, sent after the commit by the Notifier's thread, never by the scheduler.
#include <fmt/format.h>

#include "billing/report.h"
#include "core/notify.h"
#include "state/controller_state.h"

namespace gantry {

namespace {

// "job 12 (train) failed: exit code 3"
std::string Headline(const JobRecord& job, const std::string& event) {
  const JobSpec& s = *job.spec;
  std::string what = s.name.empty() ? "job " + s.id : fmt::format("job {} ({})", s.id, s.name);
  if (event == "start") return fmt::format("{} started (run {})", what, job.runs);
  if (event == "preempt") return what + " was preempted and is queued again";
  std::string line = fmt::format("{} {}", what, ToString(job.state));
  if (!job.reason.empty()) line += ": " + job.reason;
  return line;
}

}  // namespace

Status ControllerState::CheckNotifyTarget(const Actor& who, const JobSpec& spec) const {
  // Events with no one to tell (no address, no webhook, none the team's) are refused, not
  // silently told to no one.
  if (!spec.notify.empty() && spec.mail_user.empty() && spec.webhook.empty() &&
      TeamOf(spec.team).notify_webhook.empty()) {
    return Status::Invalid("notify", fmt::format("no one to tell of {}: give --mail-user ADDRESS or --webhook URL",
                                                 fmt::join(spec.notify, ",")));
  }
  // Mail this server cannot send is refused at submit, not dropped at the job's end.
  if (!spec.mail_user.empty() && !(options_.mail_ready && options_.mail_ready())) {
    return Status::Precondition(
        "mail_user", fmt::format("this server sends no mail: there is no sendmail at {} (an admin installs one, or "
                                 "starts the server with --sendmail PATH); use a webhook (--webhook), or gantry wait",
                                 options_.sendmail));
  }
  if (spec.webhook.empty() || who.admin()) return Status::Ok();
  const TeamPolicy& policy = TeamOf(spec.team);
  std::string host = UrlHost(spec.webhook);
  if (HostAllowed(host, policy.webhook_hosts)) return Status::Ok();
  if (policy.webhook_hosts.empty()) {
    return Status::Denied("webhook", fmt::format("team {} may not send job webhooks (an admin lists the hosts it may "
                                                 "use as webhook_hosts in users.yaml)",
                                                 spec.team));
  }
  return Status::Denied("webhook", fmt::format("host {} is not one team {} may send to ({})", host, spec.team,
                                               fmt::join(policy.webhook_hosts, ", ")));
}

void ControllerState::NotifyJob(const JobRecord& job, const std::string& event) {
  const JobSpec& s = *job.spec;
  const TeamPolicy& policy = TeamOf(s.team);
  bool own = !s.notify.empty();
  const std::vector<std::string>& events = own ? s.notify : policy.notify_events;
  if (!NotifyWants(events, event)) return;
  std::string webhook = own ? s.webhook : policy.notify_webhook;
  std::string format = own && !s.notify_format.empty() ? s.notify_format : policy.notify_format;
  if (webhook.empty() && s.mail_user.empty()) return;
  std::string message = Headline(job, event);
  // The dashboard's page of the job (a person clicks it; the API answers 401 to a browser).
  std::string link = options_.public_url.empty() ? "" : options_.public_url + "/#/jobs/" + s.id;
  double cost = RoundTo(accounting_.JobCost(job, now_), 4);
  counters_["notify_" + event]++;
  if (!webhook.empty()) {
    nlohmann::json body;
    if (format == "slack") {
      body = {{"text", link.empty() ? message : fmt::format("{} <{}|details>", message, link)}};
    } else {
      nlohmann::json view = ApiView(job, false);
      view["cost"] = cost;
      view["currency"] = options_.pricing.currency;
      body = {{"kind", "job_" + event},
              {"event", event},
              {"message", message},
              {"time", FormatUtc(now_)},
              {"job", std::move(view)}};
      if (!link.empty()) body["link"] = link;
    }
    effects_.webhooks.push_back({webhook, std::move(body), s.id, event});
  }
  if (!s.mail_user.empty()) {
    std::string text = fmt::format("{}\n\nuser: {}\nteam: {}\nstate: {}\nruns: {}\ncost: {:.4f} {}\n", message, s.user,
                                   s.team, ToString(job.state), job.runs, cost, options_.pricing.currency);
    if (job.exit_code >= 0) text += fmt::format("exit code: {}\n", job.exit_code);
    if (!link.empty()) text += link + "\n";
    effects_.mails.push_back({s.mail_user, "[gantry] " + message, std::move(text), s.id, event});
  }
}

void ControllerState::NotificationDelivered(const std::string& job_id, const std::string& event, const std::string& via,
                                            const std::string& to, bool delivered, const std::string& why) {
  JobRecord* job = Find(job_id);
  if (!job) return;
  nlohmann::json detail = {{"event", event}, {"via", via}, {"to", to}};
  if (!delivered) detail["error"] = why;
  Event(*job, delivered ? "notified" : "notify_failed", std::move(detail));
}

}  // namespace gantry
