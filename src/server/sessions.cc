// The session table: sessions by id, access-token hash and refresh-token hash, and what the
// store has yet to be told.
#include "server/sessions.h"

#include <algorithm>

#include "core/encoding.h"
#include "protocol/spec_json.h"

namespace gantry {

namespace {

constexpr DurationMs kUseSaveEveryMs = 60 * 1000;  // a session's last use reaches the store at most this often
constexpr DurationMs kKeepEndedMs = 7 * 24 * 3600 * 1000LL;  // ended sessions stay listed this long
constexpr size_t kMaxSessions = 200000;
constexpr size_t kEarlierAccessKept = 8;  // access tokens of a session alive at once, besides the newest
constexpr size_t kSpentRefreshKept = 48;  // spent refresh tokens known as such: two days of hourly refreshes
constexpr size_t kLivePerUser = 100;      // a person's sessions at once; a new one ends the oldest

std::string FreshSecret(const char* prefix) { return prefix + NewToken().substr(4); }

// Drops the entries with the oldest times until `keep` are left.
void KeepNewest(std::map<std::string, TimeMs>& by_hash, size_t keep) {
  while (by_hash.size() > keep) {
    by_hash.erase(std::min_element(by_hash.begin(), by_hash.end(),
                                   [](const auto& a, const auto& b) { return a.second < b.second; }));
  }
}

}  // namespace

nlohmann::json SessionToDoc(const Session& s) {
  return {{"id", s.id},
          {"user", s.user},
          {"subject", s.subject},
          {"source", s.source},
          {"teams", s.teams},
          {"admin", s.admin},
          {"default_team", s.default_team},
          {"groups", s.groups},
          {"access_sha256", s.access_sha256},
          {"earlier_access", s.earlier_access},
          {"refresh_sha256", s.refresh_sha256},
          {"spent_refresh", s.spent_refresh},
          {"provider_refresh", s.provider_refresh},
          {"created_ms", s.created_ms},
          {"access_expires_ms", s.access_expires_ms},
          {"expires_ms", s.expires_ms},
          {"last_used_ms", s.last_used_ms},
          {"last_address", s.last_address},
          {"revoked_ms", s.revoked_ms},
          {"revoked_by", s.revoked_by}};
}

Expected<Session> SessionFromDoc(const std::string& text) {
  nlohmann::json d = nlohmann::json::parse(text, nullptr, false);
  if (d.is_discarded() || !d.is_object()) return Status::Invalid("session", "not a JSON object");
  try {
    Session s;
    s.id = d.at("id").get<std::string>();
    s.user = d.at("user").get<std::string>();
    s.subject = d.value("subject", "");
    s.source = d.value("source", "");
    s.teams = d.value("teams", std::map<std::string, std::string>{});
    s.admin = d.value("admin", false);
    s.default_team = d.value("default_team", "");
    s.groups = d.value("groups", std::vector<std::string>{});
    s.access_sha256 = d.value("access_sha256", "");
    s.earlier_access = d.value("earlier_access", std::map<std::string, TimeMs>{});
    s.refresh_sha256 = d.value("refresh_sha256", "");
    s.spent_refresh = d.value("spent_refresh", std::map<std::string, TimeMs>{});
    s.provider_refresh = d.value("provider_refresh", "");
    s.created_ms = d.value("created_ms", TimeMs{0});
    s.access_expires_ms = d.value("access_expires_ms", TimeMs{0});
    s.expires_ms = d.value("expires_ms", TimeMs{0});
    s.last_used_ms = d.value("last_used_ms", TimeMs{0});
    s.last_address = d.value("last_address", "");
    s.revoked_ms = d.value("revoked_ms", TimeMs{0});
    s.revoked_by = d.value("revoked_by", "");
    return s;
  } catch (const nlohmann::json::exception& e) {
    return Status::Invalid("session", e.what());
  }
}

nlohmann::json SessionView(const Session& s, TimeMs now) {
  std::string state = s.revoked_ms ? "revoked" : !s.Live(now) ? "expired" : "active";
  nlohmann::json v = {{"id", s.id},
                      {"user", s.user},
                      {"source", s.source},
                      {"teams", s.teams},
                      {"admin", s.admin},
                      {"state", state},
                      {"created", FormatUtc(s.created_ms)},
                      {"expires", FormatUtc(s.expires_ms)},
                      {"refreshable", !s.refresh_sha256.empty()},
                      {"last_used", s.last_used_ms ? FormatUtc(s.last_used_ms) : ""},
                      {"last_address", s.last_address}};
  if (s.revoked_ms) {
    v["revoked"] = FormatUtc(s.revoked_ms);
    v["revoked_by"] = s.revoked_by;
  }
  return v;
}

void SessionTable::Index(const Session& s) {
  if (!s.access_sha256.empty()) id_of_access_[s.access_sha256] = s.id;
  for (const auto& [hash, ends] : s.earlier_access) id_of_access_[hash] = s.id;
  if (!s.refresh_sha256.empty()) id_of_refresh_[s.refresh_sha256] = s.id;
  for (const auto& [hash, when] : s.spent_refresh) id_of_spent_refresh_[hash] = s.id;
}

void SessionTable::Unindex(const Session& s) {
  id_of_access_.erase(s.access_sha256);
  for (const auto& [hash, ends] : s.earlier_access) id_of_access_.erase(hash);
  id_of_refresh_.erase(s.refresh_sha256);
  for (const auto& [hash, when] : s.spent_refresh) id_of_spent_refresh_.erase(hash);
}

void SessionTable::Load(const std::vector<std::string>& docs) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const std::string& doc : docs) {
    auto s = SessionFromDoc(doc);
    if (!s) continue;
    if (auto old = by_id_.find(s->id); old != by_id_.end()) Unindex(old->second);
    use_saved_ms_[s->id] = s->last_used_ms;
    Index(*s);
    by_id_[s->id] = std::move(*s);
  }
}

