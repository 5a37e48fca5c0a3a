#include "common/optimizer/learning_rate_schedule.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace tessera {
namespace {

uint64_t NextId() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

bool Finite(double x) { return std::isfinite(x); }

const char* DecayName(LearningRateSchedule::Decay decay) {
  switch (decay) {
    case LearningRateSchedule::DECAY_CONSTANT:
      return "DECAY_CONSTANT";
    case LearningRateSchedule::DECAY_PIECEWISE:
      return "DECAY_PIECEWISE";
    case LearningRateSchedule::DECAY_EXPONENTIAL:
      return "DECAY_EXPONENTIAL";
    case LearningRateSchedule::DECAY_COSINE:
      return "DECAY_COSINE";
    case LearningRateSchedule::DECAY_POLYNOMIAL:
      return "DECAY_POLYNOMIAL";
    default:
      return "?";
  }
}

// "<prefix>.<name> <what...>" as InvalidArgument.
template <typename... What>
absl::Status Bad(absl::string_view prefix, absl::string_view name,
                 const What&... what) {
  return absl::InvalidArgumentError(
      absl::StrCat(prefix, ".", name, " ", what...));
}

// The warm-up and the hold before the decay.
absl::Status CheckWarmup(const LearningRateSchedule& s,
                         absl::string_view prefix) {
  auto bad = [&](absl::string_view name, auto... what) {
    return Bad(prefix, name, what...);
  };
  if (s.warmup_steps() < 0) {
    return bad("warmup_steps", "must be >= 0, got ", s.warmup_steps());
  }
  if (s.hold_steps() < 0) {
    return bad("hold_steps", "must be >= 0, got ", s.hold_steps());
  }
  if (!(s.warmup_initial_learning_rate() >= 0) ||
      !Finite(s.warmup_initial_learning_rate())) {
    return bad("warmup_initial_learning_rate",
               "must be a finite number >= 0, got ",
               s.warmup_initial_learning_rate());
  }
  if (s.warmup_steps() == 0 && s.warmup_initial_learning_rate() != 0) {
    return bad("warmup_initial_learning_rate",
               "is set but warmup_steps is 0 (no warm-up)");
  }
  return absl::OkStatus();
}

// A field the decay does not read is a mistake in the job, not a no-op;
// decay_steps must be set for a decay that reads it.
absl::Status CheckFieldsRead(const LearningRateSchedule& s,
                             absl::string_view prefix) {
  auto bad = [&](absl::string_view name, auto... what) {
    return Bad(prefix, name, what...);
  };
  const LearningRateSchedule::Decay d = s.decay();
  auto only = [&](bool set, absl::string_view name,
                  LearningRateSchedule::Decay reader) -> absl::Status {
    if (set && d != reader) {
      return bad(name, "is only read by ", DecayName(reader), ", not ",
                 DecayName(d));
    }
    return absl::OkStatus();
  };
  for (absl::Status status :
       {only(s.decay_rate() != 0, "decay_rate",
             LearningRateSchedule::DECAY_EXPONENTIAL),
        only(s.staircase(), "staircase",
             LearningRateSchedule::DECAY_EXPONENTIAL),
        only(!s.boundaries().empty(), "boundaries",
             LearningRateSchedule::DECAY_PIECEWISE),
        only(!s.values().empty(), "values",
             LearningRateSchedule::DECAY_PIECEWISE),
        only(s.alpha() != 0, "alpha", LearningRateSchedule::DECAY_COSINE),
        only(s.end_learning_rate() != 0, "end_learning_rate",
             LearningRateSchedule::DECAY_POLYNOMIAL),
        only(s.has_power(), "power", LearningRateSchedule::DECAY_POLYNOMIAL),
        only(s.cycle(), "cycle", LearningRateSchedule::DECAY_POLYNOMIAL)}) {
    if (!status.ok()) return status;
  }
  const bool uses_steps = d == LearningRateSchedule::DECAY_EXPONENTIAL ||
                          d == LearningRateSchedule::DECAY_COSINE ||
                          d == LearningRateSchedule::DECAY_POLYNOMIAL;
  if (uses_steps && s.decay_steps() <= 0) {
    return bad("decay_steps", "must be > 0 for ", DecayName(d), ", got ",
               s.decay_steps());
  }
  if (!uses_steps && s.decay_steps() != 0) {
    return bad("decay_steps", "is not read by ", DecayName(d));
  }
  return absl::OkStatus();
}

// The options of the decay itself.
absl::Status CheckDecayOptions(const LearningRateSchedule& s,
                               absl::string_view prefix) {
  auto bad = [&](absl::string_view name, auto... what) {
    return Bad(prefix, name, what...);
  };
  switch (s.decay()) {
    case LearningRateSchedule::DECAY_EXPONENTIAL:
      if (!(s.decay_rate() > 0) || !Finite(s.decay_rate())) {
        return bad("decay_rate", "must be a finite number > 0, got ",
                   s.decay_rate());
      }
      break;
    case LearningRateSchedule::DECAY_PIECEWISE: {
      if (s.values_size() != s.boundaries_size() + 1) {
        return bad("values", "must hold one more rate than boundaries (",
                   s.boundaries_size(), " boundaries), got ", s.values_size());
      }
      for (int i = 0; i < s.values_size(); ++i) {
        if (!(s.values(i) > 0) || !Finite(s.values(i))) {
          return bad(absl::StrCat("values[", i, "]"),
                     "must be a finite rate > 0, got ", s.values(i));
        }
      }
      for (int i = 0; i < s.boundaries_size(); ++i) {
        if (s.boundaries(i) < 0 ||
            (i > 0 && s.boundaries(i) <= s.boundaries(i - 1))) {
          return bad(absl::StrCat("boundaries[", i, "]"),
                     "must be >= 0 and above the boundary before it, got ",
                     s.boundaries(i));
        }
      }
      break;
    }
    case LearningRateSchedule::DECAY_COSINE:
      if (!(s.alpha() >= 0 && s.alpha() <= 1)) {
        return bad("alpha", "must be in [0, 1], got ", s.alpha());
      }
      break;
    case LearningRateSchedule::DECAY_POLYNOMIAL:
      if (!(s.end_learning_rate() >= 0) || !Finite(s.end_learning_rate())) {
        return bad("end_learning_rate", "must be a finite number >= 0, got ",
                   s.end_learning_rate());
      }
      if (s.has_power() && (!(s.power() > 0) || !Finite(s.power()))) {
        return bad("power", "must be a finite number > 0, got ", s.power());
      }
      break;
    default:
      break;
  }
  return absl::OkStatus();
}

// One key=value part after the decay, into *s.
absl::Status SetScheduleKey(absl::string_view part, LearningRateSchedule* s) {
  const size_t eq = part.find('=');
  const absl::string_view key = part.substr(0, eq);
  const absl::string_view value =
      eq == absl::string_view::npos ? "" : part.substr(eq + 1);
  auto bad = [&](absl::string_view what) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", part, "\": ", key, " must be ", what));
  };
  auto integer = [&](void (LearningRateSchedule::*set)(int64_t)) {
    int64_t v;
    if (!absl::SimpleAtoi(value, &v)) return bad("an integer");
    (s->*set)(v);
    return absl::OkStatus();
  };
  auto real = [&](void (LearningRateSchedule::*set)(float)) {
    float v;
    if (!absl::SimpleAtof(value, &v)) return bad("a number");
    (s->*set)(v);
    return absl::OkStatus();
  };
  auto boolean = [&](void (LearningRateSchedule::*set)(bool)) {
    bool v;
    if (value.empty() && eq == absl::string_view::npos) {
      v = true;
    } else if (!absl::SimpleAtob(value, &v)) {
      return bad("true or false");
    }
    (s->*set)(v);
    return absl::OkStatus();
  };
  absl::Status status;
  if (key == "warmup_steps") {
    status = integer(&LearningRateSchedule::set_warmup_steps);
  } else if (key == "warmup_initial_learning_rate") {
    status = real(&LearningRateSchedule::set_warmup_initial_learning_rate);
  } else if (key == "hold_steps") {
    status = integer(&LearningRateSchedule::set_hold_steps);
  } else if (key == "decay_steps") {
    status = integer(&LearningRateSchedule::set_decay_steps);
  } else if (key == "decay_rate") {
    status = real(&LearningRateSchedule::set_decay_rate);
  } else if (key == "staircase") {
    status = boolean(&LearningRateSchedule::set_staircase);
  } else if (key == "alpha") {
    status = real(&LearningRateSchedule::set_alpha);
  } else if (key == "end_learning_rate") {
    status = real(&LearningRateSchedule::set_end_learning_rate);
  } else if (key == "power") {
    status = real(&LearningRateSchedule::set_power);
  } else if (key == "cycle") {
    status = boolean(&LearningRateSchedule::set_cycle);
  } else if (key == "boundaries") {
    for (absl::string_view x : absl::StrSplit(value, ':')) {
      int64_t v;
      if (!absl::SimpleAtoi(x, &v)) {
        return bad("steps separated by ':' (boundaries=1000:5000)");
      }
      s->add_boundaries(v);
    }
  } else if (key == "values") {
    for (absl::string_view x : absl::StrSplit(value, ':')) {
      float v;
      if (!absl::SimpleAtof(x, &v)) {
        return bad("rates separated by ':' (values=0.1:0.01:0.001)");
      }
      s->add_values(v);
    }
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "\"", part,
        "\": unknown key (warmup_steps, warmup_initial_learning_rate, "
        "hold_steps, decay_steps, decay_rate, staircase, boundaries, values, "
        "alpha, end_learning_rate, power, cycle)"));
  }
  return status;
}

}  // namespace

