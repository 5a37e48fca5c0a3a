// One push's optimizer step on the rows of an fp16 or bf16 table
// (row_precision.h). The plain way widens a row to fp32, lets the
// optimizer step it and rounds it back stochastically: two extra passes
// and a copy per row, which made an fp16 table slower than an fp32 one.
// For SGD, Adagrad and rowwise_adagrad without weight decay, on a CPU with
// AVX2 and F16C, this does all three in one pass, 8 values at a time in
// registers. Either way the stored bits and the slots are exactly those of
// WidenRow, Optimizer::Apply and NarrowRowStochastic with RowRoundingSeed:
// the same fp32 operations in the same order, the same draws and rule, so
// sync bit-identity and checkpoints do not depend on which path ran.
#ifndef TESSERA_COMMON_OPTIMIZER_NARROW_ROW_STEP_H_
#define TESSERA_COMMON_OPTIMIZER_NARROW_ROW_STEP_H_

#include <cstdint>
#include <vector>

#include "common/optimizer/optimizer.h"
#include "proto/job.pb.h"

namespace tessera {

class NarrowRowStep {
 public:
  // The rule of the fused pass; kPlain: the widen, Apply, narrow way.
  enum class Rule { kPlain, kSgd, kAdagrad, kRowwiseAdagrad };

  // One update `t` of a table stored in `precision` (ROW_FP16 or
  // ROW_BF16), whose rows round with RowRoundingSeed(table_seed, step,
  // row). `optimizer` must outlive this. `allow_fused` false: always the
  // plain way (tests compare the two).
  NarrowRowStep(const Optimizer& optimizer, RowPrecision precision,
                UpdateStep t, uint64_t table_seed, int64_t step,
                bool allow_fused = true);

  // Steps row `row` (its id in the whole variable): `stored` holds its
  // `dim` values in the table's precision, grad[0, dim) its gradient,
  // slots[k] its slot k (optimizer.slot_row_elements(k, dim) floats).
  void Apply(void* stored, const float* grad, float* const* slots, int64_t dim,
             int64_t row);

  Rule rule() const { return rule_; }

 private:
  const Optimizer& optimizer_;
  const RowPrecision precision_;
  const UpdateStep t_;
  // DeriveSeed(table_seed, step): RowRoundingSeed's first half, once per
  // update rather than per row.
  const uint64_t step_seed_;
  Rule rule_ = Rule::kPlain;
  float lr_ = 0;             // the update's scheduled rate
  float epsilon_ = 0;        // Adagrad's
  std::vector<float> wide_;  // the plain way's fp32 row
};

}  // namespace tessera

#endif  // TESSERA_COMMON_OPTIMIZER_NARROW_ROW_STEP_H_
