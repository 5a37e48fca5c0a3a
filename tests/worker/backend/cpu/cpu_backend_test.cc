#include "worker/backend/cpu/cpu_backend.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <utility>
#include <vector>

#include "common/counter_rng.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessera {
namespace {

using ::testing::ElementsAre;
using ::testing::FloatEq;
using ::testing::FloatNear;
using ::testing::Pointwise;

std::vector<float> RandomVector(int64_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(gen);
  return v;
}

// C = alpha * op(A) * op(B) + beta * C with plain loops, in double.
std::vector<float> NaiveGemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                             float alpha, const std::vector<float>& a,
                             const std::vector<float>& b, float beta,
                             std::vector<float> c) {
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double sum = 0;
      for (int64_t p = 0; p < k; ++p) {
        const float av = ta ? a[p * m + i] : a[i * k + p];
        const float bv = tb ? b[j * k + p] : b[p * n + j];
        sum += static_cast<double>(av) * bv;
      }
      c[i * n + j] = static_cast<float>(alpha * sum + beta * c[i * n + j]);
    }
  }
  return c;
}

struct GemmCase {
  bool transpose_a;
  bool transpose_b;
  float alpha;
  float beta;
};

class GemmTest : public ::testing::TestWithParam<GemmCase> {};

TEST_P(GemmTest, MatchesNaiveTripleLoop) {
  const GemmCase& p = GetParam();
  const int64_t m = 5, n = 7, k = 3;
  const std::vector<float> a = RandomVector(m * k, 1);
  const std::vector<float> b = RandomVector(k * n, 2);
  std::vector<float> c = RandomVector(m * n, 3);
  const std::vector<float> want = NaiveGemm(p.transpose_a, p.transpose_b, m, n,
                                            k, p.alpha, a, b, p.beta, c);
  CpuBackend backend;
  backend.Gemm(p.transpose_a, p.transpose_b, m, n, k, p.alpha, a.data(),
               b.data(), p.beta, c.data());
  EXPECT_THAT(c, Pointwise(FloatNear(1e-5f), want));
}

INSTANTIATE_TEST_SUITE_P(AllTransposes, GemmTest,
                         ::testing::Values(GemmCase{false, false, 1.0f, 0.0f},
                                           GemmCase{true, false, 1.0f, 0.0f},
                                           GemmCase{false, true, 1.0f, 0.0f},
                                           GemmCase{true, true, 1.0f, 0.0f},
                                           GemmCase{false, false, 0.5f, 2.0f},
                                           GemmCase{true, false, -1.5f, 1.0f},
                                           GemmCase{false, true, 2.0f, -0.5f},
                                           GemmCase{true, true, 0.25f, 1.0f}));

// The CPU twin of pinned memory: plain aligned host memory, zeroed by
// HostArray, that copies to and from "the device" (also the host) as any
// other; the CPU has no stream to order other work after.
TEST(CpuBackendTest, HostMemoryRoundTripsAndThereIsNoStream) {
  CpuBackend cpu;
  EXPECT_EQ(cpu.native_stream(), nullptr);
  EXPECT_TRUE(cpu.status().ok());
  HostArray<float> in(&cpu, 1001), out(&cpu, 1001);
  ASSERT_EQ(in.size(), 1001);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(in.data()) % 64, 0u);
  EXPECT_EQ(out[1000], 0.0f);
  for (int64_t i = 0; i < in.size(); ++i) in[i] = 0.5f * i;
  DeviceArray<float> d(&cpu, 1001);
  cpu.CopyToDevice(in.data(), d.data(), 1001 * sizeof(float));
  cpu.CopyToHost(d.data(), out.data(), 1001 * sizeof(float));
  EXPECT_TRUE(std::equal(in.begin(), in.end(), out.begin()));
  HostArray<float> plain(nullptr, 3);  // no allocator: plain memory
  EXPECT_EQ(plain.size(), 3);
  HostArray<float> moved = std::move(in);
  EXPECT_EQ(moved.size(), 1001);
  EXPECT_EQ(moved[2], 1.0f);
}

TEST(CpuBackendTest, GemmWithBetaZeroIgnoresGarbageInC) {
  CpuBackend backend;
  const std::vector<float> a = {1, 2, 3, 4};  // [2,2]
  const std::vector<float> b = {1, 0, 0, 1};  // identity
  std::vector<float> c = {NAN, INFINITY, -1e30f, 1e30f};
  backend.Gemm(false, false, 2, 2, 2, 1.0f, a.data(), b.data(), 0.0f, c.data());
  EXPECT_THAT(c, ElementsAre(1, 2, 3, 4));
}

