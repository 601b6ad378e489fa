// Facts of the machine this process runs on: its name, CPUs, memory and free TCP ports.
#pragma once

#include <cstdint>
#include <string>

namespace gantry {

std::string Hostname();
int HostCpus();
int64_t HostMemoryMib();
// True when a TCP listener could bind `port` on all addresses now (a port left in
// TIME_WAIT counts as free, as it does for a listener with SO_REUSEADDR).
bool TcpPortFree(int port);

}  // namespace gantry
