// The CUDA backend against the CPU backend (the reference), op by op and
// for whole training steps, on the same inputs and seeds. Every test is
// skipped (never passed) when no GPU answers or the build has no CUDA.
//
// Tolerances, CUDA vs CPU:
// - bit-identical: AddBias, Relu, ReluGrad, Dropout (same counter-based
//   mask), EmbeddingBagForward/Backward (same summation order),
//   ReduceSparseGrad (stable sort: same ids, rows summed in the same
//   order), the arg-max count of SoftmaxCrossEntropy;
// - single ops that reduce (Gemm, BiasGrad, the two losses and their
//   gradients): max |cuda - cpu| <= 1e-5 * max |cpu| per tensor,
//   and losses within 1e-5 relative: FP32 (no TF32) in another order;
// - a whole training step (MLP with dropout, inputs on a binary grid so
//   no ReLU flips; embedding-bag model): loss
//   within 1e-5 relative, each gradient tensor within 1e-4 * max |cpu|,
//   arg-max count within 1.
//
// The layer library's ops (the Nn tests, on awkward sizes such as 37 x
// 129):
// - bit-identical: Fill, GatherColumns, Im2Col, Copy2D with beta 0,
//   MaxPoolForward's outputs and argmax (the same comparisons in the same
//   window order);
// - elementwise ops and scatter-adds (Axpby, Mul, the activations and
//   their gradients, Copy2D and ScaleRows with a beta, ScatterColumns,
//   Col2Im, MaxPoolBackward): max |cuda - cpu| <= 1e-6 * max |cpu|, for
//   expf / tanhf ulps, FMA contraction and the atomics' order;
// - ops that reduce (softmax, MeanSquaredError, BatchedGemm, RowDot, the
//   moments, batch and layer normalization, FmOrder2): 1e-5 as above.

#include "worker/backend/cuda/cuda_backend.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/types/span.h"
#include "common/model_spec.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/gpu_test_util.h"
#include "tests/worker/backend/embedding_test_data.h"
#include "worker/backend/cpu/cpu_backend.h"

namespace tessera {
namespace {

std::vector<float> RandomVector(int64_t n, uint32_t seed, float scale = 1) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-scale, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(gen);
  return v;
}

// max |got - want| <= tol * max |want|: relative to the tensor's largest
// value, so entries near zero are not held to a relative bound.
::testing::AssertionResult NormwiseClose(const std::vector<float>& got,
                                         const std::vector<float>& want,
                                         double tol) {
  if (got.size() != want.size()) {
    return ::testing::AssertionFailure()
           << "sizes differ: " << got.size() << " vs " << want.size();
  }
  double scale = 1e-20, worst = 0;
  size_t at = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    scale = std::max(scale, std::fabs(static_cast<double>(want[i])));
    const double d = std::fabs(static_cast<double>(got[i]) - want[i]);
    if (!(d <= worst)) {
      worst = d;
      at = i;
    }
  }
  if (worst <= tol * scale) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "max |cuda - cpu| = " << worst << " at " << at << " (cuda "
         << got[at] << ", cpu " << want[at] << ") > " << tol << " * " << scale;
}

class CudaVsCpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<Backend>> gpu = NewCudaBackend(0);
    if (!gpu.ok()) {
      TESSERA_NO_GPU() << "no GPU to test the CUDA backend on: "
                       << gpu.status().message();
    }
    gpu_ = *std::move(gpu);
  }

  void TearDown() override {
    if (gpu_ != nullptr) EXPECT_TRUE(gpu_->Synchronize().ok());
  }

  // Runs `op` on a copy of `x` on each backend; returns {cuda, cpu}.
  template <typename Op>
  std::pair<std::vector<float>, std::vector<float>> InPlace(
      const std::vector<float>& x, Op op) {
    DeviceArray<float> d = ToDevice(gpu_.get(), x);
    op(gpu_.get(), d.data());
    std::vector<float> host = x;
    op(&cpu_, host.data());
    return {ToHost(gpu_.get(), d, x.size()), host};
  }

  template <typename T>
  DeviceArray<T> Up(const std::vector<T>& host) {
    return ToDevice(gpu_.get(), host);
  }
  template <typename T>
  std::vector<T> Down(const DeviceArray<T>& a, int64_t n) {
    return ToHost(gpu_.get(), a, n);
  }

  CpuBackend cpu_;
  std::unique_ptr<Backend> gpu_;
};

struct GemmShape {
  bool ta, tb;
  int64_t m, n, k;
  float alpha, beta;
};

TEST_F(CudaVsCpuTest, GemmAllTransposesAndShapes) {
  for (const GemmShape& s : {GemmShape{false, false, 37, 53, 29, 1, 0},
                             GemmShape{true, false, 37, 53, 29, 1, 0},
                             GemmShape{false, true, 37, 53, 29, 0.5f, 2},
                             GemmShape{true, true, 37, 53, 29, -1.5f, 1},
                             GemmShape{false, false, 256, 512, 784, 1, 0},
                             GemmShape{true, false, 784, 512, 256, 1, 0},
                             GemmShape{false, true, 256, 784, 512, 1, 0},
                             GemmShape{false, false, 1, 1, 1, 1, 0}}) {
    const std::vector<float> a = RandomVector(s.m * s.k, 1);
    const std::vector<float> b = RandomVector(s.k * s.n, 2);
    const std::vector<float> c = RandomVector(s.m * s.n, 3);
    DeviceArray<float> da = ToDevice(gpu_.get(), a),
                       db = ToDevice(gpu_.get(), b),
                       dc = ToDevice(gpu_.get(), c);
    gpu_->Gemm(s.ta, s.tb, s.m, s.n, s.k, s.alpha, da.data(), db.data(), s.beta,
               dc.data());
    std::vector<float> want = c;
    cpu_.Gemm(s.ta, s.tb, s.m, s.n, s.k, s.alpha, a.data(), b.data(), s.beta,
              want.data());
    EXPECT_TRUE(NormwiseClose(ToHost(gpu_.get(), dc, c.size()), want, 1e-5))
        << s.ta << s.tb << " " << s.m << "x" << s.n << "x" << s.k;
  }
}