TEST(CpuBackendTest, AddBiasAddsToEveryRow) {
  CpuBackend backend;
  std::vector<float> x = {1, 2, 3, 4, 5, 6};  // [2,3]
  const std::vector<float> bias = {10, 20, 30};
  backend.AddBias(bias.data(), 2, 3, x.data());
  EXPECT_THAT(x, ElementsAre(11, 22, 33, 14, 25, 36));
}

TEST(CpuBackendTest, BiasGradSumsOverRows) {
  CpuBackend backend;
  const std::vector<float> dy = {1, 2, 3, 4, 5, 6, 7, 8, 9};  // [3,3]
  std::vector<float> dbias = {-1, -1, -1};  // overwritten, not accumulated
  backend.BiasGrad(dy.data(), 3, 3, dbias.data());
  EXPECT_THAT(dbias, ElementsAre(12, 15, 18));
}

TEST(CpuBackendTest, ReluClampsNegatives) {
  CpuBackend backend;
  std::vector<float> x = {-2, -0.5f, 0, 0.5f, 3};
  backend.Relu(x.size(), x.data());
  EXPECT_THAT(x, ElementsAre(0, 0, 0, 0.5f, 3));
}

TEST(CpuBackendTest, ReluGradZeroesWhereOutputWasZero) {
  CpuBackend backend;
  const std::vector<float> y = {0, 1.5f, 0, 2};
  std::vector<float> dy = {7, 8, 9, -10};
  backend.ReluGrad(y.data(), y.size(), dy.data());
  EXPECT_THAT(dy, ElementsAre(0, 8, 0, -10));
}

TEST(CpuBackendTest, DropoutSameSeedSameMask) {
  CpuBackend backend;
  const int64_t n = 1000;
  std::vector<float> a(n, 1.0f), b(n, 1.0f), c(n, 1.0f);
  backend.Dropout(7, 0.5f, n, a.data());
  backend.Dropout(7, 0.5f, n, b.data());
  backend.Dropout(8, 0.5f, n, c.data());
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
}

// The backend's mask (four elements per instruction where the CPU has
// AVX2) gives the bits of the per-element formula for every length, tail
// included, every rate and seed, and for NaN and -0 inputs: the CUDA
// kernel and a checkpoint's replay depend on it.
TEST(CpuBackendTest, DropoutGivesTheFormulasBits) {
  CpuBackend backend;
  std::vector<float> special = {std::nanf(""), -0.0f, 0.0f, -1e30f, 1e-40f};
  for (int64_t n : {1, 3, 4, 5, 7, 64, 1001}) {
    for (float rate : {0.1f, 0.5f, 0.9f}) {
      for (uint64_t seed : {uint64_t{0}, uint64_t{7}, ~uint64_t{0}}) {
        std::vector<float> x = RandomVector(n, static_cast<uint32_t>(n));
        for (size_t i = 0; i < special.size() && i < x.size(); ++i) {
          x[i * 3 % x.size()] = special[i];
        }
        const std::vector<float> x0 = x;
        backend.Dropout(seed, rate, n, x.data());
        const float scale = 1.0f / (1.0f - rate);
        for (int64_t i = 0; i < n; ++i) {
          const float want =
              CounterUniform(seed, i) >= rate ? x0[i] * scale : 0.0f;
          uint32_t got_bits, want_bits;
          std::memcpy(&got_bits, &x[i], 4);
          std::memcpy(&want_bits, &want, 4);
          ASSERT_EQ(got_bits, want_bits)
              << "n " << n << " rate " << rate << " seed " << seed
              << " element " << i;
        }
      }
    }
  }
}

TEST(CpuBackendTest, DropoutOnGradientUsesForwardMask) {
  CpuBackend backend;
  const int64_t n = 2000;
  const float rate = 0.3f;
  const std::vector<float> x0 = RandomVector(n, 4);
  const std::vector<float> dy0 = RandomVector(n, 5);
  std::vector<float> x = x0, dy = dy0;
  backend.Dropout(99, rate, n, x.data());
  backend.Dropout(99, rate, n, dy.data());
  const float scale = 1.0f / (1.0f - rate);
  int64_t dropped = 0;
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(x[i] == 0.0f, dy[i] == 0.0f) << "element " << i;
    if (x[i] == 0.0f) {
      ++dropped;
    } else {
      EXPECT_FLOAT_EQ(x[i], x0[i] * scale) << "element " << i;
      EXPECT_FLOAT_EQ(dy[i], dy0[i] * scale) << "element " << i;
    }
  }
  EXPECT_GT(dropped, 0);
  EXPECT_LT(dropped, n);
}

