#ifndef TESSERA_PS_SERVER_SHARD_H_
#define TESSERA_PS_SERVER_SHARD_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "common/optimizer/optimizer.h"
#include "common/optimizer/row_precision.h"
#include "proto/ps_service.pb.h"

namespace tessera {

// A shard's whole state, as a restore fills it: values in fp32 whatever
// the shard stores (an fp16/bf16 shard's widened, which is exact; restored
// values are rounded to nearest, so the shard's own bits come back).
struct ShardState {
  std::vector<float> values;
  // One per optimizer slot, rows() * slot_row_elements(k) floats each.
  std::vector<std::vector<float>> slots;
  int64_t version = 0;
  int64_t updates = 0;  // the optimizer's step count (Adam's t)
};

// The state, borrowed from a shard under its lock (Shard::VisitState):
// the values as the shard stores them, so a checkpoint of an fp16/bf16
// shard keeps its 2-byte values without a widened copy.
struct ShardStateView {
  RowPrecision precision = ROW_FP32;
  absl::Span<const float> values;     // ROW_FP32
  absl::Span<const uint16_t> narrow;  // ROW_FP16, ROW_BF16: the bits
  std::vector<absl::Span<const float>> slots;
  int64_t version = 0;
  int64_t updates = 0;
};

// One shard of a variable: its values, its optimizer slots and a version
// that counts applied updates.
//
// Precision: a table's shard may store its values as fp16 or bf16
// (def.precision, common/optimizer/row_precision.h). Every read widens to
// fp32; an update widens the rows it touches, applies the optimizer in
// fp32 and rounds them back stochastically, seeded by (variable, update
// count, row of the variable, element), so the bits depend on neither the
// sharding nor the run. Slots stay fp32.
//
// Thread safety: all methods may be called concurrently. Reads take a
// shared lock, updates an exclusive one, so pulls of one shard run in
// parallel and an update is never seen half-applied within one read call.
class Shard {
 public:
  // `optimizer` must outlive the shard. Values are initialised from
  // def.initializer at the shard's position in the whole variable.
  static absl::StatusOr<std::unique_ptr<Shard>> Create(
      const ShardDef& def, const Optimizer* optimizer);

  Shard(const Shard&) = delete;
  Shard& operator=(const Shard&) = delete;

  const ShardDef& def() const { return def_; }
  int64_t rows() const { return rows_; }
  int64_t row_elements() const { return row_elements_; }
  int64_t num_elements() const { return rows_ * row_elements_; }
  // The values' size as fp32, as pulls and pushes carry them.
  int64_t byte_size() const { return num_elements() * sizeof(float); }
  // Values as stored plus optimizer slots.
  int64_t resident_bytes() const;
  RowPrecision precision() const { return precision_; }
  // Floats of slot k per row (the optimizer's slot_row_elements).
  int64_t slot_row_elements(int k) const;
  int64_t version() const;
  const Optimizer& optimizer() const { return *optimizer_; }

  // Copies bytes [offset, offset + length) of the values to `dst` and
  // returns the version they belong to. REQUIRES: the range is inside.
  int64_t ReadBytes(int64_t offset, int64_t length, char* dst) const;

  // Calls `fn` with values [offset, offset + length) (in floats) and their
  // version under the shard's shared lock: pulls go on meanwhile, updates
  // wait until `fn` returns. The data plane sends a pull straight from
  // here, without a snapshot copy. Returns what `fn` returns.
  // REQUIRES: the range is inside.
  absl::Status VisitValues(
      int64_t offset, int64_t length,
      absl::FunctionRef<absl::Status(absl::Span<const float>, int64_t)> fn)
      const;

  // Copies the given local rows to dst (rows.size() * row_elements floats).
  // REQUIRES: every row < rows().
  int64_t ReadRows(absl::Span<const int64_t> rows, float* dst) const;
  // The same in `wire`: ROW_FP32, or the shard's own precision (its values
  // as stored). REQUIRES: as ReadRows; wire is one of those two.
  int64_t ReadRowsAs(absl::Span<const int64_t> rows, RowPrecision wire,
                     void* dst) const;

  // Applies a gradient of the whole shard with the optimizer and returns
  // the new version. REQUIRES: grad.size() == num_elements(), all finite.
  //
  // `schedule_step` (here, FinishUpdate and ApplyRows): the update's step
  // on the learning-rate schedule, an asynchronous push's own step number
  // (UpdateStep); 0: the shard's count of updates, this one included.
  int64_t ApplyDense(absl::Span<const float> grad, int64_t schedule_step = 0);

