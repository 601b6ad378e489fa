// The remote agent's outbox of typed reports.
#include "agent/report_outbox.h"

namespace gantry {

template <typename F>
void ReportOutbox::Push(F f) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    f();
  }
  cv_.notify_one();
}

void ReportOutbox::RunStarted(const RunReport& run) {
  if (logs_) logs_->Track(run.job_id, run.run);
  Push([&] { pending_.events.push_back({ReportEvent::Kind::kStarted, run, {}}); });
}

void ReportOutbox::RunExited(const RunReport& run) {
  if (logs_) logs_->Ended(run.job_id, run.run);
  Push([&] { pending_.events.push_back({ReportEvent::Kind::kExited, run, {}}); });
}

void ReportOutbox::MigChanged(const MigReport& change) {
  Push([&] { pending_.events.push_back({ReportEvent::Kind::kMig, {}, change}); });
}

void ReportOutbox::Readings(NodeReadings readings) {
  std::lock_guard<std::mutex> lock(mu_);  // readings alone do not wake the sender
  for (auto& sample : readings.samples) pending_.telemetry.push_back(std::move(sample));
}

void ReportOutbox::GpuHealth(const GpuHealthChange& change) {
  Push([&] { pending_.health.push_back(change); });
}

void ReportOutbox::Reclaim(const NodeNotice& notice) {
  Push([&] { pending_.notices.push_back(notice); });
}

AgentReport ReportOutbox::Take(int ms) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait_for(lock, std::chrono::milliseconds(ms),
               [&] { return !pending_.events.empty() || !pending_.health.empty() || !pending_.notices.empty(); });
  AgentReport report = std::move(pending_);
  pending_ = AgentReport{};
  report.node_id = node_id_;
  return report;
}

void ReportOutbox::Return(AgentReport report) {
  std::lock_guard<std::mutex> lock(mu_);
  for (ReportEvent& e : pending_.events) report.events.push_back(std::move(e));
  for (GpuHealthChange& h : pending_.health) report.health.push_back(std::move(h));
  pending_.events = std::move(report.events);
  pending_.health = std::move(report.health);
  for (NodeNotice& n : pending_.notices) report.notices.push_back(std::move(n));
  pending_.notices = std::move(report.notices);
}

}  // namespace gantry
