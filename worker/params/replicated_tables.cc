#include "worker/params/replicated_tables.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace tessera {

absl::StatusOr<ReplicatedTables> ReplicatedTables::Create(
    const std::vector<VariableDef>& tables,
    const google::protobuf::Map<std::string, OptimizerConfig>& replicated) {
  ReplicatedTables kept;
  kept.slot_.assign(tables.size(), -1);
  size_t found = 0;
  for (size_t t = 0; t < tables.size(); ++t) {
    auto it = replicated.find(tables[t].name);
    if (it == replicated.end()) continue;
    ++found;
    const VariableDef& table = tables[t];
    if (table.shape.size() != 2 || table.shape[0] <= 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "table \"", table.name, "\" grows with the ids it meets, so it ",
          "cannot be replicated on the workers"));
    }
    VariableDef def = table;
    def.update_rule = it->second;
    kept.slot_[t] = static_cast<int>(kept.defs_.size());
    kept.defs_.push_back(std::move(def));
  }
  if (found != static_cast<size_t>(replicated.size())) {
    for (const auto& [name, optimizer] : replicated) {
      if (std::none_of(tables.begin(), tables.end(),
                       [&](const VariableDef& t) { return t.name == name; })) {
        return absl::InvalidArgumentError(absl::StrCat(
            "replicated table \"", name, "\" is no table of the model"));
      }
    }
  }
  return kept;
}

absl::Status ReplicatedTables::Gather(int table, absl::Span<const int64_t> rows,
                                      absl::Span<const float> values,
                                      absl::Span<float> out) const {
  const VariableDef& def = defs_[slot_[table]];
  const int64_t vocab = def.shape[0], dim = def.shape[1];
  for (size_t i = 0; i < rows.size(); ++i) {
    if (rows[i] < 0 || rows[i] >= vocab) {
      return absl::OutOfRangeError(absl::StrCat("row ", rows[i], " of table \"",
                                                def.name, "\" is outside its ",
                                                vocab, " rows"));
    }
    std::copy_n(values.data() + rows[i] * dim, dim, out.data() + i * dim);
  }
  return absl::OkStatus();
}

void ReplicatedTables::Scatter(int table, absl::Span<const int64_t> rows,
                               absl::Span<const float> grads,
                               absl::Span<float> gradient,
                               absl::Span<float> touched) const {
  const int64_t dim = defs_[slot_[table]].shape[1];
  std::fill(gradient.begin(), gradient.end(), 0.0f);
  std::fill(touched.begin(), touched.end(), 0.0f);
  for (size_t i = 0; i < rows.size(); ++i) {
    touched[rows[i]] = 1.0f;
    float* row = gradient.data() + rows[i] * dim;
    const float* g = grads.data() + i * dim;
    for (int64_t j = 0; j < dim; ++j) row[j] += g[j];
  }
}

}  // namespace tessera
