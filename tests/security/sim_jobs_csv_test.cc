// gantry sim --jobs-csv writes trace text (job ids, teams, users) into a CSV a person opens
// in a spreadsheet. A trace's rows may come from others (a pod dump, a shared trace): a cell
// that starts like a formula must stay text, and separators, quotes and line breaks must
// not split or add rows.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "command_util.h"

namespace {

TEST(SimJobsCsv, TraceTextCannotBecomeAFormulaOrAnExtraRow) {
  const std::string trace = ::testing::TempDir() + "/hostile-trace.csv";
  std::ofstream(trace) << "id,submit_time,duration_s,num_gpus,team,user\n"
                          "\"=HYPERLINK(\"\"http://evil.example/\"\",\"\"x\"\")\",0,10,1,\"a,b\",\"@SUM(1+1)\"\n"
                          "\"+1,evil\"\"row\",1,10,1,-2+3,\"tab\"\n";
  const std::string csv = ::testing::TempDir() + "/hostile-jobs.csv";
  std::string out;
  ASSERT_EQ(gantry::testing::RunCommand(std::string(GANTRY_BINARY) +
                                            " sim --cluster " GANTRY_SOURCE_DIR
                                            "/examples/clusters/single-v100.yaml --trace " +
                                            trace + " --trace-format csv --policy fifo --jobs-csv " + csv + " 2>&1",
                                        &out),
            0)
      << out;
  std::stringstream rows;
  rows << std::ifstream(csv).rdbuf();
  const std::string text = rows.str();
  EXPECT_NE(text.find("fifo,\"'=HYPERLINK(\"\"http://evil.example/\"\",\"\"x\"\")\",\"a,b\",'@SUM(1+1),1,"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("fifo,\"'+1,evil\"\"row\",'-2+3,tab,1,"), std::string::npos) << text;
  // The header and two jobs: no cell broke a row in two.
  int lines = 0;
  bool quoted = false;
  for (char c : text) {
    if (c == '"') quoted = !quoted;
    if (c == '\n' && !quoted) ++lines;
  }
  EXPECT_EQ(lines, 3) << text;
}

}  // namespace
