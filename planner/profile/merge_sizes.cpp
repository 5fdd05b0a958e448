// MergeSizes: one size at a time, each per-size vector gets the new entry
// at the position the size takes in the ascending list.
#include "planner/profile/merge_sizes.h"

#include <algorithm>
#include <iterator>
#include <vector>

#include "common/error.h"

namespace mp {
namespace {

// Inserts from[j] at position i of `to`, where `to` has one entry per size
// of the profile (else it is left alone: an older profile without the
// I/W split keeps its empty vectors).
template <class T>
void InsertAt(std::vector<T>& to, size_t sizes, size_t i, const std::vector<T>& from, size_t j) {
  if (to.size() != sizes) return;
  if (j >= from.size()) throw InternalError("profile: a measured size lacks a per-size value the profile has");
  to.insert(to.begin() + static_cast<std::ptrdiff_t>(i), from[j]);
}

// The nodes' forward and backward times at `size`; -1 where it is not a size of `profile`.
double TotalAt(const Profile& profile, int64_t size) {
  const auto& sizes = profile.microbatch_sizes;
  const auto at = std::find(sizes.begin(), sizes.end(), size);
  if (at == sizes.end()) return -1;
  const size_t i = static_cast<size_t>(at - sizes.begin());
  double total = 0;
  for (const NodeCost& n : profile.nodes) {
    if (i < n.forward_ms.size()) total += n.forward_ms[i];
    if (i < n.backward_ms.size()) total += n.backward_ms[i];
  }
  return total;
}

}  // namespace

int64_t AnchorSize(const Profile& profile, int64_t size) {
  const auto& sizes = profile.microbatch_sizes;
  if (sizes.empty()) throw InternalError("profile: no size to measure again beside an added one");
  const auto not_below = std::lower_bound(sizes.begin(), sizes.end(), size);
  return not_below == sizes.begin() ? *not_below : *std::prev(not_below);
}

double PaceToAnchor(Profile& more, const Profile& profile, int64_t anchor) {
  const double before = TotalAt(profile, anchor), again = TotalAt(more, anchor);
  if (before <= 0 || again <= 0) return 1;
  const double pace = before / again;
  for (NodeCost& n : more.nodes) {
    for (std::vector<double>* times : {&n.forward_ms, &n.backward_ms, &n.input_backward_ms, &n.weight_backward_ms}) {
      for (double& ms : *times) ms *= pace;
    }
  }
  return pace;
}

void MergeSizes(Profile& profile, const Profile& more) {
  if (more.nodes.size() != profile.nodes.size() || more.training != profile.training ||
      more.fingerprint != profile.fingerprint) {
    throw InternalError(Concat("profile: cannot merge sizes measured on another graph or mode (", more.nodes.size(),
                               " nodes against ", profile.nodes.size(), ")"));
  }
  for (size_t j = 0; j < more.microbatch_sizes.size(); ++j) {
    const int64_t m = more.microbatch_sizes[j];
    auto& sizes = profile.microbatch_sizes;
    const auto at = std::lower_bound(sizes.begin(), sizes.end(), m);
    if (at != sizes.end() && *at == m) continue;
    const size_t i = static_cast<size_t>(at - sizes.begin()), count = sizes.size();
    for (size_t n = 0; n < profile.nodes.size(); ++n) {
      NodeCost& to = profile.nodes[n];
      const NodeCost& from = more.nodes[n];
      InsertAt(to.forward_ms, count, i, from.forward_ms, j);
      InsertAt(to.backward_ms, count, i, from.backward_ms, j);
      InsertAt(to.input_backward_ms, count, i, from.input_backward_ms, j);
      InsertAt(to.weight_backward_ms, count, i, from.weight_backward_ms, j);
      InsertAt(to.spread, count, i, from.spread, j);
      InsertAt(to.flops, count, i, from.flops, j);
      InsertAt(to.bytes_moved, count, i, from.bytes_moved, j);
      InsertAt(to.forward_working_bytes, count, i, from.forward_working_bytes, j);
      InsertAt(to.backward_working_bytes, count, i, from.backward_working_bytes, j);
    }
    InsertAt(profile.whole_scale, count, i, more.whole_scale, j);
    sizes.insert(at, m);
  }
}

}  // namespace mp