TEST_F(CudaVsCpuTest, AddBiasIsIdentical) {
  const std::vector<float> bias = RandomVector(33, 4);
  DeviceArray<float> db = ToDevice(gpu_.get(), bias);
  const auto x = InPlace(RandomVector(1000 * 33, 5), [&](Backend* b, float* v) {
    b->AddBias(b == &cpu_ ? bias.data() : db.data(), 1000, 33, v);
  });
  EXPECT_EQ(x.first, x.second);
}

TEST_F(CudaVsCpuTest, BiasGrad) {
  const int64_t rows = 4097, cols = 10;
  const std::vector<float> dy = RandomVector(rows * cols, 6);
  DeviceArray<float> d = ToDevice(gpu_.get(), dy), out(gpu_.get(), cols);
  gpu_->BiasGrad(d.data(), rows, cols, out.data());
  std::vector<float> want(cols);
  cpu_.BiasGrad(dy.data(), rows, cols, want.data());
  EXPECT_TRUE(NormwiseClose(ToHost(gpu_.get(), out, cols), want, 1e-5));
}

TEST_F(CudaVsCpuTest, ReluAndReluGradAreIdentical) {
  const std::vector<float> x = RandomVector(100003, 7);
  const auto y = InPlace(x, [](Backend* b, float* v) { b->Relu(100003, v); });
  EXPECT_EQ(y.first, y.second);
  const std::vector<float>& y_cpu = y.second;
  DeviceArray<float> y_gpu = ToDevice(gpu_.get(), y_cpu);
  const auto g = InPlace(RandomVector(100003, 8), [&](Backend* b, float* dy) {
    b->ReluGrad(b == &cpu_ ? y_cpu.data() : y_gpu.data(), 100003, dy);
  });
  EXPECT_EQ(g.first, g.second);
}

TEST_F(CudaVsCpuTest, DropoutMaskIsBitIdentical) {
  for (float rate : {0.1f, 0.5f, 0.9f}) {
    for (uint64_t seed : {uint64_t{0}, uint64_t{42}, ~uint64_t{0}}) {
      const auto x = InPlace(
          RandomVector(1 << 20, 9),
          [&](Backend* b, float* v) { b->Dropout(seed, rate, 1 << 20, v); });
      EXPECT_EQ(x.first, x.second) << "rate " << rate << " seed " << seed;
    }
  }
}

TEST_F(CudaVsCpuTest, SoftmaxCrossEntropy) {
  for (int64_t classes : {3, 10, 100, 1000}) {
    const int64_t rows = 513;
    const std::vector<float> z = RandomVector(rows * classes, 10, 8.0f);
    std::vector<int32_t> labels(rows);
    for (int64_t r = 0; r < rows; ++r) labels[r] = (r * 7) % classes;
    DeviceArray<float> dz = ToDevice(gpu_.get(), z),
                       dgrad(gpu_.get(), rows * classes);
    DeviceArray<int32_t> dl = ToDevice(gpu_.get(), labels);
    int64_t got_correct = -1, want_correct = -2;
    const double got = gpu_->SoftmaxCrossEntropy(
        dz.data(), dl.data(), rows, classes, dgrad.data(), &got_correct);
    std::vector<float> want_grad(rows * classes);
    const double want =
        cpu_.SoftmaxCrossEntropy(z.data(), labels.data(), rows, classes,
                                 want_grad.data(), &want_correct);
    EXPECT_NEAR(got, want, 1e-5 * std::fabs(want)) << classes;
    EXPECT_EQ(got_correct, want_correct) << classes;
    EXPECT_TRUE(NormwiseClose(ToHost(gpu_.get(), dgrad, rows * classes),
                              want_grad, 1e-5))
        << classes;
  }
}

TEST_F(CudaVsCpuTest, SigmoidCrossEntropy) {
  const int64_t rows = 777, cols = 13;
  const std::vector<float> z = RandomVector(rows * cols, 11, 20.0f);
  std::vector<float> t = RandomVector(rows * cols, 12);
  for (float& v : t) v = v > 0 ? 1.0f : 0.0f;
  DeviceArray<float> dz = ToDevice(gpu_.get(), z), dt = ToDevice(gpu_.get(), t),
                     dgrad(gpu_.get(), rows * cols);
  const double got =
      gpu_->SigmoidCrossEntropy(dz.data(), dt.data(), rows, cols, dgrad.data());
  std::vector<float> want_grad(rows * cols);
  const double want = cpu_.SigmoidCrossEntropy(z.data(), t.data(), rows, cols,
                                               want_grad.data());
  EXPECT_NEAR(got, want, 1e-5 * std::fabs(want));
  EXPECT_TRUE(
      NormwiseClose(ToHost(gpu_.get(), dgrad, rows * cols), want_grad, 1e-5));
}

class CudaEmbeddingTest
    : public CudaVsCpuTest,
      public ::testing::WithParamInterface<Backend::Combiner> {
 protected:
  void ExpectEmbeddingOpsIdentical(int64_t embedding_dim);
};

// Every dimension the row kernels lay out differently: one lane, a
// sub-warp of several bags per warp (8, 16), a warp, more than a warp, and
// more than the 128 lanes a row gets; bags of 0 to 40 ids, repeats
// included.
TEST_P(CudaEmbeddingTest, ForwardBackwardAndReduceAreIdentical) {
  for (int64_t d : {1, 8, 16, 32, 48, 200}) {
    SCOPED_TRACE(d);
    ExpectEmbeddingOpsIdentical(d);
  }
}