SessionTokens SessionTable::Create(Session base, TimeMs now, int64_t access_ttl_s, int64_t lifetime_s,
                                   bool refreshable) {
  SessionTokens out;
  out.access_token = FreshSecret("gsa_");
  if (refreshable) out.refresh_token = FreshSecret("gsr_");
  base.id = "s-" + Sha256Hex(FreshSecret("")).substr(0, 16);
  base.access_sha256 = Sha256Hex(out.access_token);
  base.refresh_sha256 = refreshable ? Sha256Hex(out.refresh_token) : "";
  base.created_ms = now;
  base.expires_ms = now + lifetime_s * 1000;
  base.access_expires_ms = std::min(base.expires_ms, now + access_ttl_s * 1000);
  base.last_used_ms = 0;
  base.revoked_ms = 0;
  std::lock_guard<std::mutex> lock(mu_);
  if (by_id_.size() >= kMaxSessions) {  // the oldest ended ones make room
    for (auto it = by_id_.begin(); it != by_id_.end() && by_id_.size() >= kMaxSessions;) {
      if (!it->second.Live(now)) {
        Unindex(it->second);
        changed_.insert(it->first);
        it = by_id_.erase(it);
      } else {
        ++it;
      }
    }
  }
  // One person's sessions are bounded (signing in again and again grows nothing without end):
  // past the limit the oldest live one ends.
  std::vector<Session*> live;
  for (auto& [id, s] : by_id_) {
    if (s.user == base.user && s.Live(now)) live.push_back(&s);
  }
  if (live.size() >= kLivePerUser) {
    std::sort(live.begin(), live.end(),
              [](const Session* a, const Session* b) { return a->created_ms < b->created_ms; });
    for (size_t i = 0; i + kLivePerUser <= live.size(); ++i) {
      live[i]->revoked_ms = now;
      live[i]->revoked_by = "session-limit";
      live[i]->provider_refresh.clear();
      changed_.insert(live[i]->id);
    }
  }
  Index(base);
  changed_.insert(base.id);
  by_id_[base.id] = base;
  out.session = std::move(base);
  return out;
}

std::optional<Session> SessionTable::Authenticate(const std::string& access_token, TimeMs now,
                                                  const std::string& address) {
  if (access_token.rfind("gsa_", 0) != 0) return std::nullopt;
  std::lock_guard<std::mutex> lock(mu_);
  const std::string hash = Sha256Hex(access_token);
  auto id = id_of_access_.find(hash);
  if (id == id_of_access_.end()) return std::nullopt;
  Session& s = by_id_.at(id->second);
  auto earlier = s.earlier_access.find(hash);
  TimeMs ends = hash == s.access_sha256 ? s.access_expires_ms : earlier != s.earlier_access.end() ? earlier->second : 0;
  if (!s.Live(now) || now >= ends) return std::nullopt;
  s.last_used_ms = now;
  s.last_address = address;
  return s;
}

