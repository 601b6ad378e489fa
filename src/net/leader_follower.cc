// LeaderFollower: the candidate list, one connection per address, and the rounds.
#include "net/leader_follower.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <nlohmann/json.hpp>
#include <thread>

namespace gantry {

namespace {

std::string Trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t");
  size_t e = s.find_last_not_of(" \t");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

// host, host:port, [v6]:port, with an optional path prefix: letters, digits and - . : [ ] _ /
bool PlausibleAuthority(const std::string& rest) {
  if (rest.empty()) return false;
  return std::all_of(rest.begin(), rest.end(), [](unsigned char c) {
    return std::isalnum(c) || c == '-' || c == '.' || c == ':' || c == '[' || c == ']' || c == '_' || c == '/';
  });
}

}  // namespace

Expected<std::vector<std::string>> ParseServerList(const std::string& list, const std::string& field) {
  std::vector<std::string> urls;
  size_t start = 0;
  for (;;) {
    size_t comma = list.find(',', start);
    std::string url = Trim(list.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (url.empty()) return Status::Invalid(field, fmt::format("'{}': an empty address in the list", list));
    if (url.find("://") == std::string::npos) url = "http://" + url;
    size_t scheme_end = url.find("://");
    std::string scheme = url.substr(0, scheme_end);
    if (scheme != "http" && scheme != "https")
      return Status::Invalid(field, fmt::format("'{}': only http:// and https:// addresses", url));
    while (url.size() > scheme_end + 3 && url.back() == '/') url.pop_back();
    if (!PlausibleAuthority(url.substr(scheme_end + 3)))
      return Status::Invalid(field, fmt::format("'{}' is not a server address (host or host:port)", url));
    if (auto parts = SplitServerAddress(url); !parts) return Status::Invalid(field, parts.status().message());
    if (std::find(urls.begin(), urls.end(), url) == urls.end()) urls.push_back(url);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return urls;
}

constexpr size_t kMaxStandbyAnswerBytes = 4096;

std::string LeaderFromAnswer(const HttpResponse& answer, bool* standby) {
  *standby = false;
  // A standby's answer is a few hundred bytes: a larger 503 is not one, and is not parsed.
  if (answer.status != 503 || answer.body.size() > kMaxStandbyAnswerBytes) return "";
  nlohmann::json body = ParseAnswerJson(answer.body);
  if (!body.is_object() || !body.contains("error") || !body["error"].is_object()) return "";
  const nlohmann::json& e = body["error"];
  if (!e.contains("leader") || !e["leader"].is_string()) return "";
  *standby = true;
  return e["leader"].get<std::string>();
}

LeaderFollower::LeaderFollower(std::vector<std::string> urls, HttpConnector connect)
    : urls_(std::move(urls)), connect_(std::move(connect)) {
  if (urls_.empty()) urls_.push_back("http://127.0.0.1:8080");
}

LeaderFollower::~LeaderFollower() = default;

HttpConnection& LeaderFollower::ConnectionTo(const std::string& url) {
  if (!connection_ || connected_url_ != url) {
    connection_.reset();  // closed before the next one opens
    connection_ = connect_(url);
    connected_url_ = url;
  }
  return *connection_;
}

bool MayFollowLeader(const std::string& leader, const std::string& from) {
  auto parsed = ParseServerList(leader, "leader");
  if (!parsed || parsed->size() != 1 || (*parsed)[0] != leader) return false;
  return from.rfind("https://", 0) != 0 || leader.rfind("https://", 0) == 0;
}

bool LeaderFollower::Followable(const std::string& leader, const std::string& from) const {
  if (!MayFollowLeader(leader, from)) return false;
  const bool known = std::find(urls_.begin(), urls_.end(), leader) != urls_.end();
  return known || learned_ < kMaxLearned;
}

void LeaderFollower::MoveTo(const std::string& url) {
  auto it = std::find(urls_.begin(), urls_.end(), url);
  if (it == urls_.end()) {
    it = urls_.insert(urls_.end(), url);
    ++learned_;
  }
  current_ = static_cast<size_t>(it - urls_.begin());
}

HttpResponse LeaderFollower::Send(const HttpRequest& request, bool resend, std::chrono::milliseconds wait,
                                  bool lone_waits) {
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + wait;
  bool standby_seen = false;
  HttpResponse last;
  for (;;) {
    // One round: as many tries as there are addresses, following what standbys say.
    for (size_t tries = 0; tries < urls_.size(); ++tries) {
      const std::string url = urls_[current_];
      HttpResponse r = ConnectionTo(url).Send(request);
      if (!r && MayHaveArrived(r.failure) && !resend) return r;
      std::string leader;
      bool standby = false;
      if (r) {
        leader = LeaderFromAnswer(r, &standby);
        if (!standby) return r;
        standby_seen = true;
      }
      last = std::move(r);
      if (!leader.empty() && leader != url && Followable(leader, url)) {
        MoveTo(leader);
      } else {
        current_ = (current_ + 1) % urls_.size();
      }
    }
    // A lone address is asked again only when told so, and only while nothing takes the
    // connection there (a bad certificate or a missing TLS library will not mend).
    const bool not_there_yet = last.failure == HttpFailure::kConnect || last.failure == HttpFailure::kConnectTimeout;
    if (urls_.size() == 1 && !standby_seen && !(lone_waits && not_there_yet)) return last;
    auto left = deadline - Clock::now();
    if (left <= Clock::duration::zero()) return last;
    std::this_thread::sleep_for(std::min<Clock::duration>(left, std::chrono::seconds(1)));
  }
}

}  // namespace gantry