TEST(CpuBackendTest, DropoutKeepsAboutOneMinusRate) {
  CpuBackend backend;
  const int64_t n = 100000;
  for (float rate : {0.2f, 0.5f, 0.8f}) {
    std::vector<float> x(n, 1.0f);
    backend.Dropout(1234, rate, n, x.data());
    int64_t kept = 0;
    for (float v : x) {
      if (v != 0.0f) {
        ++kept;
        EXPECT_FLOAT_EQ(v, 1.0f / (1.0f - rate));
      }
    }
    EXPECT_NEAR(static_cast<double>(kept) / n, 1.0 - rate, 0.01)
        << "rate " << rate;
  }
}

TEST(CpuBackendTest, DropoutRateZeroIsIdentity) {
  CpuBackend backend;
  const std::vector<float> x0 = RandomVector(500, 6);
  std::vector<float> x = x0;
  backend.Dropout(5, 0.0f, x.size(), x.data());
  EXPECT_EQ(x, x0);
}

struct NaiveXent {
  double loss = 0;
  int64_t correct = 0;
  std::vector<double> grad;
};

NaiveXent NaiveSoftmaxCrossEntropy(const std::vector<float>& logits,
                                   const std::vector<int32_t>& labels,
                                   int64_t rows, int64_t classes) {
  NaiveXent out;
  out.grad.resize(rows * classes);
  for (int64_t r = 0; r < rows; ++r) {
    double sum = 0;
    int64_t best = 0;
    for (int64_t c = 0; c < classes; ++c) {
      sum += std::exp(static_cast<double>(logits[r * classes + c]));
      if (logits[r * classes + c] > logits[r * classes + best]) best = c;
    }
    const int32_t label = labels[r];
    out.loss += -std::log(std::exp(logits[r * classes + label]) / sum);
    if (best == label) ++out.correct;
    for (int64_t c = 0; c < classes; ++c) {
      const double p = std::exp(logits[r * classes + c]) / sum;
      out.grad[r * classes + c] = (p - (c == label ? 1.0 : 0.0)) / rows;
    }
  }
  return out;
}

TEST(CpuBackendTest, SoftmaxCrossEntropyMatchesNaive) {
  CpuBackend backend;
  const int64_t rows = 6, classes = 4;
  std::vector<float> logits = RandomVector(rows * classes, 7);
  for (float& v : logits) v *= 3.0f;
  const std::vector<int32_t> labels = {0, 1, 2, 3, 1, 2};
  const NaiveXent want =
      NaiveSoftmaxCrossEntropy(logits, labels, rows, classes);
  ASSERT_GT(want.correct, 0);
  ASSERT_LT(want.correct, rows);

  std::vector<float> grad(rows * classes, -123.0f);
  int64_t correct = -1;
  const double loss = backend.SoftmaxCrossEntropy(
      logits.data(), labels.data(), rows, classes, grad.data(), &correct);
  EXPECT_NEAR(loss, want.loss, 1e-4 * want.loss);
  EXPECT_EQ(correct, want.correct);
  for (int64_t i = 0; i < rows * classes; ++i) {
    EXPECT_NEAR(grad[i], want.grad[i], 1e-6) << "element " << i;
  }
}

TEST(CpuBackendTest, SoftmaxCrossEntropyNullOutputsAreOptional) {
  CpuBackend backend;
  const std::vector<float> logits = {1, 2, 3, 3, 2, 1};
  const std::vector<int32_t> labels = {2, 1};
  const double loss = backend.SoftmaxCrossEntropy(logits.data(), labels.data(),
                                                  2, 3, nullptr, nullptr);
  const NaiveXent want = NaiveSoftmaxCrossEntropy(logits, labels, 2, 3);
  EXPECT_NEAR(loss, want.loss, 1e-5);
}

TEST(CpuBackendTest, SoftmaxCrossEntropyIsStableForLargeLogits) {
  CpuBackend backend;
  // Row 0: label has the large logit -> loss ~ 0. Row 1: label is 1000
  // below the max -> loss ~ 1000. Naive exp(1000) would overflow.
  const std::vector<float> logits = {1000, 0, -1000, 1000, 0, 1000};
  const std::vector<int32_t> labels = {0, 1};
  std::vector<float> grad(6);
  int64_t correct = -1;
  const double loss = backend.SoftmaxCrossEntropy(logits.data(), labels.data(),
                                                  2, 3, grad.data(), &correct);
  ASSERT_TRUE(std::isfinite(loss));
  // Row 1: log(2 e^1000) - 0 = 1000 + log 2.
  EXPECT_NEAR(loss, 1000.0 + std::log(2.0), 1e-3);
  EXPECT_EQ(correct, 1);
  for (float g : grad) EXPECT_TRUE(std::isfinite(g));
  EXPECT_THAT(grad, ElementsAre(FloatNear(0, 1e-6), FloatNear(0, 1e-6),
                                FloatNear(0, 1e-6), FloatEq(0.25f),
                                FloatEq(-0.5f), FloatEq(0.25f)));
}

}  // namespace
}  // namespace tessera
