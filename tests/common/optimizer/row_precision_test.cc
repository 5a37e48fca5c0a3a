#include "common/optimizer/row_precision.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "Eigen/Core"
#include "common/counter_rng.h"
#include "common/optimizer/row_precision_f16c.h"
#include "gtest/gtest.h"

namespace tessera {
namespace {

float Half(uint16_t bits) {
  return static_cast<float>(Eigen::numext::bit_cast<Eigen::half>(bits));
}
float Bf16(uint16_t bits) {
  return static_cast<float>(Eigen::numext::bit_cast<Eigen::bfloat16>(bits));
}

TEST(RowPrecisionTest, NamesAndBytes) {
  for (RowPrecision p : {ROW_FP32, ROW_FP16, ROW_BF16}) {
    absl::StatusOr<RowPrecision> parsed =
        ParseRowPrecision(RowPrecisionName(p));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, p);
  }
  EXPECT_EQ(RowPrecisionBytes(ROW_FP32), 4);
  EXPECT_EQ(RowPrecisionBytes(ROW_FP16), 2);
  EXPECT_EQ(RowPrecisionBytes(ROW_BF16), 2);
  absl::StatusOr<RowPrecision> bad = ParseRowPrecision("fp8");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("fp8"), std::string::npos);
}

TEST(RowPrecisionTest, StochasticRoundingPicksANeighbour) {
  const float x = 1.0f + 1.0f / 3000.0f;  // between two halves near 1
  const float lo = 1.0f, hi = 1.0f + 1.0f / 1024.0f;
  EXPECT_EQ(Half(RoundHalfStochastic(x, 0.0f)), hi);
  EXPECT_EQ(Half(RoundHalfStochastic(x, 0.999f)), lo);
  EXPECT_EQ(Half(RoundHalfStochastic(-x, 0.0f)), -hi);
  // Representable values never move, whatever the draw.
  EXPECT_EQ(Half(RoundHalfStochastic(0.5f, 0.0f)), 0.5f);
  EXPECT_EQ(Half(RoundHalfStochastic(0.5f, 0.99f)), 0.5f);
  EXPECT_EQ(Bf16(RoundBfloat16Stochastic(0.5f, 0xFFFF)), 0.5f);
  // fp16 saturates instead of overflowing.
  EXPECT_EQ(Half(RoundHalfStochastic(1e6f, 0.5f)), 65504.0f);
  EXPECT_EQ(Half(RoundHalfStochastic(-1e6f, 0.5f)), -65504.0f);
  EXPECT_TRUE(std::isnan(Half(RoundHalfStochastic(NAN, 0.5f))));
  EXPECT_EQ(Bf16(RoundBfloat16Stochastic(3.4e38f, 0xFFFF)),
            Bf16(0x7F7F));  // bf16's largest finite
  // Subnormal halves: the spacing is 2^-24.
  const float tiny = 0.25f * std::ldexp(1.0f, -24);
  EXPECT_EQ(Half(RoundHalfStochastic(tiny, 0.1f)), std::ldexp(1.0f, -24));
  EXPECT_EQ(Half(RoundHalfStochastic(tiny, 0.3f)), 0.0f);
}

// The mean of many stochastic roundings of one value is the value; round to
// nearest would be off by the whole distance to the nearer neighbour.
TEST(RowPrecisionTest, StochasticRoundingIsUnbiased) {
  constexpr int kDraws = 200000;
  for (RowPrecision p : {ROW_FP16, ROW_BF16}) {
    for (float x : {1.0f + 1.0f / 3000.0f, -0.0123456f, 3.14159f, 1e-6f}) {
      std::vector<float> src(kDraws, x), back(kDraws);
      std::vector<uint16_t> stored(kDraws);
      NarrowRowStochastic(p, src.data(), stored.data(), kDraws, 42);
      WidenRow(p, stored.data(), back.data(), kDraws);
      double sum = 0;
      for (float v : back) sum += v;
      const double mean = sum / kDraws;
      uint16_t nearest;
      NarrowRowNearest(p, &x, &nearest, 1);
      float near_value;
      WidenRow(p, &nearest, &near_value, 1);
      // The spacing around x, and 6 standard errors of the mean of a
      // two-point distribution of that width.
      const double ulp =
          p == ROW_FP16 ? std::fabs(x) / 1024.0 + 6e-8 : std::fabs(x) / 128.0;
      const double tolerance = 6 * ulp / 2 / std::sqrt(kDraws);
      EXPECT_NEAR(mean, x, tolerance)
          << RowPrecisionName(p) << " x=" << x << " nearest=" << near_value;
    }
  }
}

