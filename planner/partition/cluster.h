// The devices a plan runs on, in pipeline order, and the links between
// neighbours. Times in a Profile are taken on one device; a Device's speed is
// the multiplier that turns them into its own (2.0 = twice as slow).
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace mp {

constexpr int64_t kUnlimitedMemory = std::numeric_limits<int64_t>::max();

struct Device {
  std::string name = "device";
  int64_t memory_bytes = kUnlimitedMemory;
  double speed = 1.0;  // time multiplier relative to the profiled device
  // The share of memory_bytes plans leave free for what the memory model
  // may miss (mpplan --memory-headroom): stages fit UsableMemoryBytes.
  double memory_headroom = 0;
};

// What a plan may fill of the device: memory_bytes less its headroom.
int64_t UsableMemoryBytes(const Device& device);

struct Link {
  double bandwidth_bytes_per_s = 0;  // 0: infinitely fast
  double latency_ms = 0;
  bool operator==(const Link& o) const {
    return bandwidth_bytes_per_s == o.bandwidth_bytes_per_s && latency_ms == o.latency_ms;
  }
};

struct Cluster {
  std::vector<Device> devices;  // stage s runs on devices[s]
  std::vector<Link> links;      // links[i] joins devices[i] and devices[i + 1];
                                // a single entry serves every pair; empty: free
  // Devices that share one machine (CPU workers) slow each other down:
  // shared_slowdown[k - 1] multiplies compute times when k stages run
  // (beyond its end: the last entry). Empty: separate devices.
  std::vector<double> shared_slowdown;
  // The runtime's fixed cost per step on CPU workers (step_overhead.h):
  // [k - 1] with k workers (beyond its end: the last entry). Empty: none.
  std::vector<double> step_overhead_ms;
  // Data-parallel copies of the pipeline, each on its own `devices` and fed
  // its share of the batch; after the backward each stage's gradients are
  // all-reduced among its copies over `replica_link`.
  int replicas = 1;
  Link replica_link;
  // With replicas: the share of the step their wait for the latest of them
  // before each sum adds (ReplicaWaitShare, profile.h). 0: none.
  double replica_wait_share = 0;
  // Training: the plan's optimizer's step on a device of speed 1, in ms a
  // MiB of parameters with a gradient (Profile::optimizer_ms_per_mib). 0:
  // not charged.
  double optimizer_ms_per_mib = 0;
  // CPU workers: [k - 1], how much slower each steps when k devices (all
  // replicas' included) step at once (Profile::optimizer_slowdown; beyond
  // its end: the last entry). Empty: separate devices.
  std::vector<double> optimizer_slowdown;
};


// cluster.step_overhead_ms for a step of `workers` workers; 0 when empty.
double StepOverheadMs(const Cluster& cluster, int workers);

// n copies of one device joined by one kind of link.
Cluster UniformCluster(int n, const Device& device, const Link& link = {});

// The link between stage `boundary` and stage `boundary + 1`.
Link LinkAt(const Cluster& cluster, int boundary);

// The link a transfer from device `from` to device `to` takes: none (free)
// within one device (zbv's middle boundary), the link between neighbours,
// or, for a looped plan's last device sending back to the first (a link
// the cluster does not describe; such plans need a homogeneous cluster),
// its one link.
Link LinkBetween(const Cluster& cluster, int from, int to);

// latency + bytes / bandwidth; 0 when nothing is sent.
double TransferMs(int64_t bytes, const Link& link);

// A ring all-reduce of `bytes` among `replicas` peers: 2 (R - 1) steps, each
// moving bytes / R over `link` (Patarasuk and Yuan's bandwidth-optimal
// algorithm, what NCCL and Gloo's ring run); 0 for one replica or no bytes.
double AllReduceMs(int64_t bytes, int replicas, const Link& link);

// True when every device and every link is the same.
bool IsHomogeneous(const Cluster& cluster);

// Throws InputError naming the device or link: no devices, memory <= 0,
// speed <= 0, negative bandwidth or latency, or a link count that is neither
// 0, 1 nor devices - 1.
void ValidateCluster(const Cluster& cluster);


}  // namespace mp
