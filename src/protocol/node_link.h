// The two narrow interfaces of the node protocol. NodeLink is what a controller may ask of
// a node (the in-process agent, or the order queue of a remote agent's long poll);
// NodeReports is what a node tells a controller (the controller itself, or a remote agent's
// outbox that carries the reports over HTTP). Orders are sent only after the decision is
// durable; neither side may block the other.
#pragma once

#include <memory>

#include "core/byte_stream.h"
#include "protocol/messages.h"

namespace gantry {

class NodeLink {
 public:
  virtual ~NodeLink() = default;
  virtual void Start(const StartOrder& order) = 0;
  virtual void Stop(const StopOrder& order) = 0;
  // Opens an interactive session: `stream` is its connection to the user's client (the
  // server relays it), or null for a remote agent, which connects back for it itself.
  // Must not block; a node that cannot serve sessions drops the stream (the user's
  // client sees it end).
  virtual void OpenStream(const StreamOrder& order, std::unique_ptr<ByteStream> stream) {
    (void)order;
    (void)stream;
  }
  // A remote agent: its node is lost when its heartbeats stop.
  virtual bool remote() const { return false; }
};

class NodeReports {
 public:
  virtual ~NodeReports() = default;
  // A run's process started (job_id, run, node_id).
  virtual void RunStarted(const RunReport& run) = 0;
  // A run ended: exit_code, reason, and ended_ms (when the process ended, -1: unknown),
  // which closes its billing at the real end even when reported late.
  virtual void RunExited(const RunReport& run) = 0;
  virtual void MigChanged(const MigReport& change) = 0;
  virtual void Readings(NodeReadings readings) = 0;
  virtual void GpuHealth(const GpuHealthChange& change) = 0;
  // The node is about to be reclaimed (spot): it takes no new job and its jobs stop in time.
  virtual void Reclaim(const NodeNotice& notice) = 0;
};

}  // namespace gantry
