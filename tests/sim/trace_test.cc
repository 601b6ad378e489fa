// Trace parsing: both formats, column order, bad rows with line numbers, strict mode.
#include "sim/trace.h"

#include <gtest/gtest.h>

namespace gantry {
namespace {

TEST(PhillyTrace, ParsesRowsAndSortsBySubmit) {
  auto t = ParseTrace(
      "timestamp,duration,num_gpus,gpu_time,cluster\n"
      "2017-10-03 14:00:10,120.0,8,960.0,6214e9\n"
      "2017-10-03 14:00:00,30.5,1,30.5,7f04ca\n",
      TraceFormat::kPhilly, false);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  ASSERT_EQ(t->jobs.size(), 2u);
  EXPECT_EQ(t->jobs[0].spec.team, "7f04ca");  // earlier submit first
  EXPECT_EQ(t->jobs[0].duration_ms, 30500);
  EXPECT_EQ(t->jobs[1].spec.request.gpus, 8);
  EXPECT_EQ(t->jobs[1].submit_ms - t->jobs[0].submit_ms, 10000);
}

TEST(PhillyTrace, ReportsBadRowsByLine) {
  const std::string text =
      "timestamp,duration,num_gpus,gpu_time,cluster\n"
      "2017-10-03 14:00:00,30,1,30,a\n"
      "2017-10-03 14:00:00,-5,1,30,a\n"
      "not a time,30,1,30,a\n"
      "2017-10-03 14:00:00,30,0,30,a\n"
      "2017-10-03 14:00:00,30,1\n";
  auto t = ParseTrace(text, TraceFormat::kPhilly, false);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->jobs.size(), 1u);
  ASSERT_EQ(t->skipped.size(), 4u);
  EXPECT_EQ(t->skipped[0].line, 3);
  EXPECT_NE(t->skipped[0].reason.find("duration"), std::string::npos);
  EXPECT_EQ(t->skipped[1].line, 4);
  EXPECT_NE(t->skipped[1].reason.find("timestamp"), std::string::npos);
  EXPECT_NE(t->skipped[2].reason.find("num_gpus"), std::string::npos);
  EXPECT_NE(t->skipped[3].reason.find("3 fields, the header has 5"), std::string::npos);
  auto strict = ParseTrace(text, TraceFormat::kPhilly, true);
  ASSERT_FALSE(strict.ok());
  EXPECT_NE(strict.status().message().find("line 3: duration"), std::string::npos);
}

TEST(CsvTrace, ColumnsInAnyOrderUnknownIgnored) {
  auto t = ParseTrace(
      "team,num_gpus,colour,duration_s,submit_time,gpu_types,priority,id\n"
      "vision,2,red,60,2026-11-26T09:00:00Z,A100-80GB|H100-80GB,high,j1\n",
      TraceFormat::kCsv, true);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  const TraceJob& j = t->jobs[0];
  EXPECT_EQ(j.spec.id, "j1");
  EXPECT_EQ(j.spec.team, "vision");
  EXPECT_EQ(j.spec.priority_class, "high");
  EXPECT_EQ(j.spec.request.gpus, 2);
  ASSERT_EQ(j.spec.request.gpu_types.size(), 2u);
  EXPECT_EQ(j.spec.request.gpu_types[1], "H100-80GB");
  TimeMs expected = 0;
  ASSERT_TRUE(ParseUtc("2026-11-26T09:00:00Z", &expected));
  EXPECT_EQ(j.submit_ms, expected);
}

TEST(CsvTrace, SharingColumns) {
  auto t = ParseTrace(
      "submit_time,duration_s,num_gpus,gpu_fraction,gpu_milli,mig_profile,num_nodes,checkpoint_interval_s,"
      "estimated_duration_s,time_limit_s,preemptible,sharing\n"
      "0,10,1,0.25,,,,,,,,\n"
      "1,10,1,,500,,,,,,,time-slice\n"
      "2,10,1,,,3g.40gb,,,,,,\n"
      "3,10,16,,,,2,600,20,3600,false,\n",
      TraceFormat::kCsv, true);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->jobs[0].spec.request.sharing, SharingMode::kAuto);  // the cluster's settings decide
  EXPECT_EQ(t->jobs[1].spec.request.sharing, SharingMode::kTimeSlice);
  EXPECT_EQ(t->jobs[0].spec.request.gpu_milli, 250);
  EXPECT_EQ(t->jobs[1].spec.request.gpu_milli, 500);
  EXPECT_EQ(t->jobs[2].spec.request.sharing, SharingMode::kMig);
  const TraceJob& gang = t->jobs[3];
  EXPECT_EQ(gang.spec.request.num_nodes, 2);
  EXPECT_EQ(gang.checkpoint_interval_ms, 600000);
  EXPECT_TRUE(gang.spec.checkpointable);
  EXPECT_EQ(gang.spec.estimated_duration_ms, 20000);
  EXPECT_EQ(gang.spec.time_limit_ms, 3600000);
  EXPECT_FALSE(gang.spec.preemptible);
}

TEST(CsvTrace, RefusesBadValuesAndMissingColumns) {
  auto t = ParseTrace(
      "submit_time,duration_s,num_gpus,gpu_fraction\n"
      "0,10,1,1.5\n"
      "0,10,2,0.5\n"
      "0,ten,1,\n",
      TraceFormat::kCsv, false);
  ASSERT_TRUE(t.ok());
  ASSERT_EQ(t->skipped.size(), 3u);
  EXPECT_NE(t->skipped[0].reason.find("gpu_fraction"), std::string::npos);
  EXPECT_NE(t->skipped[1].reason.find("num_gpus 1"), std::string::npos);
  EXPECT_NE(t->skipped[2].reason.find("duration_s"), std::string::npos);
  auto missing = ParseTrace("submit_time,num_gpus\n0,1\n", TraceFormat::kCsv, false);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("'duration_s'"), std::string::npos);
}

TEST(Csv, SplitsQuotedFields) {
  std::vector<std::string> f;
  ASSERT_TRUE(SplitCsvLine(R"(a,"b,c","d ""q""",)", &f));
  ASSERT_EQ(f.size(), 4u);
  EXPECT_EQ(f[1], "b,c");
  EXPECT_EQ(f[2], "d \"q\"");
  EXPECT_EQ(f[3], "");
  EXPECT_FALSE(SplitCsvLine("\"open", &f));
}

}  // namespace
}  // namespace gantry
