// What a ControllerState (and the Controller around it) is configured with: the config
// set, pricing, timings, users, the autoscaler's pools, and the few things of the outside
// world the state asks its owner for (whether mail can go, the words of an audit row).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "billing/pricing.h"
#include "core/config_dir.h"
#include "core/node_pools.h"
#include "core/time.h"
#include "state/auth.h"
#include "state/state_action.h"

namespace gantry {

struct ControllerOptions {
  ConfigSet config;
  PricingConfig pricing;                        // the `pricing` section of gpu_types.yaml
  std::string quotas_path;                      // re-read when it changes; empty: config.quotas stays
  DurationMs tick_ms = 1000;                    // periodic cycle (time limits, ages, reloads)
  DurationMs kill_wait_ms = 30000;              // cancel: SIGTERM, then SIGKILL after this
  DurationMs fault_grace_ms = 10000;            // jobs on a GPU that turned unhealthy
  DurationMs node_timeout_ms = 60000;           // a node silent this long is lost; its jobs requeue
  std::function<TimeMs()> now;                  // the clock; wall clock when empty
  bool defer_slow_cycles = true;                // false: a cycle after every batch, however long (tests)
  DurationMs ledger_flush_ms = 60000;           // open ledger intervals' telemetry sums are stored this often
  std::function<void(const std::string&)> log;  // alerts and warnings; stderr when empty
  // Known users and team policies (priority classes, Unix accounts); null: nobody beyond
  // the callers themselves, every team with the default policy.
  std::shared_ptr<const UserDirectory> users;
  std::string public_url;                       // links in job notifications: PUBLIC_URL/v1/jobs/ID
  std::string sendmail = "/usr/sbin/sendmail";  // mail to a job's mail_user; absent: no mail
  // Whether mail can go now (else a job's mail_user is refused at submit). The Controller
  // asks whether `sendmail` is an executable file; empty: no mail.
  std::function<bool()> mail_ready;
  DurationMs history_interval_ms = 60000;  // a cluster sample for the dashboard's history (0: none)
  // This server's leadership, for /metrics: its term on a shared PostgreSQL store (0 on
  // SQLite, where it is the only server), and the take-overs so far, cluster-wide.
  int64_t leader_term = 0;
  int64_t leader_takeovers = 0;
  AutoscalerConfig autoscaler;  // pools.yaml: node pools the controller grows and shrinks (none: off)
  // The words an audit row gives a request (the server: its HTTP route, "PATCH /v1/jobs/7");
  // empty: the verb and its subject ("update 7").
  AuditWords audit_words;
};

}  // namespace gantry
