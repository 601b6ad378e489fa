// Fake GPU nodes for machines without GPUs: "2x8xA100-80GB,1x4xT4" is two nodes with
// eight A100-80GB each and one with four T4s; ":mig" after a type puts its GPUs in MIG mode.
#pragma once

#include <string>
#include <vector>

#include "core/node.h"

namespace gantry {

// Node ids are the lower-cased type and a number per type ("a100-80gb-0"); GPU UUIDs are
// made up from them. Errors name the part of the spec that is wrong.
Expected<std::vector<Node>> ParseFakeGpus(const std::string& spec, const GpuCatalog& catalog);

}  // namespace gantry