void CudaEmbeddingTest::ExpectEmbeddingOpsIdentical(int64_t embedding_dim) {
  const EmbeddingBagNet net = RandomEmbeddingBagNet(5000, embedding_dim, 1, 13);
  const EmbeddingBagBatch batch = RandomEmbeddingBagBatch(net, 1000, 40, 14);
  const int64_t bags = batch.bags(), dim = net.dim;
  const int64_t nnz = batch.ids.size();
  DeviceArray<float> table = ToDevice(gpu_.get(), net.table),
                     out(gpu_.get(), bags * dim), drows(gpu_.get(), nnz * dim),
                     sums(gpu_.get(), nnz * dim);
  DeviceArray<int64_t> offsets = ToDevice(gpu_.get(), batch.offsets),
                       ids = ToDevice(gpu_.get(), batch.ids),
                       unique(gpu_.get(), nnz);
  gpu_->EmbeddingBagForward(table.data(), dim, offsets.data(), ids.data(), bags,
                            GetParam(), out.data(), dim);
  std::vector<float> want_out(bags * dim);
  cpu_.EmbeddingBagForward(net.table.data(), dim, batch.offsets.data(),
                           batch.ids.data(), bags, GetParam(), want_out.data(),
                           dim);
  EXPECT_EQ(ToHost(gpu_.get(), out, bags * dim), want_out);
  // As the middle field of three: the other fields' columns stay as they
  // were.
  const std::vector<float> fields_before(bags * 3 * dim, -7.0f);
  DeviceArray<float> fields = ToDevice(gpu_.get(), fields_before);
  gpu_->EmbeddingBagForward(table.data(), dim, offsets.data(), ids.data(), bags,
                            GetParam(), fields.data() + dim, 3 * dim);
  std::vector<float> want_fields = fields_before;
  cpu_.EmbeddingBagForward(net.table.data(), dim, batch.offsets.data(),
                           batch.ids.data(), bags, GetParam(),
                           want_fields.data() + dim, 3 * dim);
  EXPECT_EQ(ToHost(gpu_.get(), fields, bags * 3 * dim), want_fields);

  const std::vector<float> dout = RandomVector(bags * dim, 15);
  DeviceArray<float> ddout = ToDevice(gpu_.get(), dout);
  gpu_->EmbeddingBagBackward(ddout.data(), dim, offsets.data(), bags,
                             GetParam(), drows.data(), dim);
  std::vector<float> want_rows(nnz * dim);
  cpu_.EmbeddingBagBackward(dout.data(), dim, batch.offsets.data(), bags,
                            GetParam(), want_rows.data(), dim);
  EXPECT_EQ(ToHost(gpu_.get(), drows, nnz * dim), want_rows);

  const int64_t n = gpu_->ReduceSparseGrad(ids.data(), drows.data(), nnz, dim,
                                           unique.data(), sums.data());
  std::vector<int64_t> want_unique(nnz);
  std::vector<float> want_sums(nnz * dim);
  const int64_t want_n =
      cpu_.ReduceSparseGrad(batch.ids.data(), want_rows.data(), nnz, dim,
                            want_unique.data(), want_sums.data());
  ASSERT_EQ(n, want_n);
  want_unique.resize(n);
  want_sums.resize(n * dim);
  EXPECT_EQ(ToHost(gpu_.get(), unique, n), want_unique);
  EXPECT_EQ(ToHost(gpu_.get(), sums, n * dim), want_sums);
}

INSTANTIATE_TEST_SUITE_P(SumAndMean, CudaEmbeddingTest,
                         ::testing::Values(Backend::Combiner::kSum,
                                           Backend::Combiner::kMean),
                         CombinerName);

// ---- The layer library's ops.

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr int64_t kRows = 37, kCols = 129;

TEST_F(CudaVsCpuTest, NnFillIsIdentical) {
  const auto x = InPlace(RandomVector(100003, 40), [](Backend* b, float* v) {
    b->Fill(100001, -3.25f, v);  // leaves the last two alone
  });
  EXPECT_EQ(x.first, x.second);
}

TEST_F(CudaVsCpuTest, NnAxpbyAndMul) {
  const int64_t n = kRows * kCols;
  const std::vector<float> a = RandomVector(n, 41), b = RandomVector(n, 42);
  DeviceArray<float> da = Up(a), db = Up(b);
  for (float beta : {0.0f, 0.75f}) {
    // beta 0 must not read the output: NaN there stays out of the result.
    const std::vector<float> y0 =
        beta == 0 ? std::vector<float>(n, kNaN) : RandomVector(n, 43);
    const auto axpby = InPlace(y0, [&](Backend* be, float* y) {
      be->Axpby(n, -1.5f, be == &cpu_ ? a.data() : da.data(), beta, y);
    });
    EXPECT_TRUE(NormwiseClose(axpby.first, axpby.second, 1e-6)) << beta;
    const auto mul = InPlace(y0, [&](Backend* be, float* out) {
      be->Mul(n, be == &cpu_ ? a.data() : da.data(),
              be == &cpu_ ? b.data() : db.data(), beta, out);
    });
    EXPECT_TRUE(NormwiseClose(mul.first, mul.second, 1e-6)) << beta;
  }
  // With beta 0 the output may alias an input.
  const auto aliased = InPlace(a, [&](Backend* be, float* v) {
    be->Mul(n, v, be == &cpu_ ? b.data() : db.data(), 0.0f, v);
  });
  EXPECT_TRUE(NormwiseClose(aliased.first, aliased.second, 1e-6));
}

TEST_F(CudaVsCpuTest, NnUnaryForwardAndBackward) {
  const int64_t n = kRows * kCols;
  for (Backend::Unary kind : {Backend::Unary::kRelu, Backend::Unary::kSigmoid,
                              Backend::Unary::kTanh}) {
    const int k = static_cast<int>(kind);
    const std::vector<float> x = RandomVector(n, 44, 6.0f);
    // In place on both: y aliases x.
    const auto y = InPlace(
        x, [&](Backend* be, float* v) { be->UnaryForward(kind, n, v, v); });
    EXPECT_TRUE(NormwiseClose(y.first, y.second, 1e-6)) << k;
    // The backward from the same y on both, dx aliasing dy.
    const std::vector<float>& y_cpu = y.second;
    DeviceArray<float> y_gpu = Up(y_cpu);
    const auto dx = InPlace(RandomVector(n, 45), [&](Backend* be, float* g) {
      be->UnaryBackward(kind, n, be == &cpu_ ? y_cpu.data() : y_gpu.data(), g,
                        g);
    });
    EXPECT_TRUE(NormwiseClose(dx.first, dx.second, 1e-6)) << k;
  }
}

