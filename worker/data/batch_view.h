// How a step hands a gathered batch to the layer graph: the ids each
// table reads (to map to rows and pull), and the graph's view of the
// batch with the pulled rows. The distributed worker and the one-process
// trainer share them.

#ifndef TESSERA_WORKER_DATA_BATCH_VIEW_H_
#define TESSERA_WORKER_DATA_BATCH_VIEW_H_

#include <cstdint>
#include <vector>

#include "absl/types/span.h"
#include "data/example_set.h"
#include "worker/nn/graph.h"

namespace tessera {

// The ids of every sparse input table `t` reads (graph.table_reads(t) in
// order), concatenated, into *ids.
void CollectTableIds(const Graph& graph, const HostBatch& batch, int t,
                     std::vector<int64_t>* ids);

// The graph's view of `batch`, with rows[t] and positions[t] the pulled
// rows of table t and each collected id's index among them. The view
// points into its arguments, which must outlive it.
GraphBatch ViewOf(const HostBatch& batch,
                  absl::Span<const absl::Span<const float>> rows,
                  const std::vector<std::vector<int64_t>>& positions);
GraphBatch ViewOf(const HostBatch& batch,
                  const std::vector<std::vector<float>>& rows,
                  const std::vector<std::vector<int64_t>>& positions);

}  // namespace tessera

#endif  // TESSERA_WORKER_DATA_BATCH_VIEW_H_