// Many updates too small for round-to-nearest still add up. Each of the
// 20,000 updates moves one value up an ulp with probability delta / ulp,
// so its end is a binomial draw: the mean over 16 tables must be within 4
// of its standard errors of the sum (bf16's one table alone is off by a
// standard error, 0.04, as often as not).
TEST(RowPrecisionTest, SmallUpdatesAccumulate) {
  constexpr int kSteps = 20000;
  constexpr int kTables = 16;
  const float delta = 1e-5f;  // far below half an ulp of 1 in both
  for (RowPrecision p : {ROW_FP16, ROW_BF16}) {
    const double ulp = p == ROW_FP16 ? 0x1p-10 : 0x1p-7;
    double sum = 0;
    for (int table = 0; table < kTables; ++table) {
      uint16_t stochastic, nearest;
      const float one = 1.0f;
      NarrowRowNearest(p, &one, &stochastic, 1);
      nearest = stochastic;
      for (int step = 0; step < kSteps; ++step) {
        float v;
        WidenRow(p, &stochastic, &v, 1);
        v += delta;
        NarrowRowStochastic(p, &v, &stochastic, 1,
                            RowRoundingSeed(7 + table, step, 0));
        WidenRow(p, &nearest, &v, 1);
        v += delta;
        NarrowRowNearest(p, &v, &nearest, 1);
      }
      float s, n;
      WidenRow(p, &stochastic, &s, 1);
      WidenRow(p, &nearest, &n, 1);
      EXPECT_EQ(n, 1.0f) << RowPrecisionName(p);
      sum += s;
    }
    const double up = delta / ulp;
    const double sd = ulp * std::sqrt(kSteps * up * (1 - up));
    EXPECT_NEAR(sum / kTables, 1.0 + kSteps * delta,
                4 * sd / std::sqrt(kTables))
        << RowPrecisionName(p);
  }
}

TEST(RowPrecisionTest, RoundingIsAPureFunctionOfSeedAndElement) {
  std::vector<float> src(1000);
  for (size_t i = 0; i < src.size(); ++i) src[i] = 0.001f * i + 1e-4f;
  for (RowPrecision p : {ROW_FP16, ROW_BF16}) {
    std::vector<uint16_t> a(src.size()), b(src.size()), c(src.size());
    NarrowRowStochastic(p, src.data(), a.data(), src.size(),
                        RowRoundingSeed(11, 5, 3));
    NarrowRowStochastic(p, src.data(), b.data(), src.size(),
                        RowRoundingSeed(11, 5, 3));
    NarrowRowStochastic(p, src.data(), c.data(), src.size(),
                        RowRoundingSeed(11, 6, 3));
    EXPECT_EQ(a, b);
    EXPECT_NE(a, c);  // another step draws other bits
  }
  EXPECT_NE(RowTableSeed("emb_a", 1), RowTableSeed("emb_b", 1));
  EXPECT_EQ(RowTableSeed("emb_a", 1), RowTableSeed("emb_a", 1));
}

TEST(RowPrecisionTest, WideningAndNearestRoundTripExactly) {
  for (RowPrecision p : {ROW_FP16, ROW_BF16}) {
    std::vector<uint16_t> all(1 << 16), back(1 << 16);
    for (int i = 0; i < (1 << 16); ++i) all[i] = static_cast<uint16_t>(i);
    std::vector<float> wide(1 << 16);
    WidenRow(p, all.data(), wide.data(), all.size());
    NarrowRowNearest(p, wide.data(), back.data(), all.size());
    for (int i = 0; i < (1 << 16); ++i) {
      if (std::isnan(wide[i])) continue;
      ASSERT_EQ(back[i], all[i]) << RowPrecisionName(p) << " bits " << i;
    }
  }
}