TEST_F(CudaVsCpuTest, NnSoftmaxForwardAndBackward) {
  for (int64_t cols : {1, 31, 129, 1000}) {
    const int64_t n = kRows * cols;
    // In place: y aliases x.
    const auto y = InPlace(
        RandomVector(n, 46, 8.0f),
        [&](Backend* be, float* v) { be->SoftmaxForward(kRows, cols, v, v); });
    EXPECT_TRUE(NormwiseClose(y.first, y.second, 1e-5)) << cols;
    const std::vector<float>& y_cpu = y.second;
    DeviceArray<float> y_gpu = Up(y_cpu);
    // dx aliases dy.
    const auto dx = InPlace(RandomVector(n, 47), [&](Backend* be, float* g) {
      be->SoftmaxBackward(kRows, cols,
                          be == &cpu_ ? y_cpu.data() : y_gpu.data(), g, g);
    });
    EXPECT_TRUE(NormwiseClose(dx.first, dx.second, 1e-5)) << cols;
  }
}

TEST_F(CudaVsCpuTest, NnMeanSquaredError) {
  const int64_t n = kRows * kCols;
  const std::vector<float> pred = RandomVector(n, 48, 3.0f);
  const std::vector<float> target = RandomVector(n, 49, 3.0f);
  DeviceArray<float> dp = Up(pred), dt = Up(target), dgrad(gpu_.get(), n);
  const double got =
      gpu_->MeanSquaredError(dp.data(), dt.data(), kRows, kCols, dgrad.data());
  std::vector<float> want_grad(n);
  const double want = cpu_.MeanSquaredError(pred.data(), target.data(), kRows,
                                            kCols, want_grad.data());
  EXPECT_NEAR(got, want, 1e-5 * std::fabs(want));
  EXPECT_TRUE(NormwiseClose(Down(dgrad, n), want_grad, 1e-6));
  EXPECT_NEAR(
      gpu_->MeanSquaredError(dp.data(), dt.data(), kRows, kCols, nullptr), want,
      1e-5 * std::fabs(want));
}

TEST_F(CudaVsCpuTest, NnCopy2D) {
  // src [37, 129] into columns 64..192 of a [37, 300] dst, then columns
  // 10..138 of that back into a [37, 131] with a beta.
  const int64_t wide = 300, narrow = 131;
  const std::vector<float> src = RandomVector(kRows * kCols, 50);
  DeviceArray<float> dsrc = Up(src);
  const auto dst =
      InPlace(RandomVector(kRows * wide, 51), [&](Backend* be, float* d) {
        be->Copy2D(kRows, kCols, be == &cpu_ ? src.data() : dsrc.data(), kCols,
                   d + 64, wide, 0.0f);
      });
  EXPECT_EQ(dst.first, dst.second);
  const std::vector<float>& dst_cpu = dst.second;
  DeviceArray<float> ddst = Up(dst_cpu);
  const auto back = InPlace(RandomVector(kRows * narrow, 52), [&](Backend* be,
                                                                  float* d) {
    be->Copy2D(kRows, kCols, (be == &cpu_ ? dst_cpu.data() : ddst.data()) + 10,
               wide, d + 1, narrow, -0.5f);
  });
  EXPECT_TRUE(NormwiseClose(back.first, back.second, 1e-6));
}

TEST_F(CudaVsCpuTest, NnBatchedGemm) {
  const int64_t m = 37, n = 53, k = 129, batch = 5;
  // Gaps between the matrices, which must stay as they were.
  const int64_t sa = m * k + 3, sb = k * n + 7, sc = m * n + 5;
  const std::vector<float> a = RandomVector(sa * batch, 53);
  const std::vector<float> b = RandomVector(sb * batch, 54);
  DeviceArray<float> da = Up(a), db = Up(b);
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      for (float beta : {0.0f, 0.5f}) {
        const auto c =
            InPlace(RandomVector(sc * batch, 55), [&](Backend* be, float* v) {
              be->BatchedGemm(
                  ta, tb, m, n, k, 1.5f, be == &cpu_ ? a.data() : da.data(), sa,
                  be == &cpu_ ? b.data() : db.data(), sb, beta, v, sc, batch);
            });
        EXPECT_TRUE(NormwiseClose(c.first, c.second, 1e-5))
            << ta << tb << " beta " << beta;
      }
    }
  }
}

TEST_F(CudaVsCpuTest, NnGatherAndScatterColumns) {
  const int64_t n = 200;  // more than kCols: indices repeat
  std::mt19937 gen(56);
  std::uniform_int_distribution<int32_t> pick(0, kCols - 1);
  std::vector<int32_t> index(n);
  for (int32_t& i : index) i = pick(gen);
  const std::vector<float> x = RandomVector(kRows * kCols, 57);
  DeviceArray<int32_t> dindex = Up(index);
  DeviceArray<float> dx = Up(x), dy(gpu_.get(), kRows * n);
  gpu_->GatherColumns(kRows, kCols, dx.data(), n, dindex.data(), dy.data());
  std::vector<float> want_y(kRows * n);
  cpu_.GatherColumns(kRows, kCols, x.data(), n, index.data(), want_y.data());
  EXPECT_EQ(Down(dy, kRows * n), want_y);

  const std::vector<float> g = RandomVector(kRows * n, 58);
  DeviceArray<float> dg = Up(g);
  // Garbage in dx first: the scatter zeroes it.
  const auto scattered = InPlace(
      std::vector<float>(kRows * kCols, kNaN), [&](Backend* be, float* out) {
        be->ScatterColumns(kRows, n, be == &cpu_ ? g.data() : dg.data(),
                           be == &cpu_ ? index.data() : dindex.data(), kCols,
                           out);
      });
  EXPECT_TRUE(NormwiseClose(scattered.first, scattered.second, 1e-6));
}

TEST_F(CudaVsCpuTest, NnScaleRowsAndRowDot) {
  const std::vector<float> x = RandomVector(kRows * kCols, 59);
  const std::vector<float> s = RandomVector(kRows, 60, 3.0f);
  DeviceArray<float> dx = Up(x), ds = Up(s);
  for (float beta : {0.0f, 1.25f}) {
    const auto y =
        InPlace(RandomVector(kRows * kCols, 61), [&](Backend* be, float* v) {
          be->ScaleRows(kRows, kCols, be == &cpu_ ? x.data() : dx.data(),
                        be == &cpu_ ? s.data() : ds.data(), beta, v);
        });
    EXPECT_TRUE(NormwiseClose(y.first, y.second, 1e-6)) << beta;
  }
  for (int64_t cols : {1, 129, 1000}) {
    const std::vector<float> a = RandomVector(kRows * cols, 62);
    const std::vector<float> b = RandomVector(kRows * cols, 63);
    DeviceArray<float> da = Up(a), db = Up(b), dout(gpu_.get(), kRows);
    gpu_->RowDot(kRows, cols, da.data(), db.data(), dout.data());
    std::vector<float> want(kRows);
    cpu_.RowDot(kRows, cols, a.data(), b.data(), want.data());
    EXPECT_TRUE(NormwiseClose(Down(dout, kRows), want, 1e-5)) << cols;
  }
}

