// Facts of the machine this process runs on: its name, CPUs and memory.
#pragma once

#include <cstdint>
#include <string>

namespace gantry {

std::string Hostname();
int HostCpus();
int64_t HostMemoryMib();

}  // namespace gantry
