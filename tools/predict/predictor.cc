#include "tools/predict/predictor.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "data/criteo/ctr_dataset.h"
#include "worker/data/batch_view.h"

namespace tessera {

absl::StatusOr<std::unique_ptr<Predictor>> Predictor::Create(
    const TrainedModel& model, Backend* backend) {
  std::unique_ptr<Predictor> p(new Predictor());
  absl::StatusOr<std::unique_ptr<Graph>> graph =
      Graph::Create(model.graph, backend);
  if (!graph.ok()) return graph.status();
  p->graph_ = *std::move(graph);
  std::vector<absl::Span<const float>> values;
  for (const VariableDef& v : p->graph_->dense_variables()) {
    const TrainedVariable* trained = model.Find(v.name);
    if (trained == nullptr) {
      return absl::NotFoundError(
          absl::StrCat("the checkpoint has no variable '", v.name, "'"));
    }
    values.push_back(trained->values);
  }
  if (absl::Status s = p->graph_->SetParameters(values); !s.ok()) return s;
  for (const VariableDef& v : p->graph_->tables()) {
    const TrainedVariable* trained = model.Find(v.name);
    if (trained == nullptr) {
      return absl::NotFoundError(
          absl::StrCat("the checkpoint has no table '", v.name, "'"));
    }
    Table t;
    t.dim = v.shape[1];
    t.vocab = v.shape[0];
    t.values = &trained->values;
    t.zero_row = static_cast<int64_t>(t.values->size()) / t.dim;
    if (t.vocab == 0) {
      t.rows.reserve(trained->ids.size());
      for (size_t r = 0; r < trained->ids.size(); ++r) {
        t.rows[trained->ids[r]] = static_cast<int64_t>(r);
      }
    }
    p->table_index_[v.name] = static_cast<int>(p->tables_.size());
    p->tables_.push_back(std::move(t));
  }
  const size_t n = p->tables_.size();
  p->unique_.resize(n);
  p->positions_.resize(n);
  p->rows_.resize(n);
  return p;
}

absl::StatusOr<GraphResult> Predictor::Predict(const HostBatch& batch,
                                               std::vector<float>* outputs) {
  for (size_t t = 0; t < tables_.size(); ++t) {
    const Table& table = tables_[t];
    CollectTableIds(*graph_, batch, static_cast<int>(t), &ids_);
    mapped_.resize(ids_.size());
    for (size_t i = 0; i < ids_.size(); ++i) {
      if (table.vocab > 0) {
        const int64_t r = ids_[i] % table.vocab;
        mapped_[i] = r < 0 ? r + table.vocab : r;
      } else {
        auto it = table.rows.find(ids_[i]);
        mapped_[i] = it == table.rows.end() ? table.zero_row : it->second;
      }
    }
    LocalizeIds(mapped_, &unique_[t], &positions_[t]);
    rows_[t].resize(unique_[t].size() * table.dim);
    for (size_t u = 0; u < unique_[t].size(); ++u) {
      float* dst = rows_[t].data() + u * table.dim;
      if (unique_[t][u] == table.zero_row) {
        std::fill_n(dst, table.dim, 0.0f);
      } else {
        std::copy_n(table.values->data() + unique_[t][u] * table.dim, table.dim,
                    dst);
      }
    }
  }
  return graph_->Evaluate(ViewOf(batch, rows_, positions_), outputs);
}

void Predictor::PoolEmbeddings(
    const LayerDef& layer,
    const absl::flat_hash_map<std::string, int>& sparse_index,
    const HostBatch& batch, int64_t b, std::vector<float>* out) const {
  const Table& table = tables_[table_index_.at(layer.embedding_bag().table())];
  const int64_t dim = table.dim;
  out->assign(layer.inputs_size() * dim, 0.0f);
  for (int f = 0; f < layer.inputs_size(); ++f) {
    const int s = sparse_index.at(layer.inputs(f));
    const std::vector<int64_t>& offsets = batch.offsets[s];
    float* o = out->data() + f * dim;
    for (int64_t j = offsets[b]; j < offsets[b + 1]; ++j) {
      const int64_t id = batch.ids[s][j];
      int64_t row = table.zero_row;
      if (table.vocab > 0) {
        row = id % table.vocab;
        if (row < 0) row += table.vocab;
      } else if (auto it = table.rows.find(id); it != table.rows.end()) {
        row = it->second;
      }
      if (row == table.zero_row) continue;  // adds zeros
      const float* r = table.values->data() + row * dim;
      for (int64_t d = 0; d < dim; ++d) o[d] += r[d];
    }
    const int64_t count = offsets[b + 1] - offsets[b];
    if (layer.embedding_bag().combiner() == MEAN && count > 0) {
      const float n = static_cast<float>(count);
      for (int64_t d = 0; d < dim; ++d) o[d] /= n;
    }
  }
}

}  // namespace tessera