Backend::Window2D Window(int64_t batch, int64_t height, int64_t width,
                         int64_t channels, int64_t kernel_h, int64_t kernel_w,
                         int64_t stride_h, int64_t stride_w, int64_t pad_top,
                         int64_t pad_left, int64_t out_h, int64_t out_w) {
  Backend::Window2D g;
  g.batch = batch;
  g.height = height;
  g.width = width;
  g.channels = channels;
  g.kernel_h = kernel_h;
  g.kernel_w = kernel_w;
  g.stride_h = stride_h;
  g.stride_w = stride_w;
  g.pad_top = pad_top;
  g.pad_left = pad_left;
  g.out_h = out_h;
  g.out_w = out_w;
  return g;
}

// Padded at every side, strides 1 and 2, overlapping and disjoint windows.
std::vector<Backend::Window2D> NnGeometries() {
  return {
      Window(3, 13, 11, 5, 3, 3, 2, 2, 1, 1, 7, 6),   // "same", stride 2
      Window(2, 9, 17, 3, 5, 3, 1, 2, 2, 1, 9, 9),    // "same", mixed
      Window(4, 8, 8, 7, 2, 2, 2, 2, 0, 0, 4, 4),     // pooling 2x2
      Window(2, 10, 10, 2, 3, 3, 2, 2, 0, 0, 4, 4),   // overlapping pool
      Window(1, 28, 28, 1, 5, 5, 1, 1, 0, 0, 24, 24)  // "valid" 5x5
  };
}

TEST_F(CudaVsCpuTest, NnIm2ColAndCol2Im) {
  uint32_t seed = 64;
  for (const Backend::Window2D& g : NnGeometries()) {
    const int64_t in = g.batch * g.height * g.width * g.channels;
    const int64_t cols =
        g.batch * g.out_h * g.out_w * g.kernel_h * g.kernel_w * g.channels;
    const std::vector<float> x = RandomVector(in, seed++);
    DeviceArray<float> dx = Up(x), dcols(gpu_.get(), cols);
    gpu_->Im2Col(g, dx.data(), dcols.data());
    std::vector<float> want_cols(cols);
    cpu_.Im2Col(g, x.data(), want_cols.data());
    EXPECT_EQ(Down(dcols, cols), want_cols) << g.height << "x" << g.width;

    const std::vector<float> c = RandomVector(cols, seed++);
    DeviceArray<float> dc = Up(c), dback(gpu_.get(), in);
    gpu_->Col2Im(g, dc.data(), dback.data());
    std::vector<float> want_back(in);
    cpu_.Col2Im(g, c.data(), want_back.data());
    EXPECT_TRUE(NormwiseClose(Down(dback, in), want_back, 1e-6))
        << g.height << "x" << g.width;
  }
}

TEST_F(CudaVsCpuTest, NnMaxPoolForwardAndBackward) {
  uint32_t seed = 74;
  for (const Backend::Window2D& g : NnGeometries()) {
    const int64_t in = g.batch * g.height * g.width * g.channels;
    const int64_t out = g.batch * g.out_h * g.out_w * g.channels;
    const std::vector<float> x = RandomVector(in, seed++);
    DeviceArray<float> dx = Up(x), dy(gpu_.get(), out);
    DeviceArray<int64_t> dargmax(gpu_.get(), out);
    gpu_->MaxPoolForward(g, dx.data(), dy.data(), dargmax.data());
    std::vector<float> want_y(out);
    std::vector<int64_t> want_argmax(out);
    cpu_.MaxPoolForward(g, x.data(), want_y.data(), want_argmax.data());
    EXPECT_EQ(Down(dy, out), want_y) << g.height << "x" << g.width;
    EXPECT_EQ(Down(dargmax, out), want_argmax) << g.height << "x" << g.width;

    // The backward from the CPU's argmax on both.
    const std::vector<float> grad = RandomVector(out, seed++);
    DeviceArray<float> dgrad = Up(grad), dback(gpu_.get(), in);
    DeviceArray<int64_t> cpu_argmax = Up(want_argmax);
    gpu_->MaxPoolBackward(g, dgrad.data(), cpu_argmax.data(), dback.data());
    std::vector<float> want_back(in);
    cpu_.MaxPoolBackward(g, grad.data(), want_argmax.data(), want_back.data());
    EXPECT_TRUE(NormwiseClose(Down(dback, in), want_back, 1e-6))
        << g.height << "x" << g.width;
  }
}

// Values with an offset, so a variance computed as E[x^2] - E[x]^2 in
// float would lose digits.
std::vector<float> OffsetVector(int64_t n, uint32_t seed, float offset) {
  std::vector<float> v = RandomVector(n, seed, 2.0f);
  for (float& x : v) x += offset;
  return v;
}

