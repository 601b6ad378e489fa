// The node protocol on the wire: what a remote agent's outbox sends is what the server's
// NodeReports receives, event for event, in order, from the report's node.
#include "protocol/report_wire.h"

#include <gtest/gtest.h>

#include "agent/report_outbox.h"
#include "agent/report_sink.h"

namespace gantry::testing {
namespace {

TEST(ReportWire, AnOutboxReportArrivesTypedAndInOrder) {
  ReportOutbox outbox("node-7", nullptr);
  outbox.RunStarted({"12", 2, "node-7", false, -1, "", -1});
  outbox.MigChanged({"node-7", 1, {{"MIG-1", "3g.40gb", 2, 0, 4}}, "12", ""});
  GpuSample busy;
  busy.uuid = "GPU-1";
  busy.util_pct = 93;
  busy.processes.push_back({4242, 20480, 88, -1, "12"});
  outbox.Readings({"node-7", {{1, busy}}});
  outbox.GpuHealth({"node-7", 1, false, "XID 79: the GPU fell off the bus"});
  outbox.RunExited({"12", 2, "node-7", true, 143, "preempted", 1'800'000'123'456});

  AgentReport sent = outbox.Take(0);
  nlohmann::json body = AgentReportToJson(sent);
  auto parsed = ParseAgentReport(nlohmann::json::parse(body.dump()));
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  ReportSink sink;
  DeliverReport(*parsed, sink);

  ASSERT_EQ(sink.started, std::vector<std::string>{"12"});
  ASSERT_EQ(sink.mig.size(), 1u);
  EXPECT_EQ(sink.mig[0].node_id, "node-7");
  EXPECT_EQ(sink.mig[0].gpu, 1);
  EXPECT_EQ(sink.mig[0].job_id, "12");
  ASSERT_EQ(sink.mig[0].devices.size(), 1u);
  EXPECT_EQ(sink.mig[0].devices[0].profile, "3g.40gb");
  EXPECT_EQ(sink.mig[0].devices[0].start, 4);
  EXPECT_EQ(sink.last[1].util_pct, 93);
  ASSERT_EQ(sink.last[1].processes.size(), 1u);
  EXPECT_EQ(sink.last[1].processes[0].used_memory_mib, 20480);
  ASSERT_EQ(sink.health.size(), 1u);
  EXPECT_FALSE(sink.health[0].healthy);
  EXPECT_EQ(sink.health[0].node_id, "node-7");
  const RunReport& exit = sink.exits["12"];
  EXPECT_EQ(exit.node_id, "node-7");
  EXPECT_EQ(exit.run, 2);
  EXPECT_EQ(exit.exit_code, 143);
  EXPECT_EQ(exit.reason, "preempted");
  EXPECT_EQ(exit.ended_ms, 1'800'000'123'456);
}

TEST(ReportWire, AReportTheServerDidNotTakeGoesBackInFrontOfNewerOnes) {
  ReportOutbox outbox("n1", nullptr);
  outbox.RunStarted({"1", 1, "n1", false, -1, "", -1});
  AgentReport first = outbox.Take(0);
  outbox.RunExited({"1", 1, "n1", true, 0, "", -1});
  outbox.Return(std::move(first));
  AgentReport again = outbox.Take(0);
  ASSERT_EQ(again.events.size(), 2u);
  EXPECT_EQ(again.events[0].kind, ReportEvent::Kind::kStarted);
  EXPECT_EQ(again.events[1].kind, ReportEvent::Kind::kExited);
  EXPECT_EQ(again.node_id, "n1");
}

TEST(ReportWire, AnEventOfUnknownTypeIsSkippedAndAWrongTypeRefusesTheWholeReport) {
  auto skipped = ParseAgentReport(nlohmann::json::parse(
      R"({"node_id":"n1","events":[{"type":"resized","job_id":"1"},{"type":"started","job_id":"2","run":1}]})"));
  ASSERT_TRUE(skipped.ok());
  ASSERT_EQ(skipped->events.size(), 1u);
  EXPECT_EQ(skipped->events[0].run.job_id, "2");
  auto refused = ParseAgentReport(
      nlohmann::json::parse(R"({"node_id":"n1","events":[{"type":"started","job_id":"2","run":"one"}]})"));
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().field(), "events[0]");
}

}  // namespace
}  // namespace gantry::testing