absl::Status ValidateLearningRateSchedule(const LearningRateSchedule& s,
                                          absl::string_view prefix) {
  if (!LearningRateSchedule::Decay_IsValid(s.decay())) {
    return Bad(prefix, "decay", "is not a known decay (got ", s.decay(), ")");
  }
  for (auto check : {CheckWarmup, CheckFieldsRead, CheckDecayOptions}) {
    if (absl::Status status = check(s, prefix); !status.ok()) return status;
  }
  return absl::OkStatus();
}

LearningRate::LearningRate(float rate)
    : peak_(rate), constant_(true), id_(NextId()) {}

LearningRate::LearningRate(const LearningRateSchedule& schedule, float peak)
    : schedule_(schedule),
      peak_(peak),
      constant_(schedule.decay() == LearningRateSchedule::DECAY_CONSTANT &&
                schedule.warmup_steps() == 0),
      id_(NextId()) {}

absl::StatusOr<LearningRate> LearningRate::Create(const OptimizerConfig& config,
                                                  absl::string_view field) {
  if (absl::Status s = ValidateLearningRateSchedule(
          config.schedule(), absl::StrCat(field, ".schedule"));
      !s.ok()) {
    return s;
  }
  const LearningRateSchedule& s = config.schedule();
  const float peak = s.decay() == LearningRateSchedule::DECAY_PIECEWISE
                         ? s.values(0)
                         : config.learning_rate();
  return LearningRate(s, peak);
}