TEST_F(CudaVsCpuTest, NnColumnMomentsAndBatchNorm) {
  const float eps = 1e-3f;
  const std::vector<float> x = OffsetVector(kRows * kCols, 84, 5.0f);
  const std::vector<float> gamma = RandomVector(kCols, 85, 2.0f);
  const std::vector<float> beta = RandomVector(kCols, 86);
  const std::vector<float> dy = RandomVector(kRows * kCols, 87);
  DeviceArray<float> dx = Up(x), dgamma_in = Up(gamma), dbeta_in = Up(beta),
                     ddy = Up(dy), mean(gpu_.get(), kCols),
                     var(gpu_.get(), kCols);
  gpu_->ColumnMoments(kRows, kCols, dx.data(), mean.data(), var.data());
  std::vector<float> want_mean(kCols), want_var(kCols);
  cpu_.ColumnMoments(kRows, kCols, x.data(), want_mean.data(), want_var.data());
  EXPECT_TRUE(NormwiseClose(Down(mean, kCols), want_mean, 1e-5));
  EXPECT_TRUE(NormwiseClose(Down(var, kCols), want_var, 1e-5));

  // Forward and backward from the CPU's moments on both.
  DeviceArray<float> cmean = Up(want_mean), cvar = Up(want_var),
                     y(gpu_.get(), kRows * kCols);
  gpu_->BatchNormForward(kRows, kCols, dx.data(), cmean.data(), cvar.data(),
                         dgamma_in.data(), dbeta_in.data(), eps, y.data());
  std::vector<float> want_y(kRows * kCols);
  cpu_.BatchNormForward(kRows, kCols, x.data(), want_mean.data(),
                        want_var.data(), gamma.data(), beta.data(), eps,
                        want_y.data());
  EXPECT_TRUE(NormwiseClose(Down(y, kRows * kCols), want_y, 1e-5));

  DeviceArray<float> ddx(gpu_.get(), kRows * kCols), dgamma(gpu_.get(), kCols),
      dbeta(gpu_.get(), kCols);
  gpu_->BatchNormBackward(kRows, kCols, dx.data(), cmean.data(), cvar.data(),
                          dgamma_in.data(), eps, ddy.data(), ddx.data(),
                          dgamma.data(), dbeta.data());
  std::vector<float> want_dx(kRows * kCols), want_dgamma(kCols),
      want_dbeta(kCols);
  cpu_.BatchNormBackward(kRows, kCols, x.data(), want_mean.data(),
                         want_var.data(), gamma.data(), eps, dy.data(),
                         want_dx.data(), want_dgamma.data(), want_dbeta.data());
  EXPECT_TRUE(NormwiseClose(Down(ddx, kRows * kCols), want_dx, 1e-5));
  EXPECT_TRUE(NormwiseClose(Down(dgamma, kCols), want_dgamma, 1e-5));
  EXPECT_TRUE(NormwiseClose(Down(dbeta, kCols), want_dbeta, 1e-5));
}

TEST_F(CudaVsCpuTest, NnLayerNorm) {
  const float eps = 1e-5f;
  for (int64_t cols : {kCols, int64_t{1000}}) {
    const int64_t n = kRows * cols;
    const std::vector<float> x = OffsetVector(n, 88, 3.0f);
    const std::vector<float> gamma = RandomVector(cols, 89, 2.0f);
    const std::vector<float> beta = RandomVector(cols, 90);
    const std::vector<float> dy = RandomVector(n, 91);
    DeviceArray<float> dx = Up(x), dgamma_in = Up(gamma), dbeta_in = Up(beta),
                       ddy = Up(dy), y(gpu_.get(), n), mean(gpu_.get(), kRows),
                       rstd(gpu_.get(), kRows);
    gpu_->LayerNormForward(kRows, cols, dx.data(), dgamma_in.data(),
                           dbeta_in.data(), eps, y.data(), mean.data(),
                           rstd.data());
    std::vector<float> want_y(n), want_mean(kRows), want_rstd(kRows);
    cpu_.LayerNormForward(kRows, cols, x.data(), gamma.data(), beta.data(), eps,
                          want_y.data(), want_mean.data(), want_rstd.data());
    EXPECT_TRUE(NormwiseClose(Down(y, n), want_y, 1e-5)) << cols;
    EXPECT_TRUE(NormwiseClose(Down(mean, kRows), want_mean, 1e-5)) << cols;
    EXPECT_TRUE(NormwiseClose(Down(rstd, kRows), want_rstd, 1e-5)) << cols;

    // The backward from the CPU's mean and rstd on both.
    DeviceArray<float> cmean = Up(want_mean), crstd = Up(want_rstd),
                       ddx(gpu_.get(), n), dgamma(gpu_.get(), cols),
                       dbeta(gpu_.get(), cols);
    gpu_->LayerNormBackward(kRows, cols, dx.data(), cmean.data(), crstd.data(),
                            dgamma_in.data(), ddy.data(), ddx.data(),
                            dgamma.data(), dbeta.data());
    std::vector<float> want_dx(n), want_dgamma(cols), want_dbeta(cols);
    cpu_.LayerNormBackward(
        kRows, cols, x.data(), want_mean.data(), want_rstd.data(), gamma.data(),
        dy.data(), want_dx.data(), want_dgamma.data(), want_dbeta.data());
    EXPECT_TRUE(NormwiseClose(Down(ddx, n), want_dx, 1e-5)) << cols;
    EXPECT_TRUE(NormwiseClose(Down(dgamma, cols), want_dgamma, 1e-5)) << cols;
    EXPECT_TRUE(NormwiseClose(Down(dbeta, cols), want_dbeta, 1e-5)) << cols;
  }
}

TEST_F(CudaVsCpuTest, NnFmOrder2ForwardAndBackward) {
  const int64_t batch = kRows, fields = 13, dim = kCols;
  const std::vector<float> x = RandomVector(batch * fields * dim, 92);
  const std::vector<float> dy = RandomVector(batch * dim, 93);
  DeviceArray<float> dx = Up(x), ddy = Up(dy), y(gpu_.get(), batch * dim),
                     dgrad(gpu_.get(), batch * fields * dim);
  gpu_->FmOrder2Forward(batch, fields, dim, dx.data(), y.data());
  std::vector<float> want_y(batch * dim);
  cpu_.FmOrder2Forward(batch, fields, dim, x.data(), want_y.data());
  EXPECT_TRUE(NormwiseClose(Down(y, batch * dim), want_y, 1e-5));
  gpu_->FmOrder2Backward(batch, fields, dim, dx.data(), ddy.data(),
                         dgrad.data());
  std::vector<float> want_dx(batch * fields * dim);
  cpu_.FmOrder2Backward(batch, fields, dim, x.data(), dy.data(),
                        want_dx.data());
  EXPECT_TRUE(NormwiseClose(Down(dgrad, batch * fields * dim), want_dx, 1e-5));
}

