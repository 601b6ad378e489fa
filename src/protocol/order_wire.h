// The agent protocol's JSON, server to node: orders (start, stop, stream). What agents send back
// is in report_wire.h.
#pragma once

#include <nlohmann/json.hpp>

#include "protocol/gpu_readings.h"
#include "protocol/node_link.h"
#include "protocol/report_wire.h"

namespace gantry {

nlohmann::json StartOrderToJson(const StartOrder& o);
Expected<StartOrder> StartOrderFromJson(const nlohmann::json& j);
nlohmann::json StopOrderToJson(const StopOrder& o);
StopOrder StopOrderFromJson(const nlohmann::json& j);
nlohmann::json StreamOrderToJson(const StreamOrder& o);
Expected<StreamOrder> StreamOrderFromJson(const nlohmann::json& j);

}  // namespace gantry
