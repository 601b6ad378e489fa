// Port lending: each port of a node's range to one job at a time, a returned port last in
// line, ports held by jobs read back after a restart never lent twice.
#include "state/port_allocator.h"

#include <gtest/gtest.h>

namespace gantry {
namespace {

Node NodeWithPorts(int first, int last) {
  Node n;
  n.id = "n1";
  n.network.port_first = first;
  n.network.port_last = last;
  return n;
}

TEST(PortAllocator, LendsEachPortOnceAndAReturnedOneLast) {
  PortAllocator ports;
  Node n = NodeWithPorts(20000, 20002);
  EXPECT_EQ(ports.Take(n), 20000);
  EXPECT_EQ(ports.Take(n), 20001);
  EXPECT_EQ(ports.Take(n), 20002);
  EXPECT_EQ(ports.Take(n), -1);  // all lent
  ports.Release("n1", 20001);
  EXPECT_EQ(ports.Take(n), 20001);
  ports.Release("n1", 20000);
  ports.Release("n1", 20002);
  EXPECT_EQ(ports.Take(n), 20002);  // the search goes on from where it was, not from the first
  EXPECT_EQ(ports.Held("n1"), 2u);
}

TEST(PortAllocator, PortsHeldByRunningJobsAreNotLentAgain) {
  PortAllocator ports;
  Node n = NodeWithPorts(20000, 20001);
  ports.Hold("n1", 20000);
  EXPECT_EQ(ports.Take(n), 20001);
  EXPECT_EQ(ports.Take(n), -1);
  Node other = NodeWithPorts(20000, 20001);
  other.id = "n2";
  EXPECT_EQ(ports.Take(other), 20000);  // each node lends its own
}

}  // namespace
}  // namespace gantry
