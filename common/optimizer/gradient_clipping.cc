#include "common/optimizer/gradient_clipping.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"

namespace tessera {
namespace {

double SquaredNorm(absl::Span<const float> g) {
  // In double: a table's many rows would lose their small squares in a
  // float sum, and the sum's order is then no worry.
  double sum = 0;
  for (float x : g) sum += static_cast<double>(x) * x;
  return sum;
}

void Scale(absl::Span<float> g, float factor) {
  for (float& x : g) x *= factor;
}

}  // namespace

GradientClip GradientClipOf(const OptimizerConfig& optimizer) {
  const GradientClipping& c = optimizer.clipping();
  return {.value = c.value(), .norm = c.norm(), .global_norm = c.global_norm()};
}

absl::Status ValidateGradientClip(const GradientClip& clip,
                                  absl::string_view where) {
  int set = 0;
  const std::pair<const char*, float> fields[] = {
      {"value", clip.value},
      {"norm", clip.norm},
      {"global_norm", clip.global_norm}};
  for (const auto& [name, v] : fields) {
    if (!std::isfinite(v) || v < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, ".", name, " must be a finite number >= 0 (0: off), got ", v));
    }
    set += v > 0;
  }
  if (set > 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        where,
        ": set at most one of value, norm and global_norm (as Keras' "
        "clipvalue, clipnorm and global_clipnorm), got value ",
        clip.value, ", norm ", clip.norm, ", global_norm ", clip.global_norm));
  }
  return absl::OkStatus();
}

double GlobalNorm(absl::Span<const ClippedGradient> gradients, int group) {
  double sum = 0;
  for (const ClippedGradient& g : gradients) {
    if (g.group == group) sum += SquaredNorm(g.values);
  }
  return std::sqrt(sum);
}

void ClipGradients(absl::Span<const ClippedGradient> gradients, double weight) {
  // Each group's global norm first, over its unclipped gradients.
  std::map<int, double> global;
  for (const ClippedGradient& g : gradients) {
    if (g.clip != nullptr && g.clip->global_norm > 0) {
      global[g.group] += SquaredNorm(g.values);
    }
  }
  for (auto& [group, sum] : global) sum = std::sqrt(sum);

  for (const ClippedGradient& g : gradients) {
    if (g.clip == nullptr || !g.clip->any()) continue;
    const GradientClip& c = *g.clip;
    if (c.value > 0) {
      const float v = static_cast<float>(c.value * weight);
      // A non-finite element stays, for the non-finite check to refuse.
      for (float& x : g.values) {
        if (std::isfinite(x)) x = std::clamp(x, -v, v);
      }
    } else if (c.norm > 0) {
      const double limit = c.norm * weight;
      const double norm = std::sqrt(SquaredNorm(g.values));
      if (std::isfinite(norm) && norm > limit) {
        Scale(g.values, static_cast<float>(limit / norm));
      }
    } else {
      const double limit = c.global_norm * weight;
      const double norm = global[g.group];
      if (std::isfinite(norm) && norm > limit) {
        Scale(g.values, static_cast<float>(limit / norm));
      }
    }
  }
}

absl::StatusOr<GradientClipPlan> GradientClipPlan::Create(
    const std::vector<const OptimizerConfig*>& optimizers,
    const std::vector<std::string>& names) {
  GradientClipPlan plan;
  std::vector<std::string> distinct;  // each group's optimizer, serialized
  for (size_t i = 0; i < optimizers.size(); ++i) {
    const OptimizerConfig* o = optimizers[i];
    const GradientClip clip =
        o != nullptr ? GradientClipOf(*o) : GradientClip{};
    const std::string name = i < names.size() ? names[i] : "";
    if (absl::Status s = ValidateGradientClip(
            clip, absl::StrCat("optimizer of ", name, ": clipping"));
        !s.ok()) {
      return s;
    }
    int group = -1;
    if (o != nullptr) {
      const std::string key = o->SerializeAsString();
      group = static_cast<int>(
          std::find(distinct.begin(), distinct.end(), key) - distinct.begin());
      if (group == static_cast<int>(distinct.size())) distinct.push_back(key);
    }
    plan.clips_.push_back(clip);
    plan.groups_.push_back(group);
    plan.any_ = plan.any_ || clip.any();
  }
  return plan;
}

void GradientClipPlan::Clip(absl::Span<const absl::Span<float>> gradients,
                            double weight) const {
  if (!any_) return;
  std::vector<ClippedGradient> clipped;
  for (size_t i = 0; i < gradients.size() && i < clips_.size(); ++i) {
    if (!clips_[i].any() || gradients[i].empty()) continue;
    clipped.push_back({gradients[i], &clips_[i], groups_[i]});
  }
  ClipGradients(clipped, weight);
}

}  // namespace tessera
