// Devices and links: transfer times, validation, byte formatting for
// messages. A transfer costs its latency plus bytes over bandwidth, the
// alpha-beta model used by PipeDream's and Alpa's cost models.
#include "planner/partition/cluster.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "common/error.h"

namespace mp {

Cluster UniformCluster(int n, const Device& device, const Link& link) {
  Cluster cluster;
  cluster.devices.assign(n, device);
  cluster.links = {link};
  return cluster;
}

double StepOverheadMs(const Cluster& cluster, int workers) {
  const std::vector<double>& table = cluster.step_overhead_ms;
  if (table.empty() || workers < 1) return 0;
  return table[std::min<size_t>(size_t(workers), table.size()) - 1];
}

Link LinkAt(const Cluster& cluster, int boundary) {
  if (cluster.links.empty()) return {};
  if (cluster.links.size() == 1) return cluster.links.front();
  return cluster.links.at(boundary);
}

Link LinkBetween(const Cluster& cluster, int from, int to) {
  if (from == to) return {};
  return LinkAt(cluster, std::abs(from - to) == 1 ? std::min(from, to) : 0);
}

double TransferMs(int64_t bytes, const Link& link) {
  if (bytes <= 0) return 0;
  const double wire = link.bandwidth_bytes_per_s > 0 ? 1000.0 * double(bytes) / link.bandwidth_bytes_per_s : 0;
  return link.latency_ms + wire;
}

double AllReduceMs(int64_t bytes, int replicas, const Link& link) {
  if (replicas <= 1 || bytes <= 0) return 0;
  const int64_t chunk = (bytes + replicas - 1) / replicas;
  return 2.0 * (replicas - 1) * TransferMs(chunk, link);
}

int64_t UsableMemoryBytes(const Device& device) {
  if (device.memory_bytes == kUnlimitedMemory || device.memory_headroom <= 0) return device.memory_bytes;
  return int64_t(double(device.memory_bytes) * (1 - device.memory_headroom));
}

bool IsHomogeneous(const Cluster& cluster) {
  for (const Device& d : cluster.devices) {
    const Device& f = cluster.devices.front();
    if (d.memory_bytes != f.memory_bytes || d.memory_headroom != f.memory_headroom || d.speed != f.speed) return false;
  }
  for (const Link& l : cluster.links) {
    if (!(l == cluster.links.front())) return false;
  }
  return true;
}

void ValidateCluster(const Cluster& cluster) {
  if (cluster.devices.empty()) throw InputError("cluster: no devices");
  for (size_t i = 0; i < cluster.devices.size(); ++i) {
    const Device& d = cluster.devices[i];
    if (d.memory_bytes <= 0) {
      throw InputError(Concat("cluster: devices[", i, "] (", d.name, "): memory ", d.memory_bytes,
                              " bytes; expected > 0"));
    }
    if (!(d.memory_headroom >= 0 && d.memory_headroom < 1)) {
      throw InputError(Concat("cluster: devices[", i, "] (", d.name, "): memory headroom ", d.memory_headroom,
                              "; expected in [0, 1)"));
    }
    if (!(d.speed > 0)) {
      throw InputError(Concat("cluster: devices[", i, "] (", d.name, "): speed ", d.speed, "; expected > 0"));
    }
  }
  for (size_t k = 0; k < cluster.shared_slowdown.size(); ++k) {
    if (!(cluster.shared_slowdown[k] >= 1)) {
      throw InputError(Concat("cluster: shared_slowdown[", k, "]: ", cluster.shared_slowdown[k], "; expected >= 1"));
    }
  }
  for (size_t k = 0; k < cluster.step_overhead_ms.size(); ++k) {
    if (!(cluster.step_overhead_ms[k] >= 0)) {
      throw InputError(Concat("cluster: step_overhead_ms[", k, "]: ", cluster.step_overhead_ms[k], "; expected >= 0"));
    }
  }
  if (cluster.replicas < 1) throw InputError(Concat("cluster: replicas ", cluster.replicas, "; expected >= 1"));
  const size_t n = cluster.links.size();
  if (n > 1 && n != cluster.devices.size() - 1) {
    throw InputError(Concat("cluster: ", n, " links for ", cluster.devices.size(),
                            " devices; expected 0, 1 or one per neighbouring pair (",
                            cluster.devices.size() - 1, ")"));
  }
  for (size_t i = 0; i < n; ++i) {
    const Link& l = cluster.links[i];
    if (l.bandwidth_bytes_per_s < 0 || l.latency_ms < 0) {
      throw InputError(Concat("cluster: links[", i, "]: bandwidth ", l.bandwidth_bytes_per_s, " B/s, latency ",
                              l.latency_ms, " ms; expected both >= 0"));
    }
  }
}

}  // namespace mp
