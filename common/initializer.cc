#include "common/initializer.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/counter_rng.h"

namespace tessera {

absl::Status ValidateInitializer(const Initializer& init) {
  switch (init.kind()) {
    case Initializer::ZEROS:
    case Initializer::ONES:
      return absl::OkStatus();
    case Initializer::CONSTANT:
      if (!std::isfinite(init.value())) {
        return absl::InvalidArgumentError(absl::StrCat(
            "initializer constant: value must be finite, got ", init.value()));
      }
      return absl::OkStatus();
    case Initializer::UNIFORM:
      if (!std::isfinite(init.minval()) || !std::isfinite(init.maxval()) ||
          !(init.minval() < init.maxval())) {
        return absl::InvalidArgumentError(absl::StrCat(
            "initializer uniform: minval ", init.minval(),
            " must be below maxval ", init.maxval(), ", both finite"));
      }
      return absl::OkStatus();
    case Initializer::NORMAL:
      if (!(init.stddev() > 0) || !std::isfinite(init.stddev())) {
        return absl::InvalidArgumentError(
            absl::StrCat("initializer normal: stddev must be finite and > 0, "
                         "got ",
                         init.stddev()));
      }
      return absl::OkStatus();
    case Initializer::GLOROT_UNIFORM:
      if (init.fan_in() <= 0 || init.fan_out() <= 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("initializer glorot_uniform: fan_in and fan_out must "
                         "be > 0, got ",
                         init.fan_in(), " and ", init.fan_out()));
      }
      return absl::OkStatus();
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("unknown initializer kind ", init.kind()));
  }
}

void FillInitialValues(const Initializer& init, int64_t first_element,
                       absl::Span<float> out) {
  const uint64_t seed = init.seed();
  auto uniform = [&](float lo, float hi) {
    for (size_t i = 0; i < out.size(); ++i) {
      out[i] = lo + (hi - lo) * CounterUniform(seed, first_element + i);
    }
  };
  switch (init.kind()) {
    case Initializer::ZEROS:
      for (float& v : out) v = 0.0f;
      break;
    case Initializer::ONES:
      for (float& v : out) v = 1.0f;
      break;
    case Initializer::CONSTANT:
      for (float& v : out) v = init.value();
      break;
    case Initializer::UNIFORM:
      uniform(init.minval(), init.maxval());
      break;
    case Initializer::GLOROT_UNIFORM: {
      const float limit =
          std::sqrt(6.0f / static_cast<float>(init.fan_in() + init.fan_out()));
      uniform(-limit, limit);
      break;
    }
    case Initializer::NORMAL:
      // Box-Muller on two draws per element keeps elements independent.
      for (size_t i = 0; i < out.size(); ++i) {
        const uint64_t c = 2 * static_cast<uint64_t>(first_element + i);
        const float u1 = 1.0f - CounterUniform(seed, c);  // (0, 1]
        const float u2 = CounterUniform(seed, c + 1);
        out[i] = init.stddev() * std::sqrt(-2.0f * std::log(u1)) *
                 std::cos(6.28318530718f * u2);
      }
      break;
    default:
      break;
  }
}

}  // namespace tessera