  // The same update in two phases, so a server can answer a push before
  // the arithmetic and overlap it with the next transfer: BeginUpdate
  // takes the shard's exclusive lock and returns the version the update
  // will produce; FinishUpdate applies it and releases the lock. Readers
  // wait in between, so nobody sees the old value once the answer is out.
  // REQUIRES: one FinishUpdate per BeginUpdate, on the same thread; a
  // thread holding several shards took them in a consistent order.
  int64_t BeginUpdate() ABSL_EXCLUSIVE_LOCK_FUNCTION(mu_);
  void FinishUpdate(absl::Span<const float> grad, int64_t schedule_step = 0)
      ABSL_UNLOCK_FUNCTION(mu_);

  // Applies gradients of single rows (grads holds rows.size() rows), and
  // returns the new version: one update of the table's shard, lazy or
  // dense as the optimizer's table_updates says (common/optimizer/
  // table_step.h). REQUIRES: rows in range and distinct, all finite.
  int64_t ApplyRows(absl::Span<const int64_t> rows,
                    absl::Span<const float> grads, int64_t schedule_step = 0);

  // Calls `fn` with the shard's state under its shared lock, so what it
  // sees is one version: pulls go on meanwhile, updates wait until `fn`
  // returns. Checkpoints write straight from the view rather than copy a
  // shard that may be gigabytes. Returns what `fn` returns.
  absl::Status VisitState(
      absl::FunctionRef<absl::Status(const ShardStateView&)> fn) const;

  // A copy of the state (tests and tools).
  ShardState CopyState() const;

  // Replaces values, slots, version and update count at once (restoring a
  // checkpoint). InvalidArgument naming the shard, with nothing changed,
  // when the sizes or the number of slots differ from the shard's.
  absl::Status RestoreState(ShardState state);

  // Gradient buffers of the shard's size are reused across pushes so a
  // large push does not pay for fresh pages each time.
  std::unique_ptr<float[]> AcquireBuffer();
  void ReleaseBuffer(std::unique_ptr<float[]> buffer);

 private:
  Shard(const ShardDef& def, const Optimizer* optimizer, int64_t rows,
        int64_t row_elements);

  bool narrow() const { return precision_ != ROW_FP32; }
  // A narrow shard's values [begin, begin + n) widened into dst.
  void WidenValues(int64_t begin, int64_t n, float* dst) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // Applies the optimizer to a narrow shard's local rows with the dense
  // gradient rows `grad_rows` (rows.size() rows) and rounds them back.
  void ApplyNarrowRows(absl::Span<const int64_t> rows, const float* grads,
                       UpdateStep t) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Applies one dense update of the whole fp32 `values`.
  void ApplyWhole(float* values, const float* grad, UpdateStep t)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The UpdateStep of the update that made updates_ what it is.
  UpdateStep StepOf(int64_t schedule_step) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return UpdateStep(updates_, schedule_step > 0 ? schedule_step : updates_);
  }

  const ShardDef def_;
  const Optimizer* const optimizer_;
  const int64_t rows_;
  const int64_t row_elements_;
  const RowPrecision precision_;
  const uint64_t rounding_seed_;  // RowTableSeed of the variable

  mutable absl::Mutex mu_;
  std::vector<float> values_ ABSL_GUARDED_BY(mu_);     // fp32 shards
  std::vector<uint16_t> narrow_ ABSL_GUARDED_BY(mu_);  // fp16/bf16 shards
  std::vector<std::vector<float>> slots_ ABSL_GUARDED_BY(mu_);
  std::vector<float*> slot_ptrs_ ABSL_GUARDED_BY(mu_);
  int64_t version_ ABSL_GUARDED_BY(mu_) = 0;
  // Per-row update counts would cost a counter per row; one count per
  // shard matches TF, where Adam's step is the optimizer's iteration count.
  int64_t updates_ ABSL_GUARDED_BY(mu_) = 0;
  // A dense table update's gradient of the whole shard, kept between pushes.
  std::vector<float> dense_grad_ ABSL_GUARDED_BY(mu_);

  absl::Mutex pool_mu_;
  std::vector<std::unique_ptr<float[]>> spare_ ABSL_GUARDED_BY(pool_mu_);
};

}  // namespace tessera

#endif  // TESSERA_PS_SERVER_SHARD_H_
