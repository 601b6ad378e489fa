// What a GPU-hour costs: the `pricing` section of gpu_types.yaml (currency, billing time
// zone, which price list nodes bill at, node pool overrides) and the price book built from
// it with each type's dated price changes. The book the server has billed with is kept in
// the store, so a price edited later applies from then on, never to the past.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "billing/calendar.h"
#include "core/gpu_catalog.h"

namespace gantry {

enum class PriceRate : uint8_t { kOnDemand, kSpot };

struct PoolPricing {
  std::optional<PriceRate> rate;         // default: the global rate
  std::map<std::string, double> prices;  // per GPU type name: a fixed price per GPU-hour
};

struct PricingConfig {
  std::string currency = "USD";
  std::string timezone = "UTC";
  PriceRate rate = PriceRate::kOnDemand;
  std::string pool_label = "pool";  // the node label naming its pool
  std::map<std::string, PoolPricing> pools;

  // The price list a node of `pool` bills at: its pool's rate, else the global one.
  PriceRate RateOf(const std::string& pool) const {
    auto it = pools.find(pool);
    return it != pools.end() && it->second.rate ? *it->second.rate : rate;
  }
  // Reads the optional top-level `pricing` map of gpu_types.yaml.
  static Expected<PricingConfig> FromYaml(const std::string& gpu_types_yaml, const GpuCatalog& catalog);
};

constexpr TimeMs kBeginningOfTime = INT64_MIN / 4;

class PriceBook {
 public:
  struct Step {
    TimeMs from_ms = kBeginningOfTime;
    double per_hour = 0;
    bool operator==(const Step&) const = default;
  };

  static Expected<PriceBook> Build(const GpuCatalog& catalog, const PricingConfig& pricing, const Calendar& calendar);
  // A book with one constant price per type (tests, the simulator).
  void Set(const std::string& type, const std::string& pool, std::vector<Step> steps);

  // One GPU-hour of `type` on a node of `pool` at time t (0 for an unknown type).
  double PerHour(const std::string& type, const std::string& pool, TimeMs t) const;
  // `share` GPUs held over [from, to), split at every price change inside it.
  double Cost(const std::string& type, const std::string& pool, double share, TimeMs from, TimeMs to) const;

  // `recorded` before `now`, `configured` from `now` on. `retroactive` gets the keys whose
  // configured past prices differ from what was billed (those edits apply from now).
  static PriceBook Merge(const PriceBook& recorded, const PriceBook& configured, TimeMs now,
                         std::vector<std::string>* retroactive);

  nlohmann::json ToJson() const;
  static Expected<PriceBook> FromJson(const nlohmann::json& j);
  bool operator==(const PriceBook&) const = default;

 private:
  const std::vector<Step>* Find(const std::string& type, const std::string& pool) const;
  static double At(const std::vector<Step>& steps, TimeMs t);
  std::map<std::string, std::vector<Step>> steps_;  // "TYPE" or "TYPE@POOL", oldest first
};

}  // namespace gantry
