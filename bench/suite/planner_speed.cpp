// Planner speed: for every zoo model, what mpplan spent loading, profiling
// and partitioning (with the K x M x schedule search) when the fidelity
// and partitioner sections planned it; and the partitioner alone on
// synthetic chains and branchy DAGs of 1,000 and 10,000 nodes into 8 and
// 64 stages (micro-batch count and schedule searched), in this process.
#include "bench/best_of.h"
#include "bench/suite/process.h"
#include "bench/suite/zoo_cases.h"
#include "bench/synthetic_graphs.h"
#include "planner/partition/search.h"

namespace mp::bench {
Section PlannerSpeed(const Suite& suite) {
  Section section("planner_speed");
  for (const ZooCase& z : ZooCases(suite)) {
    const auto& timing = ZooProfile(suite, z).at("timing");
    section.rows.push_back({{"graph", z.name},
                            {"nodes", nullptr},
                            {"stages", "1-2"},
                            {"load_ms", timing.at("load_ms")},
                            {"profile_ms", timing.at("profile_ms")},
                            {"partition_ms", timing.at("partition_ms")}});
    section.summary.push_back({"mpplan " + z.name + ": load / profile / partition+search",
                               Format("%.0f / %.0f / %.1f ms", timing.at("load_ms").get<double>(),
                                      timing.at("profile_ms").get<double>(), timing.at("partition_ms").get<double>()),
                               "", ""});
  }
  const auto cluster_of = [](int k) { return UniformCluster(k, {"gpu", 80ll << 30, 1.0}, {25e9, 0.01}); };
  for (int nodes : suite.smoke ? std::vector<int>{1000} : std::vector<int>{1000, 10000}) {
    for (bool chain : {true, false}) {
      const auto graph = chain ? LongChain(nodes) : BranchyDag(nodes);
      for (int stages : {8, 64}) {
        PlanRequest request;
        request.stages = stages;
        SearchResult result;
        const auto cluster = cluster_of(stages);
        const double ms =
            BestOfMs(Pick(suite, 1, 3), [&] { result = SearchPlan(graph.graph, graph.profile, cluster, request); });
        const std::string name = Format("%s of %d nodes", chain ? "chain" : "branchy DAG", nodes);
        section.rows.push_back({{"graph", name},
                                {"nodes", graph.graph.nodes.size()},
                                {"stages", stages},
                                {"load_ms", nullptr},
                                {"profile_ms", nullptr},
                                {"partition_ms", ms}});
        section.summary.push_back(
            {Format("partition+search, %s -> %d stages", name.c_str(), stages), Format("%.1f ms", ms), "",
             Format("M = %d, %s", result.partition.microbatches, ScheduleName(result.partition.schedule).c_str())});
      }
    }
  }
  return section;
}

}  // namespace mp::bench
