// SpotNoticeWatcher: polls its file or command until the first notice, reports it once.
#include "agent/spot_notice.h"

#include <fmt/format.h>

#include <charconv>

#include "core/clock.h"
#include "core/command.h"
#include "core/read_file.h"

namespace gantry {

std::optional<DurationMs> ParseNoticeText(const std::string& raw, TimeMs now, DurationMs fallback) {
  std::string text = raw;
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.pop_back();
  size_t first = text.find_first_not_of(" \t\r\n");
  text = first == std::string::npos ? "" : text.substr(first);
  if (text.empty()) return fallback;
  int64_t seconds = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), seconds);
  if (ec == std::errc() && end == text.data() + text.size()) {
    if (seconds < 0 || seconds > 24 * 3600) return std::nullopt;
    return seconds * kSecondMs;
  }
  TimeMs at = 0;
  if (ParseUtc(text, &at)) return std::clamp<DurationMs>(at - now, 0, 24 * kHourMs);
  return std::nullopt;
}

SpotNoticeWatcher::SpotNoticeWatcher(SpotNoticeOptions options, std::string node_id, NodeReports& reports,
                                     std::ostream& log)
    : options_(std::move(options)), node_id_(std::move(node_id)), reports_(reports), log_(log) {}

std::optional<NodeNotice> SpotNoticeWatcher::Look() {
  const TimeMs now = WallClock().NowMs();
  std::string text, source;
  if (!options_.file.empty()) {
    auto content = ReadFileNoThrow(options_.file, 4096);
    if (!content) return std::nullopt;
    text = *content;
    source = "file " + options_.file;
  } else {
    CommandRequest req;
    req.command = options_.command;
    req.timeout_ms = std::max<DurationMs>(options_.interval_ms, kSecondMs);
    req.max_output = 4096;
    req.cancel = &cancel_;
    CommandResult r = RunCommand(req);
    if (r.timed_out || r.exit_code != 0 || r.out.find_first_not_of(" \t\r\n") == std::string::npos) return std::nullopt;
    text = r.out;
    source = "command";
  }
  auto in = ParseNoticeText(text, now, options_.default_notice_ms);
  if (!in) {
    log_ << fmt::format("gantry agent: spot notice from {} is not a time ('{}'): taking the default {} s", source,
                        OneLineExcerpt(text, 60), options_.default_notice_ms / kSecondMs)
         << std::endl;
    in = options_.default_notice_ms;
  }
  return NodeNotice{node_id_, *in, source};
}

void SpotNoticeWatcher::Start() {
  if (!options_.enabled()) return;
  thread_ = std::thread([this] {
    for (;;) {
      if (auto notice = Look()) {
        log_ << fmt::format("gantry agent: node {} is being reclaimed in {} s ({}): telling the server", node_id_,
                            notice->reclaim_in_ms / kSecondMs, notice->source)
             << std::endl;
        reports_.Reclaim(*notice);
        return;
      }
      std::unique_lock<std::mutex> lock(mu_);
      if (cv_.wait_for(lock, std::chrono::milliseconds(options_.interval_ms), [&] { return stop_; })) return;
    }
  });
}

void SpotNoticeWatcher::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cancel_ = true;
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

}  // namespace gantry