float LearningRate::Rate(int64_t t) const {
  if (constant_) return static_cast<float>(peak_);
  struct Last {
    uint64_t id = 0;
    int64_t t = 0;
    float rate = 0;
  };
  thread_local Last last;
  if (last.id == id_ && last.t == t) return last.rate;
  const float rate = static_cast<float>(Compute(t < 1 ? 0 : t - 1));
  last = {id_, t, rate};
  return rate;
}

double LearningRate::Compute(int64_t k) const {
  const LearningRateSchedule& s = schedule_;
  if (k < s.warmup_steps()) {
    const double from = s.warmup_initial_learning_rate();
    return from + (peak_ - from) * static_cast<double>(k) /
                      static_cast<double>(s.warmup_steps());
  }
  const int64_t step = k - s.warmup_steps() - s.hold_steps();
  if (step < 0) return peak_;
  const double x = static_cast<double>(step);
  const double steps = static_cast<double>(s.decay_steps());
  switch (s.decay()) {
    case LearningRateSchedule::DECAY_PIECEWISE: {
      int i = 0;
      while (i < s.boundaries_size() && step > s.boundaries(i)) ++i;
      return s.values(i);
    }
    case LearningRateSchedule::DECAY_EXPONENTIAL: {
      double p = x / steps;
      if (s.staircase()) p = std::floor(p);
      return peak_ * std::pow(static_cast<double>(s.decay_rate()), p);
    }
    case LearningRateSchedule::DECAY_COSINE: {
      const double done = std::min(x, steps) / steps;
      const double cosine = 0.5 * (1.0 + std::cos(M_PI * done));
      const double alpha = s.alpha();
      return peak_ * ((1.0 - alpha) * cosine + alpha);
    }
    case LearningRateSchedule::DECAY_POLYNOMIAL: {
      const double end = s.end_learning_rate();
      const double power = s.has_power() ? s.power() : 1.0;
      double period = steps, at = x;
      if (s.cycle()) {
        period = steps * (step == 0 ? 1.0 : std::ceil(x / steps));
      } else {
        at = std::min(x, steps);
      }
      return (peak_ - end) * std::pow(1.0 - at / period, power) + end;
    }
    default:
      return peak_;
  }
}

absl::StatusOr<LearningRateSchedule> ParseLearningRateSchedule(
    absl::string_view spec) {
  std::vector<absl::string_view> parts = absl::StrSplit(spec, ',');
  LearningRateSchedule s;
  const absl::string_view decay = parts[0];
  if (decay == "constant") {
    s.set_decay(LearningRateSchedule::DECAY_CONSTANT);
  } else if (decay == "piecewise") {
    s.set_decay(LearningRateSchedule::DECAY_PIECEWISE);
  } else if (decay == "exponential") {
    s.set_decay(LearningRateSchedule::DECAY_EXPONENTIAL);
  } else if (decay == "cosine") {
    s.set_decay(LearningRateSchedule::DECAY_COSINE);
  } else if (decay == "polynomial") {
    s.set_decay(LearningRateSchedule::DECAY_POLYNOMIAL);
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "\"", decay,
        "\" is not a decay (constant, piecewise, exponential, cosine, "
        "polynomial; then ,key=value pairs)"));
  }
  for (size_t i = 1; i < parts.size(); ++i) {
    if (absl::Status status = SetScheduleKey(parts[i], &s); !status.ok()) {
      return status;
    }
  }
  return s;
}

void ScaleLearningRate(double factor, OptimizerConfig* config) {
  config->set_learning_rate(
      static_cast<float>(config->learning_rate() * factor));
  if (!config->has_schedule()) return;
  LearningRateSchedule* s = config->mutable_schedule();
  for (int i = 0; i < s->values_size(); ++i) {
    s->set_values(i, static_cast<float>(s->values(i) * factor));
  }
  s->set_end_learning_rate(static_cast<float>(s->end_learning_rate() * factor));
}

}  // namespace tessera
