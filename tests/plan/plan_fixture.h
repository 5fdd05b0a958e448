// A real plan made the way mpplan makes one, but from a synthetic graph and
// profile (tests/partition/synthetic.h): a 6-node chain searched into up to
// 3 stages. Plain, no LibTorch.
#pragma once

#include "planner/partition/search.h"
#include "planner/plan_build/plan_build.h"
#include "tests/partition/synthetic.h"

namespace mp::testing {

struct PlanFixture {
  GraphBuilder builder = Chain({4, 6, 5, 7, 3, 5}, 1000, 4096, {1, 2, 4, 8});
  Cluster cluster = UniformCluster(3, Device{"dev", int64_t(1) << 30, 1.0}, Link{1e9, 0.01});
  PlanRequest request;
  Plan plan;

  // `replicas` copies of the pipeline, each on 3 devices of its own.
  explicit PlanFixture(int stages = 3, bool training = true, int64_t memory_bytes = int64_t(1) << 30, int replicas = 1) {
    for (Device& d : cluster.devices) d.memory_bytes = memory_bytes;
    cluster.replicas = replicas;
    cluster.replica_link = Link{1e8, 0.05};
    builder.graph.fingerprint = "0123456789abcdef";
    builder.profile.fingerprint = builder.graph.fingerprint;
    builder.profile.inputs = {TensorSpec{"x", "float32", {8, 250}, 0}};
    builder.profile.source = "measured";
    builder.profile.device = "cpu";
    builder.profile.threads = 1;
    if (!training) {
      builder.profile.training = false;
      for (NodeCost& n : builder.profile.nodes) std::fill(n.backward_ms.begin(), n.backward_ms.end(), 0.0);
    }
    request.training = training;
    request.stages = stages;
    // 1F1B: the tests built on this plan read its action lists
    // (tests/partition/test_search.cpp searches the other schedules).
    if (training) request.schedule = ScheduleKind::kOneFOneB;
    const SearchResult result = SearchPlan(builder.graph, builder.profile, cluster, request);
    PlanSource source;
    source.model_path = "chain.pt";
    source.model_sha256 = std::string(64, 'a');
    for (int i = 0; i < 3 * replicas; ++i) source.devices.push_back(PlanDevice{i, "cpu", i, "dev", memory_bytes, 1.0});
    plan = BuildPlan(builder.graph, builder.profile, cluster, request, result, source);
  }
};

}  // namespace mp::testing
