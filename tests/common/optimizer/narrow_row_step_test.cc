#include "common/optimizer/narrow_row_step.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "common/optimizer/optimizer.h"
#include "common/optimizer/row_precision.h"
#include "common/optimizer/row_precision_f16c.h"
#include "gtest/gtest.h"
#include "proto/job.pb.h"

namespace tessera {
namespace narrow_row_step_test {

struct Case {
  std::string name;
  OptimizerConfig config;
  bool fused;  // whether the fused pass runs it (on a CPU with F16C)
};

std::vector<Case> Cases() {
  std::vector<Case> cases;
  OptimizerConfig c;
  c.set_learning_rate(0.05f);
  c.mutable_sgd();
  cases.push_back({"sgd", c, true});
  c = OptimizerConfig();
  c.set_learning_rate(0.1f);
  c.mutable_adagrad()->set_initial_accumulator_value(0.1f);
  c.mutable_adagrad()->set_epsilon(1e-7f);
  // A decaying rate: each update its own lr.
  c.mutable_schedule()->set_decay(LearningRateSchedule::DECAY_COSINE);
  c.mutable_schedule()->set_decay_steps(50);
  c.mutable_schedule()->set_alpha(0.1f);
  cases.push_back({"adagrad", c, true});
  c = OptimizerConfig();
  c.set_learning_rate(0.2f);
  c.mutable_rowwise_adagrad();
  cases.push_back({"rowwise_adagrad", c, true});
  // The plain way: another optimizer, and weight decay.
  c = OptimizerConfig();
  c.set_learning_rate(0.01f);
  c.mutable_adam()->set_beta1(0.9f);
  c.mutable_adam()->set_beta2(0.999f);
  c.mutable_adam()->set_epsilon(1e-7f);
  cases.push_back({"adam", c, false});
  c = OptimizerConfig();
  c.set_learning_rate(0.1f);
  c.mutable_adagrad();
  c.set_weight_decay(0.01f);
  cases.push_back({"adagrad+weight_decay", c, false});
  return cases;
}

// A value of every kind a row meets: ordinary, tiny (subnormal in fp16),
// near and beyond fp16's largest finite value, exactly representable.
float RandomValue(std::mt19937_64& rng) {
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  switch (rng() % 16) {
    case 0:
      return unit(rng) * 1e-6f;
    case 1:
      return unit(rng) * 66000.0f;
    case 2:
      return 65504.0f;
    case 3:
      return 0.0f;
    default:
      return unit(rng) * 4.0f;
  }
}

// One table of `rows` rows of `dim` values in `precision`, stepped either
// by NarrowRowStep (fused allowed) or by the old way spelled out.
struct Table {
  Table(const Optimizer& optimizer, RowPrecision precision, int rows, int dim,
        std::mt19937_64& rng)
      : dim(dim), stored(static_cast<size_t>(rows) * dim) {
    std::vector<float> init(stored.size());
    for (float& v : init) v = RandomValue(rng);
    NarrowRowNearest(precision, init.data(), stored.data(), init.size());
    for (int k = 0; k < optimizer.num_slots(); ++k) {
      slots.emplace_back(rows * optimizer.slot_row_elements(k, dim),
                         optimizer.slot_initial_value(k));
    }
  }
  std::vector<float*> RowSlots(const Optimizer& optimizer, int row) {
    std::vector<float*> out;
    for (size_t k = 0; k < slots.size(); ++k) {
      out.push_back(slots[k].data() + row * optimizer.slot_row_elements(
                                                static_cast<int>(k), dim));
    }
    return out;
  }
  int dim;
  std::vector<uint16_t> stored;
  std::vector<std::vector<float>> slots;
};

constexpr uint64_t kTableSeed = 0x7E55E4A;

// 30 updates of a table of 24 rows of `dim` values: NarrowRowStep against the
// old widen/Apply/narrow way spelled out, every stored bit and slot after each
// update.
void ExpectFusedMatchesPlain(const Case& c, const Optimizer& optimizer,
                             RowPrecision precision, int dim) {
  constexpr int kRows = 24;
  constexpr int kSteps = 30;
  const bool f16c = row_precision_internal::UseF16c();
  std::mt19937_64 rng(dim * 131 + precision);
  Table fused(optimizer, precision, kRows, dim, rng);
  Table plain = fused;
  std::vector<float> grad(dim), wide(dim);
  for (int64_t t = 1; t <= kSteps; ++t) {
    // An asynchronous push: its schedule step is not its count.
    const UpdateStep update(t, 3 * t + 1);
    NarrowRowStep step(optimizer, precision, update, kTableSeed, t);
    EXPECT_EQ(step.rule() != NarrowRowStep::Rule::kPlain, c.fused && f16c);
    for (int row = 0; row < kRows; ++row) {
      if (rng() % 3 == 0) continue;  // rows this push leaves alone
      const float scale = rng() % 8 == 0 ? 100.0f : 1.0f;
      for (float& g : grad) {
        g = scale * std::uniform_real_distribution<float>(-1, 1)(rng);
      }
      if (rng() % 50 == 0) grad[rng() % dim] = 0.0f;
      const int64_t id = 1000 + 7 * row;  // the row's id in the table
      std::vector<float*> s = fused.RowSlots(optimizer, row);
      step.Apply(fused.stored.data() + row * dim, grad.data(), s.data(), dim,
                 id);
      // The old way: widen, Apply, round back.
      uint16_t* old = plain.stored.data() + row * dim;
      s = plain.RowSlots(optimizer, row);
      WidenRow(precision, old, wide.data(), dim);
      optimizer.Apply(wide.data(), grad.data(), s.data(), dim, update);
      NarrowRowStochastic(precision, wide.data(), old, dim,
                          RowRoundingSeed(kTableSeed, t, id));
    }
    ASSERT_EQ(0, std::memcmp(fused.stored.data(), plain.stored.data(),
                             fused.stored.size() * sizeof(uint16_t)))
        << "stored bits differ after update " << t;
    for (size_t k = 0; k < fused.slots.size(); ++k) {
      ASSERT_EQ(0, std::memcmp(fused.slots[k].data(), plain.slots[k].data(),
                               fused.slots[k].size() * sizeof(float)))
          << "slot " << k << " differs after update " << t;
    }
  }
  // The rows moved (the comparison compared something).
  std::mt19937_64 rng2(dim * 131 + precision);
  Table start(optimizer, precision, kRows, dim, rng2);
  EXPECT_NE(0, std::memcmp(start.stored.data(), fused.stored.data(),
                           fused.stored.size() * sizeof(uint16_t)));
}

TEST(NarrowRowStepTest, FusedStepKeepsEveryBitOfWidenApplyNarrow) {
  if (!row_precision_internal::UseF16c()) {
    GTEST_LOG_(INFO) << "no F16C here: only the plain way runs";
  }
  for (const Case& c : Cases()) {
    absl::StatusOr<std::unique_ptr<Optimizer>> made = CreateOptimizer(c.config);
    ASSERT_TRUE(made.ok()) << made.status();
    for (RowPrecision precision : {ROW_FP16, ROW_BF16}) {
      for (int dim : {1, 5, 8, 13, 64, 100}) {
        SCOPED_TRACE(c.name + " " + RowPrecisionName(precision) + " dim " +
                     std::to_string(dim));
        ExpectFusedMatchesPlain(c, **made, precision, dim);
        if (HasFatalFailure()) return;
      }
    }
  }
}

}  // namespace narrow_row_step_test
}  // namespace tessera
