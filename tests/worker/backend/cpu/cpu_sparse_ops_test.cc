// The CPU twins of the ops the CUDA backend adds: sigmoid cross-entropy,
// embedding bags and the sparse-gradient reduction. The CPU backend is the
// reference the CUDA backend is tested against, so these check it against
// hand-computed values, plain formulas in double, and finite differences.

#include <cmath>
#include <cstdint>
#include <map>
#include <random>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/worker/backend/embedding_test_data.h"
#include "worker/backend/cpu/cpu_backend.h"

namespace tessera {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::FloatNear;
using ::testing::Pointwise;

TEST(CpuSigmoidCrossEntropyTest, MatchesFormulaInDouble) {
  const std::vector<float> z = {-3.0f, -0.5f, 0.0f, 0.25f, 2.0f, 7.5f};
  const std::vector<float> t = {0.0f, 1.0f, 1.0f, 0.0f, 1.0f, 0.5f};
  const int64_t rows = 2, cols = 3;
  double want = 0;
  std::vector<float> want_grad(6);
  for (int i = 0; i < 6; ++i) {
    const double p = 1.0 / (1.0 + std::exp(-static_cast<double>(z[i])));
    want += -(t[i] * std::log(p) + (1 - t[i]) * std::log(1 - p));
    want_grad[i] = static_cast<float>((p - t[i]) / rows);
  }
  CpuBackend backend;
  std::vector<float> grad(6);
  EXPECT_NEAR(
      backend.SigmoidCrossEntropy(z.data(), t.data(), rows, cols, grad.data()),
      want, 1e-5);
  EXPECT_THAT(grad, Pointwise(FloatNear(1e-6f), want_grad));
  // The gradient is optional.
  EXPECT_NEAR(
      backend.SigmoidCrossEntropy(z.data(), t.data(), rows, cols, nullptr),
      want, 1e-5);
}

TEST(CpuSigmoidCrossEntropyTest, IsFiniteForLargeLogits) {
  const std::vector<float> z = {-1000.0f, 1000.0f, -1000.0f, 1000.0f};
  const std::vector<float> t = {0.0f, 1.0f, 1.0f, 0.0f};
  CpuBackend backend;
  std::vector<float> grad(4);
  // Right answers: 0 and 0 for the confident right ones, 1000 each for the
  // confident wrong ones.
  EXPECT_NEAR(
      backend.SigmoidCrossEntropy(z.data(), t.data(), 1, 4, grad.data()),
      2000.0, 1e-3);
  EXPECT_THAT(grad, ElementsAre(0.0f, 0.0f, -1.0f, 1.0f));
}

TEST(CpuEmbeddingBagTest, ForwardSumsAndAveragesRowsInIdOrder) {
  // Table rows: id i is {i, 10 * i}.
  const std::vector<float> table = {0, 0, 1, 10, 2, 20, 3, 30};
  // Bags: {1, 3}, {}, {2, 2, 0}.
  const std::vector<int64_t> offsets = {0, 2, 2, 5};
  const std::vector<int64_t> ids = {1, 3, 2, 2, 0};
  CpuBackend backend;
  std::vector<float> out(6, -7.0f);
  backend.EmbeddingBagForward(table.data(), 2, offsets.data(), ids.data(), 3,
                              Backend::Combiner::kSum, out.data(), 2);
  EXPECT_THAT(out, ElementsAre(4, 40, 0, 0, 4, 40));
  std::fill(out.begin(), out.end(), -7.0f);
  backend.EmbeddingBagForward(table.data(), 2, offsets.data(), ids.data(), 3,
                              Backend::Combiner::kMean, out.data(), 2);
  EXPECT_THAT(out,
              Pointwise(FloatNear(1e-6f),
                        std::vector<float>{2, 20, 0, 0, 4.0f / 3, 40.0f / 3}));
}

TEST(CpuEmbeddingBagTest, BackwardGivesOneRowPerOccurrence) {
  const std::vector<int64_t> offsets = {0, 2, 2, 5};
  const std::vector<float> dout = {1, 2, 3, 4, 6, 9};  // [3 bags, dim 2]
  CpuBackend backend;
  std::vector<float> drows(10);
  backend.EmbeddingBagBackward(dout.data(), 2, offsets.data(), 3,
                               Backend::Combiner::kSum, drows.data(), 2);
  EXPECT_THAT(drows, ElementsAre(1, 2, 1, 2, 6, 9, 6, 9, 6, 9));
  backend.EmbeddingBagBackward(dout.data(), 2, offsets.data(), 3,
                               Backend::Combiner::kMean, drows.data(), 2);
  EXPECT_THAT(drows, ElementsAre(0.5f, 1, 0.5f, 1, 2, 3, 2, 3, 2, 3));
}

// A stride above dim reads and writes one field's column of [bags, 2, dim]
// and leaves the other field's alone.
TEST(CpuEmbeddingBagTest, StrideAddressesOneFieldOfSeveral) {
  const std::vector<float> table = {0, 0, 1, 10, 2, 20, 3, 30};
  const std::vector<int64_t> offsets = {0, 2, 2, 5};
  const std::vector<int64_t> ids = {1, 3, 2, 2, 0};
  CpuBackend backend;
  std::vector<float> out(12, -7.0f);
  backend.EmbeddingBagForward(table.data(), 2, offsets.data(), ids.data(), 3,
                              Backend::Combiner::kSum, out.data() + 2, 4);
  EXPECT_THAT(out, ElementsAre(-7, -7, 4, 40, -7, -7, 0, 0, -7, -7, 4, 40));
  const std::vector<float> dout = {0, 0, 1, 2, 0, 0, 3, 4, 0, 0, 6, 9};
  std::vector<float> drows(10);
  backend.EmbeddingBagBackward(dout.data() + 2, 2, offsets.data(), 3,
                               Backend::Combiner::kSum, drows.data(), 4);
  EXPECT_THAT(drows, ElementsAre(1, 2, 1, 2, 6, 9, 6, 9, 6, 9));
}

TEST(CpuReduceSparseGradTest, SumsRowsOfEqualIdsAndSortsIds) {
  const std::vector<int64_t> ids = {7, 3, 7, 1, 3, 7};
  const std::vector<float> rows = {1, 2, 10, 20, 100,  200,
                                   5, 6, 30, 40, 1000, 2000};
  CpuBackend backend;
  std::vector<int64_t> unique(6, -1);
  std::vector<float> summed(12, -1.0f);
  const int64_t n = backend.ReduceSparseGrad(ids.data(), rows.data(), 6, 2,
                                             unique.data(), summed.data());
  ASSERT_EQ(n, 3);
  EXPECT_THAT(std::vector<int64_t>(unique.begin(), unique.begin() + 3),
              ElementsAre(1, 3, 7));
  EXPECT_THAT(std::vector<float>(summed.begin(), summed.begin() + 6),
              ElementsAre(5, 6, 40, 60, 1101, 2202));
}

TEST(CpuReduceSparseGradTest, EmptyAndLargeIds) {
  CpuBackend backend;
  EXPECT_EQ(backend.ReduceSparseGrad(nullptr, nullptr, 0, 4, nullptr, nullptr),
            0);
  const std::vector<int64_t> ids = {int64_t{1} << 40, 5, int64_t{1} << 40};
  const std::vector<float> rows = {1, 2, 4};
  std::vector<int64_t> unique(3);
  std::vector<float> summed(3);
  ASSERT_EQ(backend.ReduceSparseGrad(ids.data(), rows.data(), 3, 1,
                                     unique.data(), summed.data()),
            2);
  EXPECT_EQ(unique[0], 5);
  EXPECT_EQ(unique[1], int64_t{1} << 40);
  EXPECT_EQ(summed[0], 2.0f);
  EXPECT_EQ(summed[1], 5.0f);
}

TEST(CpuReduceSparseGradTest, MatchesMapOnRandomIds) {
  std::mt19937 gen(5);
  std::uniform_int_distribution<int64_t> id(0, 50);
  std::uniform_real_distribution<float> value(-1, 1);
  const int64_t n = 1000, dim = 3;
  std::vector<int64_t> ids(n);
  std::vector<float> rows(n * dim);
  std::map<int64_t, std::vector<float>> want;
  for (int64_t i = 0; i < n; ++i) {
    ids[i] = id(gen);
    std::vector<float>& sum = want[ids[i]];
    sum.resize(dim, 0.0f);
    for (int64_t d = 0; d < dim; ++d) {
      rows[i * dim + d] = value(gen);
      sum[d] += rows[i * dim + d];  // same order: bit-identical
    }
  }
  CpuBackend backend;
  std::vector<int64_t> unique(n);
  std::vector<float> summed(n * dim);
  ASSERT_EQ(backend.ReduceSparseGrad(ids.data(), rows.data(), n, dim,
                                     unique.data(), summed.data()),
            static_cast<int64_t>(want.size()));
  int64_t u = 0;
  for (const auto& [key, sum] : want) {
    EXPECT_EQ(unique[u], key);
    EXPECT_THAT(std::vector<float>(summed.begin() + u * dim,
                                   summed.begin() + (u + 1) * dim),
                ElementsAreArray(sum));
    ++u;
  }
}

}  // namespace
}  // namespace tessera
