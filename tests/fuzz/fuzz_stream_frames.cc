// libFuzzer target: what a session's other end sends (a user's client to the agent, or
// an agent to the client), read frame by frame as both ends do, each resize payload
// parsed; and a session order as the agent reads it from the server. Bad bytes end the
// reading with an error, never a crash, a throw or a frame past 64 KiB.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "protocol/order_wire.h"
#include "protocol/stream_frames.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string bytes(reinterpret_cast<const char*>(data), size);
  gantry::FrameReader reader;
  // Fed in two pieces, as a socket may split them.
  reader.Feed(std::string_view(bytes).substr(0, size / 2));
  gantry::Frame frame;
  for (int round = 0; round < 2; ++round) {
    gantry::FrameReader::Result r;
    while ((r = reader.Next(&frame)) == gantry::FrameReader::Result::kFrame) {
      if (frame.payload.size() > gantry::kMaxFramePayload) std::abort();
      int cols = 0, rows = 0;
      if (gantry::ParseResize(frame.payload, &cols, &rows) && (cols < 1 || rows < 1 || cols > 10000 || rows > 10000)) {
        std::abort();
      }
    }
    if (r == gantry::FrameReader::Result::kBad && reader.error().empty()) std::abort();
    reader.Feed(std::string_view(bytes).substr(size / 2));
  }
  nlohmann::json order = nlohmann::json::parse(bytes, nullptr, false);
  if (!order.is_discarded()) (void)gantry::StreamOrderFromJson(order);
  return 0;
}
