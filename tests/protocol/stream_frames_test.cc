// Session frames: what one end encodes the other reads back, however the bytes are cut;
// a frame of unknown type or over 64 KiB stops the reading for good; resize payloads.
#include "protocol/stream_frames.h"

#include <gtest/gtest.h>

#include "protocol/order_wire.h"

namespace gantry {
namespace {

TEST(StreamFrames, ReadBackWhateverTheCuts) {
  std::string bytes = EncodeFrame(FrameType::kStdin, "ls -l\r") + EncodeFrame(FrameType::kResize, "120 40") +
                      EncodeFrame(FrameType::kStdinEnd, "") +
                      EncodeFrame(FrameType::kStdout, std::string(70000 / 2, 'x'));
  for (size_t cut : {size_t{1}, size_t{3}, size_t{5}, size_t{4096}}) {
    FrameReader reader;
    std::vector<Frame> got;
    for (size_t at = 0; at < bytes.size(); at += cut) {
      reader.Feed(std::string_view(bytes).substr(at, cut));
      Frame f;
      while (reader.Next(&f) == FrameReader::Result::kFrame) got.push_back(f);
    }
    ASSERT_EQ(got.size(), 4u) << cut;
    EXPECT_EQ(got[0].type, FrameType::kStdin);
    EXPECT_EQ(got[0].payload, "ls -l\r");
    EXPECT_EQ(got[1].payload, "120 40");
    EXPECT_EQ(got[2].type, FrameType::kStdinEnd);
    EXPECT_EQ(got[3].payload.size(), 35000u);
    EXPECT_EQ(reader.buffered(), 0u);
  }
}

TEST(StreamFrames, UnknownTypesAndOversizedFramesStopTheReading) {
  FrameReader unknown;
  unknown.Feed(std::string("Z\0\0\0\1a", 6));
  Frame f;
  EXPECT_EQ(unknown.Next(&f), FrameReader::Result::kBad);
  EXPECT_EQ(unknown.error(), "a frame of unknown type");
  unknown.Feed(EncodeFrame(FrameType::kStdin, "later"));
  EXPECT_EQ(unknown.Next(&f), FrameReader::Result::kBad) << "no resync after garbage";
  FrameReader big;
  big.Feed(std::string("i\0\1\0\1", 5));  // 65537 bytes announced
  EXPECT_EQ(big.Next(&f), FrameReader::Result::kBad);
  EXPECT_EQ(big.error(), "a frame over 64 KiB");
}

TEST(StreamFrames, ResizePayloads) {
  int cols = 0, rows = 0;
  EXPECT_TRUE(ParseResize("80 24", &cols, &rows));
  EXPECT_EQ(cols, 80);
  EXPECT_EQ(rows, 24);
  for (const char* bad : {"", "80", "80 ", " 24", "0 24", "80 0", "80 99999", "-1 2", "80x24", "80 24 1"}) {
    EXPECT_FALSE(ParseResize(bad, &cols, &rows)) << bad;
  }
}

TEST(StreamFrames, SessionOrdersGoOverTheWireWhole) {
  StreamOrder o{"sess", "12", 2, "n1", 1, StreamKind::kExec, {"sh", "-c", "id"}, true, 100, 40, true, 0, "ana"};
  auto back = StreamOrderFromJson(StreamOrderToJson(o));
  ASSERT_TRUE(back) << back.status().ToString();
  EXPECT_EQ(back->session, "sess");
  EXPECT_EQ(back->command, o.command);
  EXPECT_TRUE(back->tty);
  EXPECT_TRUE(back->end_job);
  EXPECT_EQ(back->cols, 100);
  nlohmann::json bad = StreamOrderToJson(o);
  bad["kind"] = "root-shell";
  EXPECT_FALSE(StreamOrderFromJson(bad));
  bad.erase("session");
  EXPECT_FALSE(StreamOrderFromJson(bad));
}

}  // namespace
}  // namespace gantry
