// Pricing config parsing and the dated price book.
#include "billing/pricing.h"

#include <algorithm>
#include <set>

#include "core/yaml_util.h"

namespace gantry {

namespace {

bool ParseRate(const std::string& text, PriceRate* out) {
  if (text == "on_demand")
    *out = PriceRate::kOnDemand;
  else if (text == "spot")
    *out = PriceRate::kSpot;
  else
    return false;
  return true;
}

}  // namespace

Expected<PricingConfig> PricingConfig::FromYaml(const std::string& text, const GpuCatalog& catalog) {
  auto loaded = LoadYaml(text, "pricing");
  if (!loaded) return loaded.status();
  YAML::Node root = *loaded;
  PricingConfig c;
  if (!root.IsMap() || !root["pricing"]) return c;
  YamlReader r(root["pricing"], "pricing");
  c.currency = r.Optional<std::string>("currency", c.currency);
  c.timezone = r.Optional<std::string>("timezone", c.timezone);
  std::string rate = r.Optional<std::string>("rate", "on_demand");
  c.pool_label = r.Optional<std::string>("pool_label", c.pool_label);
  YAML::Node pools = r.Child("pools");
  if (Status s = r.Finish(); !s.ok()) return s;
  if (!ParseRate(rate, &c.rate)) return Status::Invalid("pricing.rate", "must be on_demand or spot");
  if (c.currency.empty() || c.currency.size() > 8) return Status::Invalid("pricing.currency", "must be 1-8 characters");
  if (auto cal = Calendar::ForZone(c.timezone, "pricing.timezone"); !cal) return cal.status();
  if (pools) {
    if (!pools.IsMap()) return Status::Invalid("pricing.pools", "must be a map of pool name to pricing");
    for (const auto& kv : pools) {
      std::string name = kv.first.as<std::string>();
      std::string where = "pricing.pools." + name;
      YamlReader p(kv.second, where);
      std::string pool_rate = p.Optional<std::string>("rate", "");
      auto prices = p.Optional<std::map<std::string, double>>("prices", {});
      if (Status s = p.Finish(); !s.ok()) return s;
      PoolPricing pp;
      if (!pool_rate.empty()) {
        PriceRate pr{};
        if (!ParseRate(pool_rate, &pr)) return Status::Invalid(where + ".rate", "must be on_demand or spot");
        pp.rate = pr;
      }
      for (const auto& [type, price] : prices) {
        const GpuType* t = catalog.Find(type);
        if (!t) return Status::Invalid(where + ".prices." + type, "unknown GPU type; known: " + catalog.Names());
        if (!(price >= 0 && price < 1e6)) return Status::Invalid(where + ".prices." + type, "must be >= 0");
        pp.prices[t->name] = price;
      }
      c.pools[name] = std::move(pp);
    }
  }
  return c;
}

Expected<PriceBook> PriceBook::Build(const GpuCatalog& catalog, const PricingConfig& pricing,
                                     const Calendar& calendar) {
  PriceBook book;
  auto list = [&](const GpuType& t, PriceRate rate) -> Expected<std::vector<Step>> {
    std::vector<Step> steps{{kBeginningOfTime, rate == PriceRate::kSpot ? t.price_spot : t.price_on_demand}};
    for (size_t i = 0; i < t.price_changes.size(); ++i) {
      const PriceChange& c = t.price_changes[i];
      auto from = calendar.ParseDate(c.effective, fmt::format("gpu_types.{}.price_changes[{}].effective", t.name, i));
      if (!from) return from.status();
      if (*from <= steps.back().from_ms) {
        return Status::Invalid(fmt::format("gpu_types.{}.price_changes[{}].effective", t.name, i),
                               "must be later than the change before it");
      }
      steps.push_back({*from, rate == PriceRate::kSpot ? c.spot : c.on_demand});
    }
    return steps;
  };
  for (const GpuType& t : catalog.types()) {
    auto steps = list(t, pricing.rate);
    if (!steps) return steps.status();
    book.steps_[t.name] = std::move(*steps);
    for (const auto& [pool, pp] : pricing.pools) {
      auto fixed = pp.prices.find(t.name);
      if (fixed != pp.prices.end()) {
        book.steps_[t.name + "@" + pool] = {{kBeginningOfTime, fixed->second}};
      } else if (pp.rate && *pp.rate != pricing.rate) {
        book.steps_[t.name + "@" + pool] = *list(t, *pp.rate);
      }
    }
  }
  return book;
}

void PriceBook::Set(const std::string& type, const std::string& pool, std::vector<Step> steps) {
  steps_[pool.empty() ? type : type + "@" + pool] = std::move(steps);
}

const std::vector<PriceBook::Step>* PriceBook::Find(const std::string& type, const std::string& pool) const {
  if (!pool.empty()) {
    auto it = steps_.find(type + "@" + pool);
    if (it != steps_.end()) return &it->second;
  }
  auto it = steps_.find(type);
  return it == steps_.end() ? nullptr : &it->second;
}

double PriceBook::At(const std::vector<Step>& steps, TimeMs t) {
  double price = 0;
  for (const Step& s : steps) {
    if (s.from_ms > t) break;
    price = s.per_hour;
  }
  return price;
}

double PriceBook::PerHour(const std::string& type, const std::string& pool, TimeMs t) const {
  const std::vector<Step>* steps = Find(type, pool);
  return steps ? At(*steps, t) : 0;
}

double PriceBook::Cost(const std::string& type, const std::string& pool, double share, TimeMs from, TimeMs to) const {
  const std::vector<Step>* steps = Find(type, pool);
  if (!steps || to <= from) return 0;
  double cost = 0;
  for (size_t i = 0; i < steps->size(); ++i) {
    TimeMs lo = std::max(from, (*steps)[i].from_ms);
    TimeMs hi = i + 1 < steps->size() ? std::min(to, (*steps)[i + 1].from_ms) : to;
    if (hi > lo) cost += share * static_cast<double>(hi - lo) / kHourMs * (*steps)[i].per_hour;
  }
  return cost;
}

PriceBook PriceBook::Merge(const PriceBook& recorded, const PriceBook& configured, TimeMs now,
                           std::vector<std::string>* retroactive) {
  PriceBook out;
  std::set<std::string> keys;
  for (const auto& [k, v] : recorded.steps_) keys.insert(k);
  for (const auto& [k, v] : configured.steps_) keys.insert(k);
  for (const std::string& key : keys) {
    auto rec = recorded.steps_.find(key);
    auto conf = configured.steps_.find(key);
    if (rec == recorded.steps_.end()) {  // a new type or pool: nothing was billed at its price yet
      out.steps_[key] = conf->second;
      continue;
    }
    if (conf == configured.steps_.end()) {  // no longer configured: keep what was billed
      out.steps_[key] = rec->second;
      continue;
    }
    std::vector<Step> merged;
    bool differs = false;
    for (const Step& s : rec->second) {
      if (s.from_ms < now) merged.push_back(s);
    }
    for (const Step& s : conf->second) {
      if (s.from_ms < now) differs = differs || At(conf->second, s.from_ms) != At(rec->second, s.from_ms);
    }
    for (const Step& s : rec->second) {
      if (s.from_ms < now) differs = differs || At(conf->second, s.from_ms) != s.per_hour;
    }
    double at_now = At(conf->second, now);
    if (merged.empty() || merged.back().per_hour != at_now) merged.push_back({now, at_now});
    for (const Step& s : conf->second) {
      if (s.from_ms > now && s.per_hour != merged.back().per_hour) merged.push_back(s);
    }
    if (differs && retroactive) retroactive->push_back(key);
    out.steps_[key] = std::move(merged);
  }
  return out;
}

nlohmann::json PriceBook::ToJson() const {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [key, steps] : steps_) {
    nlohmann::json list = nlohmann::json::array();
    for (const Step& s : steps) list.push_back({s.from_ms, s.per_hour});
    j[key] = std::move(list);
  }
  return j;
}

Expected<PriceBook> PriceBook::FromJson(const nlohmann::json& j) {
  PriceBook book;
  if (!j.is_object()) return Status::Invalid("price_book", "must be an object");
  for (const auto& [key, list] : j.items()) {
    if (!list.is_array()) return Status::Invalid("price_book." + key, "must be a list");
    std::vector<Step> steps;
    for (const auto& s : list) {
      if (!s.is_array() || s.size() != 2 || !s[0].is_number_integer() || !s[1].is_number()) {
        return Status::Invalid("price_book." + key, "each step must be [from_ms, price]");
      }
      steps.push_back({s[0].get<TimeMs>(), s[1].get<double>()});
    }
    book.steps_[key] = std::move(steps);
  }
  return book;
}

}  // namespace gantry