// The vectorised conversions (F16C for fp16 where the CPU has it, bit
// arithmetic for bf16) give Eigen's bits for every finite value and
// infinity, ties included, fp16 saturating at 65504 rather than
// overflowing; widening agrees for every 2-byte value.
TEST(RowPrecisionTest, ConversionsMatchEigenBitForBit) {
  std::vector<float> x;
  for (uint32_t bits = 0; bits < 0xFF800000u; bits += 0x00012345u) {
    float f;
    std::memcpy(&f, &bits, sizeof(f));
    x.push_back(f);
  }
  // Ties between neighbours (round to even), saturation, the extremes.
  for (float f : {1.0f + 1.0f / 2048, 1.0f + 3.0f / 2048, 65504.0f, 65519.0f,
                  65520.0f, 1e30f, 3.4028235e38f, 1.0f + 1.0f / 256,
                  1.0f + 3.0f / 256, 5.9604645e-8f, 2.9802322e-8f, 0.0f}) {
    x.push_back(f);
    x.push_back(-f);
  }
  x.push_back(INFINITY);
  x.push_back(-INFINITY);
  std::vector<uint16_t> half(x.size()), bf16(x.size());
  NarrowRowNearest(ROW_FP16, x.data(), half.data(), x.size());
  NarrowRowNearest(ROW_BF16, x.data(), bf16.data(), x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    if (std::isnan(x[i])) {  // NaN stays NaN; its payload may differ
      ASSERT_TRUE(std::isnan(Half(half[i])) && std::isnan(Bf16(bf16[i])));
      continue;
    }
    const float a = std::fabs(x[i]);
    const float saturated =
        std::isfinite(a) && a > 65504.0f ? std::copysign(65504.0f, x[i]) : x[i];
    ASSERT_EQ(half[i],
              Eigen::numext::bit_cast<uint16_t>(Eigen::half(saturated)))
        << "fp16 of " << x[i];
    ASSERT_EQ(bf16[i], Eigen::numext::bit_cast<uint16_t>(Eigen::bfloat16(x[i])))
        << "bf16 of " << x[i];
  }
  std::vector<uint16_t> all(1 << 16);
  for (int i = 0; i < (1 << 16); ++i) all[i] = static_cast<uint16_t>(i);
  std::vector<float> wide(all.size());
  for (RowPrecision p : {ROW_FP16, ROW_BF16}) {
    WidenRow(p, all.data(), wide.data(), all.size());
    for (int i = 0; i < (1 << 16); ++i) {
      const float want = p == ROW_FP16 ? Half(all[i]) : Bf16(all[i]);
      if (std::isnan(want)) {
        ASSERT_TRUE(std::isnan(wide[i])) << RowPrecisionName(p) << " " << i;
        continue;
      }
      ASSERT_EQ(std::memcmp(&wide[i], &want, sizeof(float)), 0)
          << RowPrecisionName(p) << " bits " << i;
    }
  }
}

// Values for the stochastic rows below: subnormals, exact values,
// negative zero, and blocks holding a value that saturates, infinities or
// NaN.
std::vector<float> StochasticInputs(uint32_t top) {
  std::vector<float> x;
  for (uint32_t bits = 0; bits < top; bits += 0x000F1234u) {
    float f;
    std::memcpy(&f, &bits, sizeof(f));
    x.push_back(f);
    x.push_back(-f);
  }
  for (float f : {0.0f, -0.0f, 1.0f, 65504.0f, 65500.0f, 70000.0f, 1e-7f,
                  6.0e-8f, INFINITY, NAN, 3.4028235e38f, -3.4028235e38f}) {
    x.push_back(f);
  }
  return x;
}

// Plain seeds, and one whose 64-bit counter base (seed * K + C of
// CounterHash) is 2^64 - 5, a wrap the key's hash must survive.
std::vector<uint64_t> StochasticSeeds() {
  return {1, 0xDEADBEEF12345ull, 0xE821ECC0C8EBD8A2ull, 0};
}