std::optional<Session> SessionTable::FindByRefresh(const std::string& refresh_token, TimeMs now) {
  if (refresh_token.rfind("gsr_", 0) != 0) return std::nullopt;
  std::lock_guard<std::mutex> lock(mu_);
  auto id = id_of_refresh_.find(Sha256Hex(refresh_token));
  if (id == id_of_refresh_.end()) return std::nullopt;
  const Session& s = by_id_.at(id->second);
  if (!s.Live(now)) return std::nullopt;
  return s;
}

std::optional<std::pair<Session, TimeMs>> SessionTable::FindSpentRefresh(const std::string& refresh_token, TimeMs now) {
  if (refresh_token.rfind("gsr_", 0) != 0) return std::nullopt;
  std::lock_guard<std::mutex> lock(mu_);
  const std::string hash = Sha256Hex(refresh_token);
  auto id = id_of_spent_refresh_.find(hash);
  if (id == id_of_spent_refresh_.end()) return std::nullopt;
  const Session& s = by_id_.at(id->second);
  if (!s.Live(now)) return std::nullopt;
  return std::pair{s, s.spent_refresh.at(hash)};
}

std::optional<SessionTokens> SessionTable::Rotate(const Session& renewed, TimeMs now, int64_t access_ttl_s) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = by_id_.find(renewed.id);
  // Revoked, ended or already rotated (by a racing refresh with the same token) meanwhile.
  if (it == by_id_.end() || !it->second.Live(now) || it->second.refresh_sha256 != renewed.refresh_sha256) {
    return std::nullopt;
  }
  Session& s = it->second;
  Unindex(s);
  SessionTokens out;
  out.access_token = FreshSecret("gsa_");
  out.refresh_token = FreshSecret("gsr_");
  s.teams = renewed.teams;
  s.admin = renewed.admin;
  s.default_team = renewed.default_team;
  s.groups = renewed.groups;
  s.provider_refresh = renewed.provider_refresh;
  // The access token handed out before stays good until its end; the oldest few go.
  if (s.access_expires_ms > now) s.earlier_access[s.access_sha256] = s.access_expires_ms;
  std::erase_if(s.earlier_access, [&](const auto& e) { return e.second <= now; });
  KeepNewest(s.earlier_access, kEarlierAccessKept);
  s.spent_refresh[s.refresh_sha256] = now;
  KeepNewest(s.spent_refresh, kSpentRefreshKept);
  s.access_sha256 = Sha256Hex(out.access_token);
  s.refresh_sha256 = Sha256Hex(out.refresh_token);
  s.access_expires_ms = std::min(s.expires_ms, now + access_ttl_s * 1000);
  s.last_used_ms = now;
  Index(s);
  changed_.insert(s.id);
  out.session = s;
  return out;
}

bool SessionTable::Revoke(const std::string& id, const std::string& by, TimeMs now) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = by_id_.find(id);
  if (it == by_id_.end()) return false;
  if (it->second.revoked_ms == 0) {
    it->second.revoked_ms = now;
    it->second.revoked_by = by;
    it->second.provider_refresh.clear();
    changed_.insert(id);
  }
  return true;
}

std::optional<Session> SessionTable::Find(const std::string& id) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = by_id_.find(id);
  if (it == by_id_.end()) return std::nullopt;
  return it->second;
}

std::vector<Session> SessionTable::All() const {
  std::vector<Session> out;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [id, s] : by_id_) out.push_back(s);
  }
  std::sort(out.begin(), out.end(), [](const Session& a, const Session& b) { return a.created_ms > b.created_ms; });
  return out;
}

std::vector<std::pair<std::string, std::string>> SessionTable::TakeChanged(TimeMs now) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::pair<std::string, std::string>> out;
  for (auto it = by_id_.begin(); it != by_id_.end();) {
    const Session& s = it->second;
    TimeMs ended = s.revoked_ms ? s.revoked_ms : s.expires_ms;
    if (!s.Live(now) && now - ended > kKeepEndedMs) {
      out.emplace_back(s.id, "");  // deleted
      Unindex(s);
      changed_.erase(s.id);
      use_saved_ms_.erase(s.id);
      it = by_id_.erase(it);
      continue;
    }
    bool use_due = s.last_used_ms - use_saved_ms_[s.id] >= kUseSaveEveryMs;
    if (changed_.count(s.id) || use_due) {
      out.emplace_back(s.id, SessionToDoc(s).dump(-1, ' ', false, kReplaceBadUtf8));
      use_saved_ms_[s.id] = s.last_used_ms;
    }
    ++it;
  }
  for (const std::string& id : changed_) {
    if (!by_id_.count(id)) out.emplace_back(id, "");  // made room for: deleted
  }
  changed_.clear();
  return out;
}

}  // namespace gantry