TEST_F(CudaVsCpuTest, CopiesLargerThanTheStagingBuffers) {
  // 4 MiB staging buffers: 11 MiB + 3 bytes crosses several, unaligned.
  const int64_t bytes = (11 << 20) + 3;
  std::vector<char> in(bytes), out(bytes, 0);
  for (int64_t i = 0; i < bytes; ++i) in[i] = static_cast<char>(i * 131 + 7);
  DeviceArray<char> a(gpu_.get(), bytes), b(gpu_.get(), bytes);
  gpu_->CopyToDevice(in.data(), a.data(), bytes);
  gpu_->CopyOnDevice(a.data(), b.data(), bytes);
  gpu_->CopyToHost(b.data(), out.data(), bytes);
  EXPECT_EQ(in, out);
  EXPECT_TRUE(gpu_->Synchronize().ok());
}

TEST_F(CudaVsCpuTest, DeviceNameSaysCuda) {
  EXPECT_THAT(gpu_->device_name(), ::testing::StartsWith("cuda:0"));
  // The start line names memory, compute capability and driver.
  EXPECT_THAT(gpu_->device_name(), ::testing::HasSubstr("MiB, sm_"));
  EXPECT_THAT(gpu_->device_name(), ::testing::HasSubstr("driver CUDA"));
}

// Ties pick the first index on both backends: arg-max in the softmax's
// correct count, and max pooling's arg-max.
TEST_F(CudaVsCpuTest, ArgMaxTiesPickTheFirstIndex) {
  const std::vector<float> logits = {1, 3, 3, 0, 2, 2, 2, 2, 5, 1, 5, 5};
  // Every row hits only if ties go to the first index.
  const std::vector<int32_t> labels = {1, 0, 0};
  DeviceArray<float> z = Up(logits), grad(gpu_.get(), 12);
  DeviceArray<int32_t> y = Up(labels);
  int64_t got = -1, want = -1;
  gpu_->SoftmaxCrossEntropy(z.data(), y.data(), 3, 4, grad.data(), &got);
  std::vector<float> cpu_grad(12);
  cpu_.SoftmaxCrossEntropy(logits.data(), labels.data(), 3, 4, cpu_grad.data(),
                           &want);
  EXPECT_EQ(want, 3);
  EXPECT_EQ(got, want);

  Backend::Window2D g;
  g.batch = 1;
  g.height = g.width = 2;
  g.channels = 2;
  g.kernel_h = g.kernel_w = 2;
  g.stride_h = g.stride_w = 2;
  g.out_h = g.out_w = 1;
  const std::vector<float> x = {4, 1, 4, 7, 2, 7, 4, 7};  // ties in both
  DeviceArray<float> dx = Up(x), dy(gpu_.get(), 2);
  DeviceArray<int64_t> darg(gpu_.get(), 2);
  gpu_->MaxPoolForward(g, dx.data(), dy.data(), darg.data());
  std::vector<float> y_cpu(2);
  std::vector<int64_t> arg_cpu(2);
  cpu_.MaxPoolForward(g, x.data(), y_cpu.data(), arg_cpu.data());
  EXPECT_EQ(arg_cpu, std::vector<int64_t>({0, 3}));
  EXPECT_EQ(Down(darg, 2), arg_cpu);
  EXPECT_EQ(Down(dy, 2), y_cpu);
}

// The backend's error contract: an impossible allocation makes the next
// Synchronize fail naming it, later ops change nothing (a host buffer
// copied into stays as it was), and the error stays.
TEST_F(CudaVsCpuTest, AnErrorStopsEverythingAfterIt) {
  DeviceArray<float> ok(gpu_.get(), 4);
  const std::vector<float> ones(4, 1.0f);
  gpu_->CopyToDevice(ones.data(), ok.data(), 4 * sizeof(float));
  ASSERT_TRUE(gpu_->Synchronize().ok());
  void* huge = gpu_->AllocateBytes(int64_t{1} << 60);  // 1 EiB
  absl::Status s = gpu_->Synchronize();
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.message()), ::testing::HasSubstr("cudaMalloc"));
  gpu_->FreeBytes(huge);
  gpu_->Fill(4, 7.0f, ok.data());
  std::vector<float> host(4, -1.0f);
  gpu_->CopyToHost(ok.data(), host.data(), 4 * sizeof(float));
  EXPECT_EQ(host, std::vector<float>(4, -1.0f)) << "a host buffer was written";
  EXPECT_FALSE(gpu_->Synchronize().ok()) << "the error must stay";
  // TearDown expects a healthy backend: this test leaves a fresh one.
  absl::StatusOr<std::unique_ptr<Backend>> fresh = NewCudaBackend(0);
  ASSERT_TRUE(fresh.ok());
  ok = DeviceArray<float>();
  gpu_ = *std::move(fresh);
}

// A failed call is cleared from the runtime's per-thread last error once
// recorded: a fresh backend's first launch on this thread is not blamed
// for the 1 EiB allocation of the backend before it.
TEST_F(CudaVsCpuTest, AFailedCallIsNotBlamedOnAFreshBackendsLaunch) {
  ASSERT_EQ(gpu_->AllocateBytes(int64_t{1} << 60), nullptr);
  ASSERT_FALSE(gpu_->Synchronize().ok());
  absl::StatusOr<std::unique_ptr<Backend>> fresh = NewCudaBackend(0);
  ASSERT_TRUE(fresh.ok()) << fresh.status();
  gpu_ = *std::move(fresh);
  DeviceArray<float> x(gpu_.get(), 4);
  gpu_->Fill(4, 3.0f, x.data());
  EXPECT_TRUE(gpu_->Synchronize().ok()) << gpu_->Synchronize();
}

// Uploads from another thread land on the device, and AwaitUploads orders
// them before later ops: a large pinned upload queued just before, read by
// a device-side copy right after, is read whole. ReleaseUploads orders a
// later upload after the ops that read its target: the copy still sees
// the first values although the second upload overwrites them.
TEST_F(CudaVsCpuTest, UploadsFromAnotherThreadAreOrderedBothWays) {
  const int64_t n = (32 << 20) / 4;
  HostArray<float> first(gpu_.get(), n), second(gpu_.get(), n),
      out(gpu_.get(), n);
  for (int64_t i = 0; i < n; ++i) {
    first[i] = static_cast<float>(i % 1013);
    second[i] = -1.0f;
  }
  DeviceArray<float> staged(gpu_.get(), n), params(gpu_.get(), n);
  std::thread([&] {
    gpu_->Upload(first.data(), staged.data(), n * sizeof(float));
  }).join();
  gpu_->AwaitUploads();
  gpu_->CopyOnDevice(staged.data(), params.data(), n * sizeof(float));
  gpu_->ReleaseUploads();
  std::thread([&] {
    gpu_->Upload(second.data(), staged.data(), n * sizeof(float));
  }).join();
  gpu_->CopyToHost(params.data(), out.data(), n * sizeof(float));
  EXPECT_TRUE(std::equal(first.begin(), first.end(), out.begin()));
  gpu_->AwaitUploads();
  gpu_->CopyToHost(staged.data(), out.data(), n * sizeof(float));
  EXPECT_TRUE(std::equal(second.begin(), second.end(), out.begin()));
}