// The rows the vector paths round (F16C and AVX2 draws where the CPU has
// them; bit arithmetic for bf16) are the scalar rule of each element with
// its own draw, bit for bit: fp16 RoundHalfStochastic with
// RowRoundingUniform of the draw, bf16 RoundBfloat16Stochastic with the
// draw's top 16 bits.
void ExpectRowsMatchTheRule(
    const std::function<void(RowPrecision, const std::vector<float>&,
                             std::vector<uint16_t>*, uint64_t)>& narrow,
    const std::string& path) {
  for (RowPrecision p : {ROW_FP16, ROW_BF16}) {
    const std::vector<float> x =
        StochasticInputs(p == ROW_FP16 ? 0x477FE000u : 0x7F800000u);
    for (uint64_t seed : StochasticSeeds()) {
      std::vector<uint16_t> row(x.size());
      narrow(p, x, &row, seed);
      for (size_t i = 0; i < x.size(); ++i) {
        const uint32_t draw = RowRoundingBits(RowRoundingKey(seed), i);
        const uint16_t want =
            p == ROW_FP16 ? RoundHalfStochastic(x[i], RowRoundingUniform(draw))
                          : RoundBfloat16Stochastic(x[i], draw >> 16);
        if (std::isnan(x[i])) {
          ASSERT_TRUE(std::isnan(p == ROW_FP16 ? Half(row[i]) : Bf16(row[i])));
          continue;
        }
        ASSERT_EQ(row[i], want) << path << " " << RowPrecisionName(p) << " "
                                << x[i] << " at " << i << " seed " << seed;
      }
    }
  }
}

TEST(RowPrecisionTest, StochasticRowsMatchTheRulePerElement) {
  ExpectRowsMatchTheRule(
      [](RowPrecision p, const std::vector<float>& x,
         std::vector<uint16_t>* row, uint64_t seed) {
        NarrowRowStochastic(p, x.data(), row->data(), x.size(), seed);
      },
      "best");
}

// The vector paths called directly, as the fused optimizer step's tests
// do: what an AVX2 CPU runs, whatever NarrowRowStochastic picks.
TEST(RowPrecisionTest, TheVectorPathMatchesTheRule) {
  if (!row_precision_internal::UseF16c()) {
    GTEST_SKIP() << "no AVX2 and F16C here: the scalar rule is all there is";
  }
  ExpectRowsMatchTheRule(
      [](RowPrecision p, const std::vector<float>& x,
         std::vector<uint16_t>* row, uint64_t seed) {
        if (p == ROW_FP16) {
          row_precision_internal::NarrowHalfStochasticF16c(
              x.data(), row->data(), x.size(), seed);
        } else {
          row_precision_internal::NarrowBfloat16StochasticAvx2(
              x.data(), row->data(), x.size(), seed);
        }
      },
      "avx2");
}

// The draws' 32-bit hash: one key's counters never collide (a bijection),
// and each of its bits is set about half the time, so the rounding's
// probability is the rule's.
TEST(RowPrecisionTest, DrawsAreDistinctAndBalancedPerRow) {
  constexpr int kCounters = 1 << 16;
  for (uint64_t seed : StochasticSeeds()) {
    const uint32_t key = RowRoundingKey(seed);
    std::vector<uint32_t> draws;
    std::array<int, 32> ones{};
    for (int i = 0; i < kCounters; ++i) {
      const uint32_t d = RowRoundingBits(key, i);
      draws.push_back(d);
      for (int b = 0; b < 32; ++b) ones[b] += (d >> b) & 1;
    }
    std::sort(draws.begin(), draws.end());
    EXPECT_EQ(std::adjacent_find(draws.begin(), draws.end()), draws.end())
        << "seed " << seed;
    for (int b = 0; b < 32; ++b) {
      // 6 standard deviations of a fair coin over kCounters draws.
      EXPECT_NEAR(ones[b], kCounters / 2, 6 * 128) << "bit " << b;
    }
  }
  // Neighbouring rows' keys differ.
  EXPECT_NE(RowRoundingKey(RowRoundingSeed(1, 2, 3)),
            RowRoundingKey(RowRoundingSeed(1, 2, 4)));
}

}  // namespace
}  // namespace tessera
