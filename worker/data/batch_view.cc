#include "worker/data/batch_view.h"

namespace tessera {

void CollectTableIds(const Graph& graph, const HostBatch& batch, int t,
                     std::vector<int64_t>* ids) {
  ids->clear();
  for (int input : graph.table_reads(t)) {
    ids->insert(ids->end(), batch.ids[input].begin(), batch.ids[input].end());
  }
}

GraphBatch ViewOf(const HostBatch& batch,
                  absl::Span<const absl::Span<const float>> rows,
                  const std::vector<std::vector<int64_t>>& positions) {
  GraphBatch view;
  view.size = batch.size;
  for (const std::vector<float>& d : batch.dense) view.dense.push_back(d);
  for (const std::vector<int64_t>& o : batch.offsets) {
    view.sparse_offsets.push_back(o);
  }
  for (size_t t = 0; t < rows.size(); ++t) {
    view.table_rows.push_back(rows[t]);
    view.table_positions.push_back(positions[t]);
  }
  view.class_labels = batch.class_labels;
  view.labels = batch.labels;
  return view;
}

GraphBatch ViewOf(const HostBatch& batch,
                  const std::vector<std::vector<float>>& rows,
                  const std::vector<std::vector<int64_t>>& positions) {
  std::vector<absl::Span<const float>> spans(rows.begin(), rows.end());
  return ViewOf(batch, spans, positions);
}

}  // namespace tessera