// A failed upload is a device error at the next AwaitUploads, naming the
// upload. The failure is a null target, which the backend refuses before
// the runtime sees it: a copy to a bad address that the driver queued
// could fault in flight and poison the context for every later GPU test.
TEST_F(CudaVsCpuTest, AFailedUploadIsReportedAtAwaitUploads) {
  HostArray<float> host(gpu_.get(), 16);
  std::thread([&] {
    gpu_->Upload(host.data(), nullptr, 16 * sizeof(float));
  }).join();
  ASSERT_TRUE(gpu_->status().ok()) << "reported before AwaitUploads";
  gpu_->AwaitUploads();
  absl::Status s = gpu_->Synchronize();
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.message()), ::testing::HasSubstr("upload"));
  absl::StatusOr<std::unique_ptr<Backend>> fresh = NewCudaBackend(0);
  ASSERT_TRUE(fresh.ok());
  host = HostArray<float>();
  gpu_ = *std::move(fresh);
}

// A scratch buffer that grows, then is asked for less, then more again
// (the ones vector of BiasGrad) keeps giving the CPU's results.
TEST_F(CudaVsCpuTest, ScratchShrinksAndGrowsAgain) {
  for (int64_t rows : {8, 4096, 16, 100000, 3}) {
    SCOPED_TRACE(rows);
    const std::vector<float> dy = RandomVector(rows * 5, rows);
    DeviceArray<float> d = Up(dy), db(gpu_.get(), 5);
    gpu_->BiasGrad(d.data(), rows, 5, db.data());
    std::vector<float> want(5);
    cpu_.BiasGrad(dy.data(), rows, 5, want.data());
    EXPECT_TRUE(NormwiseClose(Down(db, 5), want, 1e-5));
  }
}

// Pinned host memory from AllocateHost round-trips through the device:
// whole blocks, a range inside one, and more than the staging buffers
// hold; a copy from it is queued (the source must stay until the next
// Synchronize), one into it has landed when CopyToHost returns.
TEST_F(CudaVsCpuTest, PinnedHostMemoryRoundTrips) {
  const int64_t n = ((11 << 20) + 12) / 4;  // > 2 staging buffers
  HostArray<float> in(gpu_.get(), n), out(gpu_.get(), n);
  ASSERT_EQ(in.size(), n);
  for (int64_t i = 0; i < n; ++i) in[i] = static_cast<float>(i % 977) - 3.5f;
  DeviceArray<float> a(gpu_.get(), n), b(gpu_.get(), n);
  gpu_->CopyToDevice(in.data(), a.data(), n * sizeof(float));
  gpu_->CopyOnDevice(a.data(), b.data(), n * sizeof(float));
  gpu_->CopyToHost(b.data(), out.data(), n * sizeof(float));
  EXPECT_TRUE(std::equal(in.begin(), in.end(), out.begin()));
  // A range in the middle of a pinned block, to a pageable buffer.
  std::vector<float> part(1000, 0.0f);
  gpu_->CopyToDevice(in.data() + 12345, a.data(), 1000 * sizeof(float));
  gpu_->CopyToHost(a.data(), part.data(), 1000 * sizeof(float));
  EXPECT_TRUE(std::equal(part.begin(), part.end(), in.data() + 12345));
  // A pageable source into a pinned destination.
  const std::vector<float> plain = RandomVector(777, 3);
  gpu_->CopyToDevice(plain.data(), a.data(), 777 * sizeof(float));
  gpu_->CopyToHost(a.data(), out.data() + 1, 777 * sizeof(float));
  EXPECT_TRUE(std::equal(plain.begin(), plain.end(), out.data() + 1));
  EXPECT_TRUE(gpu_->Synchronize().ok());
  // Freed back: a new block of the same size works again.
  in = HostArray<float>(gpu_.get(), 16);
  EXPECT_EQ(in.size(), 16);
  EXPECT_EQ(in[15], 0.0f);
}

// All bags empty: zeros forward, nothing written backward, no distinct
// ids; the CPU says the same.
TEST_F(CudaVsCpuTest, AllBagsEmpty) {
  const int64_t bags = 300, dim = 200;
  const std::vector<int64_t> offsets(bags + 1, 0);
  const std::vector<float> table = RandomVector(10 * dim, 4);
  DeviceArray<float> dtable = Up(table),
                     out = Up(std::vector<float>(bags * dim, 9.0f));
  DeviceArray<int64_t> doffsets = Up(offsets), ids(gpu_.get(), 1);
  gpu_->EmbeddingBagForward(dtable.data(), dim, doffsets.data(), ids.data(),
                            bags, Backend::Combiner::kMean, out.data(), dim);
  EXPECT_EQ(Down(out, bags * dim), std::vector<float>(bags * dim, 0.0f));
  DeviceArray<float> drows = Up(std::vector<float>(4, 5.0f));
  gpu_->EmbeddingBagBackward(out.data(), dim, doffsets.data(), bags,
                             Backend::Combiner::kSum, drows.data(), dim);
  EXPECT_EQ(Down(drows, 4), std::vector<float>(4, 5.0f));
  DeviceArray<int64_t> unique(gpu_.get(), 1);
  DeviceArray<float> sums(gpu_.get(), dim);
  EXPECT_EQ(gpu_->ReduceSparseGrad(ids.data(), drows.data(), 0, dim,
                                   unique.data(), sums.data()),
            0);
  int64_t cpu_unique = 0;
  float cpu_sum = 0;
  EXPECT_EQ(
      cpu_.ReduceSparseGrad(nullptr, nullptr, 0, dim, &cpu_unique, &cpu_sum),
      0);
}

}  // namespace
}  // namespace tessera
