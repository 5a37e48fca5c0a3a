// The embedding tables a mirrored or hybrid worker keeps whole in its
// replica (common/model/table_placement.h), as TorchRec's data-parallel
// tables: a step copies its rows out of the replica instead of pulling
// them, and adds the rows' gradients into the replica's gradient buffer,
// so one all-reduce carries them with the dense gradients and every
// replica applies the same update. The rows each step touched travel with
// the gradient (MirroredParameters::touched_rows), so a replicated table
// steps as a sharded one does, lazily or densely as its optimizer's
// table_updates says.
//
// Thread safety: const after Create.

#ifndef TESSERA_WORKER_PARAMS_REPLICATED_TABLES_H_
#define TESSERA_WORKER_PARAMS_REPLICATED_TABLES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/model_spec.h"
#include "google/protobuf/map.h"
#include "proto/job.pb.h"

namespace tessera {

class ReplicatedTables {
 public:
  // `tables` are the model's tables in order; those named in `replicated`
  // (each with the optimizer it trains with) are kept whole.
  // InvalidArgument names a replicated table that grows (vocab_size 0) or
  // a name that is no table.
  static absl::StatusOr<ReplicatedTables> Create(
      const std::vector<VariableDef>& tables,
      const google::protobuf::Map<std::string, OptimizerConfig>& replicated);

  bool empty() const { return defs_.empty(); }
  bool holds(int table) const { return slot_[table] >= 0; }
  // The replica's variables for the kept tables, in table order, each
  // with its optimizer as its update rule; they follow the dense
  // variables in the replica.
  const std::vector<VariableDef>& variables() const { return defs_; }
  // The index among variables() of table `table` (holds(table)).
  int slot(int table) const { return slot_[table]; }

  // Copies rows `rows` (distinct row ids, LocalizeTableIds) of the kept
  // table `table`, whose values are `values`, into `out` ([rows, dim]).
  // OutOfRange names a row outside the table.
  absl::Status Gather(int table, absl::Span<const int64_t> rows,
                      absl::Span<const float> values,
                      absl::Span<float> out) const;
  // Sets `gradient` (the table's part of the replica's gradient buffer)
  // to the step's gradient: zero but for rows `rows`, whose gradients
  // `grads` ([rows, dim]) are added in; and `touched` (its marks, one per
  // row) to 1 for rows `rows` and 0 for the rest.
  void Scatter(int table, absl::Span<const int64_t> rows,
               absl::Span<const float> grads, absl::Span<float> gradient,
               absl::Span<float> touched) const;

 private:
  std::vector<VariableDef> defs_;
  std::vector<int> slot_;  // per table of the model, -1: sharded
};

}  // namespace tessera

#endif  // TESSERA_WORKER_PARAMS_REPLICATED_TABLES_H_
