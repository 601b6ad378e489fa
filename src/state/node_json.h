// Nodes as JSON: the stored document (read back on restart) and the API view.
#pragma once

#include <nlohmann/json.hpp>

#include "core/node.h"
#include "core/status.h"

namespace gantry {

nlohmann::json NodeToDoc(const Node& node, const GpuCatalog& catalog);
Expected<Node> NodeFromDoc(const nlohmann::json& doc, const GpuCatalog& catalog);

}  // namespace gantry
