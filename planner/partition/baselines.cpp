// The baseline partitioners: uniform node counts and balanced parameter
// bytes (DeepSpeed's pipeline partition methods), torchgpipe's block
// balancing of compute time (Barany and Grinberg, "Block partitions of
// sequences", Israel J. Math. 2015, as used by torchgpipe.balance), and the
// user's named-layer split as in the PyTorch model-parallel tutorial.
#include "planner/partition/baselines.h"

#include <algorithm>
#include <map>
#include <set>

#include "common/error.h"
#include "planner/partition/partition.h"
#include "planner/partition/partition_dp.h"

namespace mp {
namespace {

void CheckEnoughNodes(const StageCostModel& model, const char* method) {
  if (model.UsefulNodes() < model.Stages()) {
    throw PlanError(Concat(method, ": cannot cut into ", model.Stages(), " stages: only ", model.UsefulNodes(),
                           " nodes take time"));
  }
}

std::string Trim(const std::string& text) {
  const auto first = text.find_first_not_of(" \t\n");
  if (first == std::string::npos) return "";
  return text.substr(first, text.find_last_not_of(" \t\n") - first + 1);
}

std::vector<std::string> Split(const std::string& text, char sep) {
  std::vector<std::string> parts(1);
  for (char c : text) {
    if (c == sep) {
      parts.emplace_back();
    } else {
      parts.back() += c;
    }
  }
  for (auto& part : parts) part = Trim(part);
  return parts;
}

bool LayerMatches(const std::string& layer, const std::string& name) {
  return layer.compare(0, name.size(), name) == 0 && (layer.size() == name.size() || layer[name.size()] == '.');
}

}  // namespace

std::vector<int> UniformBounds(const StageCostModel& model) {
  CheckEnoughNodes(model, "uniform");
  const int K = model.Stages(), U = model.UsefulNodes();
  std::vector<int> bounds = {0};
  int seen = 0;
  for (int p = 0; p < model.Positions() && int(bounds.size()) < K; ++p) {
    if (model.UsefulIn(p, p + 1) == 0) continue;
    if (seen == int(int64_t(bounds.size()) * U / K)) bounds.push_back(p);
    ++seen;
  }
  bounds.push_back(model.Positions());
  return bounds;
}

MinMaxTable ParamTable(const StageCostModel& model, int stages) {
  const OrderCosts& c = model.Costs();
  std::vector<double> prefix(model.Positions() + 1, 0);
  for (int p = 0; p < model.Positions(); ++p) prefix[p + 1] = prefix[p] + double(c.param_bytes[p]);
  return MinMaxTable(model, stages, prefix);
}

std::vector<int> ParamBounds(const StageCostModel& model) {
  CheckEnoughNodes(model, "params");
  return ParamTable(model, model.Stages()).Solve(model.Stages()).bounds;
}

std::vector<int> BlockBounds(const StageCostModel& model) {
  std::vector<int> b = UniformBounds(model);
  const int K = model.Stages();
  auto work = [&](int s) { return model.ComputeMs(s, b[s], b[s + 1]) / model.Spec(s).speed; };
  // Level: move one node that takes time from the heaviest block to a
  // neighbour while that lowers the heavier of the two blocks.
  for (int round = 0; round < model.Positions() * K; ++round) {
    int heavy = 0;
    for (int s = 1; s < K; ++s) {
      if (work(s) > work(heavy)) heavy = s;
    }
    const double before = work(heavy);
    bool moved = false;
    for (int side : {-1, +1}) {
      const int other = heavy + side;
      if (other < 0 || other >= K) continue;
      const int cut = side < 0 ? heavy : heavy + 1;  // index into b
      const int old = b[cut];
      if (side < 0) {  // give the first node that takes time to the left
        b[cut] = model.FirstUsefulEnd(old);
      } else {         // give the last node that takes time to the right
        int p = old - 1;
        while (p > b[heavy] && model.UsefulIn(p, p + 1) == 0) --p;
        b[cut] = p;
      }
      const bool valid = b[cut] > b[cut - 1] && b[cut] < b[cut + 1] && model.UsefulIn(b[heavy], b[heavy + 1]) > 0 &&
                         model.UsefulIn(b[other], b[other + 1]) > 0;
      if (valid && std::max(work(heavy), work(other)) < before) {
        moved = true;
        break;
      }
      b[cut] = old;
    }
    if (!moved) break;
  }
  return b;
}

std::vector<std::vector<std::string>> ParseLayerSplit(const std::string& text) {
  std::vector<std::vector<std::string>> groups;
  const auto parts = Split(text, '|');
  for (size_t g = 0; g < parts.size(); ++g) {
    if (parts[g].empty()) throw InputError(Concat("layer split '", text, "': group ", g + 1, " is empty"));
    groups.push_back(Split(parts[g], ','));
    for (const auto& name : groups.back()) {
      if (name.empty()) throw InputError(Concat("layer split '", text, "': empty layer name in group ", g + 1));
    }
  }
  return groups;
}

std::vector<int> LayerSplitBounds(const OpGraph& graph, const std::vector<int>& order,
                                  const std::vector<std::vector<std::string>>& groups) {
  std::map<std::string, int> group_of;
  for (size_t g = 0; g < groups.size(); ++g) {
    for (const auto& name : groups[g]) {
      auto [it, added] = group_of.emplace(name, int(g));
      if (!added) {
        throw InputError(Concat("layer split: layer '", name, "' is in group ", it->second + 1, " and group ", g + 1));
      }
    }
  }
  // The longest matching name per node, -1 for none.
  std::vector<std::string> match(order.size());
  std::set<std::string> used;
  for (size_t q = 0; q < order.size(); ++q) {
    // A constant is cloned into every stage that reads it, wherever the
    // pipeline order puts it (often far from its layer): it decides nothing.
    if (graph.nodes.at(order[q]).kind == "prim::Constant") continue;
    const std::string& layer = graph.nodes.at(order[q]).layer;
    for (const auto& [name, g] : group_of) {
      if (LayerMatches(layer, name) && name.size() > match[q].size()) match[q] = name;
    }
    if (!match[q].empty()) used.insert(match[q]);
  }
  for (const auto& [name, g] : group_of) {
    if (used.count(name)) continue;
    std::set<std::string> top;
    for (const auto& node : graph.nodes) {
      if (!node.layer.empty()) top.insert(node.layer.substr(0, node.layer.find('.')));
    }
    std::string known;
    for (const auto& t : top) known += (known.empty() ? "" : ", ") + t;
    throw InputError(Concat("layer split: layer '", name, "' matches no node (top-level layers: ", known, ")"));
  }
  std::vector<int> stage(order.size(), 0);
  int current = 0;
  std::string current_name;
  for (size_t q = 0; q < order.size(); ++q) {
    if (!match[q].empty()) {
      const int g = group_of[match[q]];
      if (g < current) {
        throw InputError(Concat("layer split: layer '", match[q], "' (group ", g + 1, ") is not contiguous: node ",
                                order[q], " (", graph.nodes[order[q]].layer, ") comes after layer '",
                                current_name, "' of group ", current + 1, " in pipeline order"));
      }
      current = g;
      current_name = match[q];
    }
    stage[q] = current;
  }
  for (size_t q = 1; q < order.size(); ++q) {
    if (stage[q] > stage[q - 1] + 1) {
      throw InternalError(Concat("layer split: group ", stage[q - 1] + 2, " has no node"));
    }
  }
  return BoundsFromStages(stage);
}

}  // namespace mp
