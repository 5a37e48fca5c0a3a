// Gradient clipping as Keras' optimizers do it (their clipvalue, clipnorm
// and global_clipnorm), the one owner of its formulas: the workers clip a
// step's gradients with it before they push them (or, mirrored, after the
// all-reduce), and the one-process trainer before it applies them.
//
// Keras' semantics, kept here:
//  - value: every element into [-value, value];
//  - norm: each variable's gradient scaled to an L2 norm of at most norm
//    (g * norm / max(|g|, norm));
//  - global_norm: the gradients of all the variables one optimizer trains
//    scaled together, by global_norm / max(|all|, global_norm), where |all|
//    is the L2 norm of all of them at once (tf.clip_by_global_norm).
// As Keras 3, an optimizer sets at most one of the three. A table's
// gradient is its rows' gradients (the rows a batch touched: the others'
// are zero and add nothing to a norm).
//
// Thread safety: plain functions over the caller's buffers.
#ifndef TESSERA_COMMON_OPTIMIZER_GRADIENT_CLIPPING_H_
#define TESSERA_COMMON_OPTIMIZER_GRADIENT_CLIPPING_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "proto/job.pb.h"

namespace tessera {

// One optimizer's clipping; 0 leaves that kind off.
struct GradientClip {
  float value = 0;
  float norm = 0;
  float global_norm = 0;

  bool any() const { return value > 0 || norm > 0 || global_norm > 0; }
};

// The clipping `optimizer` asks for (OptimizerConfig.clipping).
GradientClip GradientClipOf(const OptimizerConfig& optimizer);

// OK when each threshold is finite and >= 0 and at most one is set;
// otherwise InvalidArgument naming `where` (e.g. "optimizer.clipping") and
// the field.
absl::Status ValidateGradientClip(const GradientClip& clip,
                                  absl::string_view where);

// One variable's gradient in a step: its values (changed in place), the
// clipping of the optimizer that trains it (null or !any(): left as is;
// must outlive the call), and its group: the variables of one group share
// one global norm (one optimizer's variables).
struct ClippedGradient {
  absl::Span<float> values;
  const GradientClip* clip = nullptr;
  int group = 0;
};

// Clips `gradients` in place as Keras' optimizers clip before applying.
// `weight`: the spans hold weight times the gradient to clip (a mirrored
// all-reduce's sum of examples times their mean gradients, before it is
// divided by the examples), so the thresholds apply to the gradient
// itself. A gradient, or a group, whose norm is not finite is left as it
// is, for the non-finite check that follows to refuse by its variable's
// name. REQUIRES: each clip valid (ValidateGradientClip), weight > 0.
void ClipGradients(absl::Span<const ClippedGradient> gradients,
                   double weight = 1);

// The L2 norm of the gradients of `group` among `gradients`, as
// ClipGradients computes it (in double, before any clipping): what the
// global norm is, for a caller that reports it.
double GlobalNorm(absl::Span<const ClippedGradient> gradients, int group);

// The clipping of a step's variables, each by the optimizer that trains
// it: what ClipGradients needs, made once (a worker at its configuration,
// a replica at its creation, the one-process trainer at its start).
// Variables whose optimizers are equal share one global norm: one
// optimizer's. A variable without an optimizer (null: a moving statistic,
// or a gradient clipped elsewhere) is left as it is.
//
// Thread safety: const after Create; Clip changes only the caller's spans.
class GradientClipPlan {
 public:
  GradientClipPlan() = default;  // clips nothing

  // `optimizers[i]`: the optimizer of variable i (may be null), named
  // `names[i]` in errors. InvalidArgument names the variable whose
  // optimizer's clipping is invalid. The configs need not outlive the plan.
  static absl::StatusOr<GradientClipPlan> Create(
      const std::vector<const OptimizerConfig*>& optimizers,
      const std::vector<std::string>& names);

  // Whether some variable is clipped at all.
  bool any() const { return any_; }
  size_t size() const { return clips_.size(); }

  // Clips `gradients[i]`, variable i's gradient (an empty span: none this
  // step), as ClipGradients with `weight`. REQUIRES: gradients.size() ==
  // size().
  void Clip(absl::Span<const absl::Span<float>> gradients,
            double weight = 1) const;

 private:
  std::vector<GradientClip> clips_;
  std::vector<int> groups_;
  bool any_ = false;
};

}  // namespace tessera

#endif  // TESSERA_COMMON_OPTIMIZER_GRADIENT_CLIPPING_H_
