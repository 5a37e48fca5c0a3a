#include "common/optimizer/narrow_row_step.h"

#include "common/counter_rng.h"
#include "common/optimizer/narrow_row_step_avx2.h"
#include "common/optimizer/optimizers.h"
#include "common/optimizer/row_precision.h"
#include "common/optimizer/row_precision_f16c.h"
#include "common/optimizer/rowwise_adagrad.h"

namespace tessera {

NarrowRowStep::NarrowRowStep(const Optimizer& optimizer, RowPrecision precision,
                             UpdateStep t, uint64_t table_seed, int64_t step,
                             bool allow_fused)
    : optimizer_(optimizer),
      precision_(precision),
      t_(t),
      step_seed_(DeriveSeed(table_seed, static_cast<uint64_t>(step))) {
  // Weight decay moves the values before the step (BeginUpdate): the
  // plain way has it.
  if (!allow_fused || optimizer.weight_decay() != 0 ||
      (precision != ROW_FP16 && precision != ROW_BF16) ||
      !row_precision_internal::UseF16c()) {
    return;
  }
  if (dynamic_cast<const SgdOptimizer*>(&optimizer) != nullptr) {
    rule_ = Rule::kSgd;
  } else if (const auto* adagrad =
                 dynamic_cast<const AdagradOptimizer*>(&optimizer)) {
    rule_ = Rule::kAdagrad;
    epsilon_ = adagrad->epsilon();
  } else if (dynamic_cast<const RowwiseAdagradOptimizer*>(&optimizer) !=
             nullptr) {
    rule_ = Rule::kRowwiseAdagrad;
  } else {
    return;
  }
  // BeginUpdate's rate: a pure function of the step, so once per update.
  lr_ = optimizer.learning_rate().Rate(t.schedule);
}

void NarrowRowStep::Apply(void* stored, const float* grad, float* const* slots,
                          int64_t dim, int64_t row) {
  // RowRoundingSeed(table_seed, step, row).
  const uint64_t seed = DeriveSeed(step_seed_, static_cast<uint64_t>(row));
  narrow_row_internal::RowKernel k;
  k.bf16 = precision_ == ROW_BF16;
  uint16_t* bits = static_cast<uint16_t*>(stored);
  switch (rule_) {
    case Rule::kSgd:
      k.scale = lr_;
      narrow_row_internal::StepNarrowRowAvx2(k, bits, grad, nullptr, dim, seed);
      return;
    case Rule::kAdagrad:
      k.kernel = narrow_row_internal::Kernel::kAdagrad;
      k.lr = lr_;
      k.epsilon = epsilon_;
      narrow_row_internal::StepNarrowRowAvx2(k, bits, grad, slots[0], dim,
                                             seed);
      return;
    case Rule::kRowwiseAdagrad:
      if (dim <= 0) return;
      k.scale = static_cast<const RowwiseAdagradOptimizer&>(optimizer_)
                    .AccumulateRow(grad, dim, lr_, slots[0]);
      narrow_row_internal::StepNarrowRowAvx2(k, bits, grad, nullptr, dim, seed);
      return;
    case Rule::kPlain:
      break;
  }
  wide_.resize(dim);
  WidenRow(precision_, stored, wide_.data(), dim);
  optimizer_.Apply(wide_.data(), grad, slots, dim, t_);
  NarrowRowStochastic(precision_, wide_.data(), stored, dim, seed);
}

}  // namespace tessera
