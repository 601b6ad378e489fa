// This machine's name, CPU count and physical memory.
#include "core/host.h"

#include <unistd.h>

#include <thread>

namespace gantry {

std::string Hostname() {
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  return host;
}

int HostCpus() { return static_cast<int>(std::thread::hardware_concurrency()); }

int64_t HostMemoryMib() {
  return static_cast<int64_t>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGE_SIZE) / (1024 * 1024);
}

}  // namespace gantry
