// A remote agent's outbox: the NodeReports of a node whose controller is across the
// network. Reports wait here, typed, until the sender takes them as one AgentReport (the
// protocol's POST /v1/agent/report); a report the server did not take goes back in front.
// Job starts and exits also tell the log shipper which job logs to follow.
#pragma once

#include <condition_variable>
#include <mutex>
#include <string>
#include <vector>

#include "agent/log_shipper.h"
#include "protocol/node_link.h"
#include "protocol/report_wire.h"

namespace gantry {

class ReportOutbox : public NodeReports {
 public:
  // `logs` (may be null) learns which jobs started and ended.
  ReportOutbox(std::string node_id, LogShipper* logs) : node_id_(std::move(node_id)), logs_(logs) {}

  void RunStarted(const RunReport& run) override;
  void RunExited(const RunReport& run) override;
  void MigChanged(const MigReport& change) override;
  void Readings(NodeReadings readings) override;
  void GpuHealth(const GpuHealthChange& change) override;
  void Reclaim(const NodeNotice& notice) override;

  // Waits up to `ms` for a job event or health change (readings alone wait the whole
  // time), then returns everything pending and empties the box.
  AgentReport Take(int ms);
  // Puts a report that was not delivered back in front of what came since (its events and
  // health changes; readings are soon replaced by newer ones). Delivered at least once: the
  // server ignores repeats.
  void Return(AgentReport report);

 private:
  template <typename F>
  void Push(F f);

  std::string node_id_;
  LogShipper* logs_;
  std::mutex mu_;
  std::condition_variable cv_;
  AgentReport pending_;
};

}  // namespace gantry
