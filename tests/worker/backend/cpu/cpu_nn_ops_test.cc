// The CPU backend's ops for the layer library (the second half of Backend,
// worker/backend/backend.h, whose comments are the contracts). The CPU backend
// is the reference the CUDA backend is tested against, so these check it
// against hand-computed values, plain formulas in double, and finite
// differences of the scalar sum(dy * y) for the backward passes.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <random>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/backend/cpu/cpu_backend.h"

namespace tessera {
namespace {

using ::testing::ElementsAre;
using ::testing::FloatNear;
using ::testing::Pointwise;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

std::vector<float> RandomVector(int64_t n, uint32_t seed, float lo = -1.0f,
                                float hi = 1.0f) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(gen);
  return v;
}

double Dot(const std::vector<float>& a, const std::vector<double>& b) {
  double sum = 0;
  for (size_t i = 0; i < a.size(); ++i) sum += a[i] * b[i];
  return sum;
}

// Central differences of f at x, in double, one coordinate at a time.
std::vector<double> NumericGradient(
    const std::function<double(const std::vector<double>&)>& f,
    std::vector<double> x, double h = 1e-4) {
  std::vector<double> grad(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const double saved = x[i];
    x[i] = saved + h;
    const double plus = f(x);
    x[i] = saved - h;
    const double minus = f(x);
    x[i] = saved;
    grad[i] = (plus - minus) / (2 * h);
  }
  return grad;
}

// max |got - want| <= tol * max(1, max |want|).
::testing::AssertionResult CloseTo(const std::vector<float>& got,
                                   const std::vector<double>& want,
                                   double tol) {
  if (got.size() != want.size()) {
    return ::testing::AssertionFailure()
           << "sizes differ: " << got.size() << " vs " << want.size();
  }
  double scale = 1, worst = 0;
  size_t at = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    scale = std::max(scale, std::fabs(want[i]));
    const double d = std::fabs(got[i] - want[i]);
    if (!(d <= worst)) {
      worst = d;
      at = i;
    }
  }
  if (worst <= tol * scale) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "max |got - want| = " << worst << " at " << at << " (got "
         << got[at] << ", want " << want[at] << ") > " << tol << " * " << scale;
}

std::vector<double> ToDouble(const std::vector<float>& v) {
  return std::vector<double>(v.begin(), v.end());
}

// ---- Elementwise ops.

TEST(CpuNnOpsTest, FillWritesExactlyN) {
  CpuBackend backend;
  std::vector<float> x = {1, 2, 3, 4, 5};
  backend.Fill(4, -2.5f, x.data());
  EXPECT_THAT(x, ElementsAre(-2.5f, -2.5f, -2.5f, -2.5f, 5));
}

TEST(CpuNnOpsTest, Axpby) {
  CpuBackend backend;
  const std::vector<float> x = {1, 2, -3};
  std::vector<float> y = {10, 20, 30};
  backend.Axpby(3, 2.0f, x.data(), 0.5f, y.data());
  EXPECT_THAT(y, ElementsAre(7, 14, 9));
  // beta 0 never reads y, so garbage there does not leak into the result.
  y = {kNaN, std::numeric_limits<float>::infinity(), kNaN};
  backend.Axpby(3, -1.0f, x.data(), 0.0f, y.data());
  EXPECT_THAT(y, ElementsAre(-1, -2, 3));
}

TEST(CpuNnOpsTest, MulWithAndWithoutBeta) {
  CpuBackend backend;
  const std::vector<float> a = {1, 2, 3}, b = {4, -5, 0.5f};
  std::vector<float> out = {1, 1, 2};
  backend.Mul(3, a.data(), b.data(), 2.0f, out.data());
  EXPECT_THAT(out, ElementsAre(6, -8, 5.5f));
  out = {kNaN, kNaN, kNaN};
  backend.Mul(3, a.data(), b.data(), 0.0f, out.data());
  EXPECT_THAT(out, ElementsAre(4, -10, 1.5f));
}

TEST(CpuNnOpsTest, MulWithBetaZeroMayAliasEitherInput) {
  CpuBackend backend;
  std::vector<float> a = {1, 2, 3}, b = {4, -5, 0.5f};
  backend.Mul(3, a.data(), b.data(), 0.0f, a.data());
  EXPECT_THAT(a, ElementsAre(4, -10, 1.5f));
  a = {1, 2, 3};
  backend.Mul(3, a.data(), b.data(), 0.0f, b.data());
  EXPECT_THAT(b, ElementsAre(4, -10, 1.5f));
}

struct UnaryCase {
  Backend::Unary kind;
  double (*f)(double);
  double (*df)(double);  // of x
};

double ReluD(double x) { return x > 0 ? x : 0; }
double ReluGradD(double x) { return x > 0 ? 1 : 0; }
double SigmoidD(double x) { return 1 / (1 + std::exp(-x)); }
double SigmoidGradD(double x) { return SigmoidD(x) * (1 - SigmoidD(x)); }
double TanhD(double x) { return std::tanh(x); }
double TanhGradD(double x) { return 1 - std::tanh(x) * std::tanh(x); }

class CpuUnaryTest : public ::testing::TestWithParam<UnaryCase> {};

TEST_P(CpuUnaryTest, ForwardAndBackwardMatchTheFormulas) {
  const UnaryCase& p = GetParam();
  CpuBackend backend;
  const std::vector<float> x = {-30, -2, -0.5f, -1e-3f, 0.25f, 1, 3, 30};
  const int64_t n = x.size();
  std::vector<float> y(n), dx(n);
  backend.UnaryForward(p.kind, n, x.data(), y.data());
  std::vector<double> want_y(n), want_dx(n);
  const std::vector<float> dy = RandomVector(n, 1);
  for (int64_t i = 0; i < n; ++i) {
    want_y[i] = p.f(x[i]);
    want_dx[i] = dy[i] * p.df(x[i]);
  }
  EXPECT_TRUE(CloseTo(y, want_y, 1e-6));
  backend.UnaryBackward(p.kind, n, y.data(), dy.data(), dx.data());
  EXPECT_TRUE(CloseTo(dx, want_dx, 1e-6));
}

TEST_P(CpuUnaryTest, InPlace) {
  const UnaryCase& p = GetParam();
  CpuBackend backend;
  const std::vector<float> x = RandomVector(50, 2, -4, 4);
  std::vector<float> y(50);
  backend.UnaryForward(p.kind, 50, x.data(), y.data());
  std::vector<float> v = x;
  backend.UnaryForward(p.kind, 50, v.data(), v.data());  // y aliases x
  EXPECT_EQ(v, y);
  const std::vector<float> dy = RandomVector(50, 3);
  std::vector<float> dx(50);
  backend.UnaryBackward(p.kind, 50, y.data(), dy.data(), dx.data());
  std::vector<float> g = dy;
  backend.UnaryBackward(p.kind, 50, y.data(), g.data(), g.data());
  EXPECT_EQ(g, dx);
}

INSTANTIATE_TEST_SUITE_P(
    AllKinds, CpuUnaryTest,
    ::testing::Values(UnaryCase{Backend::Unary::kRelu, ReluD, ReluGradD},
                      UnaryCase{Backend::Unary::kSigmoid, SigmoidD,
                                SigmoidGradD},
                      UnaryCase{Backend::Unary::kTanh, TanhD, TanhGradD}),
    [](const ::testing::TestParamInfo<UnaryCase>& info) {
      switch (info.param.kind) {
        case Backend::Unary::kRelu:
          return "Relu";
        case Backend::Unary::kSigmoid:
          return "Sigmoid";
        case Backend::Unary::kTanh:
          return "Tanh";
      }
      return "Other";
    });

// ---- Softmax and the mean squared error.

TEST(CpuNnOpsTest, SoftmaxForwardRowsSumToOneAndMatchTheFormula) {
  CpuBackend backend;
  const int64_t rows = 4, cols = 5;
  std::vector<float> x = RandomVector(rows * cols, 4, -3, 3);
  // Logits that overflow exp unless the row's max is subtracted first.
  for (int64_t c = 0; c < cols; ++c) x[3 * cols + c] = 1000.0f + c;
  std::vector<float> y(rows * cols);
  backend.SoftmaxForward(rows, cols, x.data(), y.data());
  std::vector<double> want(rows * cols);
  for (int64_t r = 0; r < rows; ++r) {
    double max = x[r * cols], sum = 0, got_sum = 0;
    for (int64_t c = 0; c < cols; ++c)
      max = std::max<double>(max, x[r * cols + c]);
    for (int64_t c = 0; c < cols; ++c) sum += std::exp(x[r * cols + c] - max);
    for (int64_t c = 0; c < cols; ++c) {
      want[r * cols + c] = std::exp(x[r * cols + c] - max) / sum;
      got_sum += y[r * cols + c];
    }
    EXPECT_NEAR(got_sum, 1.0, 1e-6) << "row " << r;
  }
  EXPECT_TRUE(CloseTo(y, want, 1e-6));
  // In place.
  backend.SoftmaxForward(rows, cols, x.data(), x.data());
  EXPECT_EQ(x, y);
}

TEST(CpuNnOpsTest, SoftmaxBackwardMatchesFormulaAndFiniteDifferences) {
  CpuBackend backend;
  const int64_t rows = 3, cols = 6;
  const std::vector<float> x = RandomVector(rows * cols, 5, -2, 2);
  const std::vector<float> dy = RandomVector(rows * cols, 6);
  std::vector<float> y(rows * cols), dx(rows * cols);
  backend.SoftmaxForward(rows, cols, x.data(), y.data());
  backend.SoftmaxBackward(rows, cols, y.data(), dy.data(), dx.data());
  std::vector<double> want(rows * cols);
  for (int64_t r = 0; r < rows; ++r) {
    double dot = 0;
    for (int64_t c = 0; c < cols; ++c) {
      dot += static_cast<double>(dy[r * cols + c]) * y[r * cols + c];
    }
    for (int64_t c = 0; c < cols; ++c) {
      want[r * cols + c] = y[r * cols + c] * (dy[r * cols + c] - dot);
    }
  }
  EXPECT_TRUE(CloseTo(dx, want, 1e-6));
  // The gradient of sum(dy * softmax(x)).
  const std::vector<double> numeric = NumericGradient(
      [&](const std::vector<double>& v) {
        double total = 0;
        for (int64_t r = 0; r < rows; ++r) {
          double max = v[r * cols], sum = 0;
          for (int64_t c = 0; c < cols; ++c)
            max = std::max(max, v[r * cols + c]);
          for (int64_t c = 0; c < cols; ++c)
            sum += std::exp(v[r * cols + c] - max);
          for (int64_t c = 0; c < cols; ++c) {
            total += dy[r * cols + c] * std::exp(v[r * cols + c] - max) / sum;
          }
        }
        return total;
      },
      ToDouble(x));
  EXPECT_TRUE(CloseTo(dx, numeric, 1e-5));
  // dx may alias dy.
  std::vector<float> g = dy;
  backend.SoftmaxBackward(rows, cols, y.data(), g.data(), g.data());
  EXPECT_EQ(g, dx);
}

TEST(CpuNnOpsTest, MeanSquaredErrorValueAndGradient) {
  CpuBackend backend;
  const std::vector<float> pred = {1, 2, 3, 4}, target = {0, 2, 5, 1};
  // Differences 1, 0, -2, 3: row means (1 + 0) / 2 and (4 + 9) / 2.
  std::vector<float> dpred(4, kNaN);
  EXPECT_DOUBLE_EQ(
      backend.MeanSquaredError(pred.data(), target.data(), 2, 2, dpred.data()),
      7.0);
  // 2 (pred - target) / (rows * cols).
  EXPECT_THAT(dpred, ElementsAre(0.5f, 0.0f, -1.0f, 1.5f));
  EXPECT_DOUBLE_EQ(
      backend.MeanSquaredError(pred.data(), target.data(), 2, 2, nullptr), 7.0);
  // One row of four: the mean over all four.
  EXPECT_DOUBLE_EQ(
      backend.MeanSquaredError(pred.data(), target.data(), 1, 4, dpred.data()),
      3.5);
  EXPECT_THAT(dpred, ElementsAre(0.5f, 0.0f, -1.0f, 1.5f));
}

// ---- Copies, products, gathers.

TEST(CpuNnOpsTest, Copy2DCopiesABlockOfColumns) {
  CpuBackend backend;
  // src [2, 3]; into columns 1..3 of a [2, 5] dst.
  const std::vector<float> src = {1, 2, 3, 4, 5, 6};
  // NaN where the block goes: beta 0 must not read dst, which may be
  // uninitialized (Concat into a fresh tensor).
  std::vector<float> dst = {-1, kNaN, kNaN, kNaN, -2, -3, kNaN, kNaN, kNaN, -4};
  backend.Copy2D(2, 3, src.data(), 3, dst.data() + 1, 5, 0.0f);
  EXPECT_THAT(dst, ElementsAre(-1, 1, 2, 3, -2, -3, 4, 5, 6, -4));
  // And back, accumulating: columns 1..2 of dst into a [2, 2] with beta 1.
  std::vector<float> back = {10, 20, 30, 40};
  backend.Copy2D(2, 2, dst.data() + 1, 5, back.data(), 2, 1.0f);
  EXPECT_THAT(back, ElementsAre(11, 22, 34, 45));
  backend.Copy2D(2, 2, dst.data() + 1, 5, back.data(), 2, -2.0f);
  EXPECT_THAT(back, ElementsAre(1 - 22, 2 - 44, 4 - 68, 5 - 90));
}

// C = alpha * op(A) * op(B) + beta * C with plain loops, in double.
std::vector<float> NaiveGemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                             float alpha, const float* a, const float* b,
                             float beta, const float* c) {
  std::vector<float> out(m * n);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double sum = 0;
      for (int64_t p = 0; p < k; ++p) {
        const float av = ta ? a[p * m + i] : a[i * k + p];
        const float bv = tb ? b[j * k + p] : b[p * n + j];
        sum += static_cast<double>(av) * bv;
      }
      out[i * n + j] = static_cast<float>(
          alpha * sum + (beta == 0 ? 0 : beta * c[i * n + j]));
    }
  }
  return out;
}

TEST(CpuNnOpsTest, BatchedGemmMatchesATripleLoopPerBatch) {
  CpuBackend backend;
  const int64_t m = 3, n = 4, k = 5, batch = 3;
  // Strides larger than the matrices: the gaps must be left alone.
  const int64_t sa = m * k + 2, sb = k * n + 1, sc = m * n + 3;
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      for (float beta : {0.0f, 0.5f}) {
        const std::vector<float> a = RandomVector(sa * batch, 7);
        const std::vector<float> b = RandomVector(sb * batch, 8);
        const std::vector<float> c0 = RandomVector(sc * batch, 9);
        std::vector<float> c = c0;
        backend.BatchedGemm(ta, tb, m, n, k, 1.5f, a.data(), sa, b.data(), sb,
                            beta, c.data(), sc, batch);
        for (int64_t i = 0; i < batch; ++i) {
          const std::vector<float> want =
              NaiveGemm(ta, tb, m, n, k, 1.5f, a.data() + i * sa,
                        b.data() + i * sb, beta, c0.data() + i * sc);
          const std::vector<float> got(c.begin() + i * sc,
                                       c.begin() + i * sc + m * n);
          EXPECT_THAT(got, Pointwise(FloatNear(1e-5f), want))
              << ta << tb << " beta " << beta << " batch " << i;
          for (int64_t j = m * n; j < sc; ++j) {
            EXPECT_EQ(c[i * sc + j], c0[i * sc + j]) << "gap " << i << "," << j;
          }
        }
      }
    }
  }
}

TEST(CpuNnOpsTest, GatherAndScatterColumnsWithRepeatedIndices) {
  CpuBackend backend;
  const std::vector<float> x = {1, 2, 3, 4, 5, 6, 7, 8};  // [2, 4]
  const std::vector<int32_t> index = {3, 0, 3, 1};
  std::vector<float> y(8, kNaN);
  backend.GatherColumns(2, 4, x.data(), 4, index.data(), y.data());
  EXPECT_THAT(y, ElementsAre(4, 1, 4, 2, 8, 5, 8, 6));
  // The backward: column 2 gets nothing (zeroed, not left as it was),
  // column 3 gets two contributions.
  const std::vector<float> dy = {1, 2, 3, 4, 10, 20, 30, 40};
  std::vector<float> dx(8, kNaN);
  backend.ScatterColumns(2, 4, dy.data(), index.data(), 4, dx.data());
  EXPECT_THAT(dx, ElementsAre(2, 4, 0, 4, 20, 40, 0, 40));
}

TEST(CpuNnOpsTest, ScaleRowsAndRowDot) {
  CpuBackend backend;
  const std::vector<float> x = {1, 2, 3, 4, 5, 6};  // [2, 3]
  const std::vector<float> s = {2, -0.5f};
  std::vector<float> y(6, kNaN);  // beta 0 does not read y
  backend.ScaleRows(2, 3, x.data(), s.data(), 0.0f, y.data());
  EXPECT_THAT(y, ElementsAre(2, 4, 6, -2, -2.5f, -3));
  backend.ScaleRows(2, 3, x.data(), s.data(), 1.0f, y.data());
  EXPECT_THAT(y, ElementsAre(4, 8, 12, -4, -5, -6));
  const std::vector<float> b = {1, 0, -1, 2, 2, 2};
  std::vector<float> out(2, kNaN);
  backend.RowDot(2, 3, x.data(), b.data(), out.data());
  EXPECT_THAT(out, ElementsAre(-2, 30));
}

// ---- Windows: Im2Col, Col2Im, max pooling.

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

int64_t InputSize(const Backend::Window2D& g) {
  return g.batch * g.height * g.width * g.channels;
}
int64_t ColsSize(const Backend::Window2D& g) {
  return g.batch * g.out_h * g.out_w * g.kernel_h * g.kernel_w * g.channels;
}

TEST(CpuNnOpsTest, Im2ColWithPaddingAndStrideTwo) {
  CpuBackend backend;
  // A 3x3 single-channel image, 2x2 windows moving by 2, padded by one row
  // on top and one column on the left: a 2x2 output.
  const Backend::Window2D g = Window(1, 3, 3, 1, 2, 2, 2, 2, 1, 1, 2, 2);
  const std::vector<float> x = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  std::vector<float> cols(ColsSize(g), kNaN);
  backend.Im2Col(g, x.data(), cols.data());
  EXPECT_THAT(cols, ElementsAre(0, 0, 0, 1,    // rows -1..0, cols -1..0
                                0, 0, 2, 3,    // rows -1..0, cols 1..2
                                0, 4, 0, 7,    // rows 1..2, cols -1..0
                                5, 6, 8, 9));  // rows 1..2, cols 1..2
}

TEST(CpuNnOpsTest, Im2ColColumnsAreKernelRowsThenColumnsThenChannels) {
  CpuBackend backend;
  // 2x2 image, 2 channels, one 1x2 window per row (no padding), batch 2.
  const Backend::Window2D g = Window(2, 2, 2, 2, 1, 2, 1, 1, 0, 0, 2, 1);
  std::vector<float> x(InputSize(g));
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i);
  std::vector<float> cols(ColsSize(g), kNaN);
  backend.Im2Col(g, x.data(), cols.data());
  // Row (n, oh, 0) = x[n, oh, 0, 0..1], x[n, oh, 1, 0..1]: the image itself.
  EXPECT_EQ(cols, x);
}

// The contract's formula, literally.
std::vector<float> NaiveIm2Col(const Backend::Window2D& g,
                               const std::vector<float>& x) {
  std::vector<float> cols;
  for (int64_t n = 0; n < g.batch; ++n) {
    for (int64_t oh = 0; oh < g.out_h; ++oh) {
      for (int64_t ow = 0; ow < g.out_w; ++ow) {
        for (int64_t i = 0; i < g.kernel_h; ++i) {
          for (int64_t j = 0; j < g.kernel_w; ++j) {
            for (int64_t c = 0; c < g.channels; ++c) {
              const int64_t h = oh * g.stride_h + i - g.pad_top;
              const int64_t w = ow * g.stride_w + j - g.pad_left;
              const bool inside =
                  h >= 0 && h < g.height && w >= 0 && w < g.width;
              cols.push_back(
                  inside
                      ? x[((n * g.height + h) * g.width + w) * g.channels + c]
                      : 0.0f);
            }
          }
        }
      }
    }
  }
  return cols;
}

std::vector<Backend::Window2D> Geometries() {
  return {
      // "same" 3x3, stride 1, pad 1: overlapping windows.
      Window(2, 5, 6, 3, 3, 3, 1, 1, 1, 1, 5, 6),
      // "valid" 3x2, strides 2 and 1.
      Window(1, 7, 5, 2, 3, 2, 2, 1, 0, 0, 3, 4),
      // "same" with stride 2 and odd sizes: padded at the bottom/right too.
      Window(3, 5, 5, 4, 3, 3, 2, 2, 1, 1, 3, 3),
      // Kernel larger than the stride by 2 in one direction only.
      Window(2, 4, 9, 1, 2, 4, 2, 2, 0, 1, 2, 4),
  };
}

TEST(CpuNnOpsTest, Im2ColMatchesTheFormulaOnSeveralGeometries) {
  CpuBackend backend;
  uint32_t seed = 10;
  for (const Backend::Window2D& g : Geometries()) {
    const std::vector<float> x = RandomVector(InputSize(g), seed++);
    std::vector<float> cols(ColsSize(g), kNaN);
    backend.Im2Col(g, x.data(), cols.data());
    EXPECT_EQ(cols, NaiveIm2Col(g, x)) << g.kernel_h << "x" << g.kernel_w;
  }
}

TEST(CpuNnOpsTest, Col2ImAddsOverlappingPatchesAndDropsPadding) {
  CpuBackend backend;
  // One row of width 3, 1x2 windows moving by 1 from one padded column:
  // windows cover columns {-1, 0}, {0, 1}, {1, 2}.
  const Backend::Window2D g = Window(1, 1, 3, 1, 1, 2, 1, 1, 0, 1, 1, 3);
  const std::vector<float> cols = {1, 2, 3, 4, 5, 6};
  std::vector<float> dx(3, kNaN);
  backend.Col2Im(g, cols.data(), dx.data());
  EXPECT_THAT(dx, ElementsAre(2 + 3, 4 + 5, 6));
}

// Col2Im is Im2Col's adjoint: <Im2Col(x), c> = <x, Col2Im(c)>.
TEST(CpuNnOpsTest, Col2ImIsTheAdjointOfIm2Col) {
  CpuBackend backend;
  uint32_t seed = 20;
  for (const Backend::Window2D& g : Geometries()) {
    const std::vector<float> x = RandomVector(InputSize(g), seed++);
    const std::vector<float> c = RandomVector(ColsSize(g), seed++);
    std::vector<float> cols(ColsSize(g)), dx(InputSize(g), kNaN);
    backend.Im2Col(g, x.data(), cols.data());
    backend.Col2Im(g, c.data(), dx.data());
    double lhs = 0, rhs = 0;
    for (size_t i = 0; i < c.size(); ++i) lhs += double{cols[i]} * c[i];
    for (size_t i = 0; i < x.size(); ++i) rhs += double{x[i]} * dx[i];
    EXPECT_NEAR(lhs, rhs, 1e-4 * (1 + std::fabs(lhs)))
        << g.kernel_h << "x" << g.kernel_w;
  }
}

TEST(CpuNnOpsTest, MaxPoolPaddingNeverWins) {
  CpuBackend backend;
  // All negative, so a padded position taken as 0 would win.
  const Backend::Window2D g = Window(1, 3, 3, 1, 2, 2, 2, 2, 1, 1, 2, 2);
  const std::vector<float> x = {-5, -1, -3, -2, -4, -2, -9, -8, -7};
  std::vector<float> y(4, kNaN);
  std::vector<int64_t> argmax(4, -7);
  backend.MaxPoolForward(g, x.data(), y.data(), argmax.data());
  EXPECT_THAT(y, ElementsAre(-5, -1, -2, -2));
  // The last window holds -4, -2 (index 5), -8, -7.
  EXPECT_THAT(argmax, ElementsAre(0, 1, 3, 5));
}

TEST(CpuNnOpsTest, MaxPoolArgmaxIsTheFirstMaximumInWindowOrderPerChannel) {
  CpuBackend backend;
  // One 2x2 window over a 2x2 image with 2 channels. Channel 0: all equal,
  // so (0, 0); channel 1: 3 at (0, 1) and (1, 0), so (0, 1).
  const Backend::Window2D g = Window(1, 2, 2, 2, 2, 2, 1, 1, 0, 0, 1, 1);
  const std::vector<float> x = {1, 0, 1, 3, 1, 3, 1, 1};
  std::vector<float> y(2);
  std::vector<int64_t> argmax(2);
  backend.MaxPoolForward(g, x.data(), y.data(), argmax.data());
  EXPECT_THAT(y, ElementsAre(1, 3));
  EXPECT_THAT(argmax, ElementsAre(0, 3));  // flat indices into x
}

TEST(CpuNnOpsTest, MaxPoolBackwardAddsWhereWindowsShareTheirMaximum) {
  CpuBackend backend;
  // Width 3, 1x2 windows moving by 1: both windows' maximum is x[1].
  const Backend::Window2D g = Window(1, 1, 3, 1, 1, 2, 1, 1, 0, 0, 1, 2);
  const std::vector<float> x = {1, 5, 2};
  std::vector<float> y(2);
  std::vector<int64_t> argmax(2);
  backend.MaxPoolForward(g, x.data(), y.data(), argmax.data());
  EXPECT_THAT(argmax, ElementsAre(1, 1));
  const std::vector<float> dy = {10, 20};
  std::vector<float> dx(3, kNaN);
  backend.MaxPoolBackward(g, dy.data(), argmax.data(), dx.data());
  EXPECT_THAT(dx, ElementsAre(0, 30, 0));
}

TEST(CpuNnOpsTest, MaxPoolMatchesABruteForceWindowMax) {
  CpuBackend backend;
  uint32_t seed = 30;
  for (const Backend::Window2D& g : Geometries()) {
    const std::vector<float> x = RandomVector(InputSize(g), seed++);
    const int64_t outputs = g.batch * g.out_h * g.out_w * g.channels;
    std::vector<float> y(outputs);
    std::vector<int64_t> argmax(outputs);
    backend.MaxPoolForward(g, x.data(), y.data(), argmax.data());
    // The maximum over the window's in-bounds positions, and an argmax
    // that points at it in the same channel.
    for (int64_t n = 0, o = 0; n < g.batch; ++n) {
      for (int64_t oh = 0; oh < g.out_h; ++oh) {
        for (int64_t ow = 0; ow < g.out_w; ++ow) {
          for (int64_t c = 0; c < g.channels; ++c, ++o) {
            float best = -std::numeric_limits<float>::infinity();
            for (int64_t i = 0; i < g.kernel_h; ++i) {
              for (int64_t j = 0; j < g.kernel_w; ++j) {
                const int64_t h = oh * g.stride_h + i - g.pad_top;
                const int64_t w = ow * g.stride_w + j - g.pad_left;
                if (h < 0 || h >= g.height || w < 0 || w >= g.width) continue;
                best = std::max(
                    best,
                    x[((n * g.height + h) * g.width + w) * g.channels + c]);
              }
            }
            ASSERT_EQ(y[o], best) << "output " << o;
            ASSERT_GE(argmax[o], 0);
            ASSERT_LT(argmax[o], InputSize(g));
            EXPECT_EQ(x[argmax[o]], best) << "output " << o;
            EXPECT_EQ(argmax[o] % g.channels, c) << "output " << o;
          }
        }
      }
    }
  }
}

// ---- Normalization.

TEST(CpuNnOpsTest, ColumnMomentsArePopulationMeanAndVariance) {
  CpuBackend backend;
  const std::vector<float> x = {1, 10, 2, 10, 3, 10, 6, 10};  // [4, 2]
  std::vector<float> mean(2, kNaN), var(2, kNaN);
  backend.ColumnMoments(4, 2, x.data(), mean.data(), var.data());
  EXPECT_THAT(mean, ElementsAre(3, 10));
  // (4 + 1 + 0 + 9) / 4, not / 3.
  EXPECT_THAT(var, ElementsAre(3.5f, 0));
}

// y = (x - mean(x)) / sqrt(var(x) + eps) * gamma + beta per column, in
// double.
std::vector<double> RefBatchNorm(int64_t rows, int64_t cols,
                                 const std::vector<double>& x,
                                 const std::vector<double>& gamma,
                                 const std::vector<double>& beta, double eps) {
  std::vector<double> y(rows * cols);
  for (int64_t c = 0; c < cols; ++c) {
    double mean = 0, var = 0;
    for (int64_t r = 0; r < rows; ++r) mean += x[r * cols + c];
    mean /= rows;
    for (int64_t r = 0; r < rows; ++r) {
      var += (x[r * cols + c] - mean) * (x[r * cols + c] - mean);
    }
    var /= rows;
    for (int64_t r = 0; r < rows; ++r) {
      y[r * cols + c] =
          (x[r * cols + c] - mean) / std::sqrt(var + eps) * gamma[c] + beta[c];
    }
  }
  return y;
}

TEST(CpuNnOpsTest, BatchNormForwardAndBackwardAgainstFiniteDifferences) {
  CpuBackend backend;
  const int64_t rows = 6, cols = 4;
  const float eps = 1e-3f;
  const std::vector<float> x = RandomVector(rows * cols, 40, -2, 2);
  const std::vector<float> gamma = RandomVector(cols, 41, 0.5f, 2);
  const std::vector<float> beta = RandomVector(cols, 42);
  const std::vector<float> dy = RandomVector(rows * cols, 43);
  std::vector<float> mean(cols), var(cols), y(rows * cols);
  backend.ColumnMoments(rows, cols, x.data(), mean.data(), var.data());
  backend.BatchNormForward(rows, cols, x.data(), mean.data(), var.data(),
                           gamma.data(), beta.data(), eps, y.data());
  EXPECT_TRUE(CloseTo(y,
                      RefBatchNorm(rows, cols, ToDouble(x), ToDouble(gamma),
                                   ToDouble(beta), eps),
                      1e-5));

  std::vector<float> dx(rows * cols, kNaN), dgamma(cols, kNaN),
      dbeta(cols, kNaN);
  backend.BatchNormBackward(rows, cols, x.data(), mean.data(), var.data(),
                            gamma.data(), eps, dy.data(), dx.data(),
                            dgamma.data(), dbeta.data());
  // The objective sum(dy * y) as a function of each input in turn.
  const std::vector<double> xd = ToDouble(x), gd = ToDouble(gamma),
                            bd = ToDouble(beta);
  const std::vector<double> num_dx = NumericGradient(
      [&](const std::vector<double>& v) {
        return Dot(dy, RefBatchNorm(rows, cols, v, gd, bd, eps));
      },
      xd);
  const std::vector<double> num_dgamma = NumericGradient(
      [&](const std::vector<double>& v) {
        return Dot(dy, RefBatchNorm(rows, cols, xd, v, bd, eps));
      },
      gd);
  const std::vector<double> num_dbeta = NumericGradient(
      [&](const std::vector<double>& v) {
        return Dot(dy, RefBatchNorm(rows, cols, xd, gd, v, eps));
      },
      bd);
  EXPECT_TRUE(CloseTo(dx, num_dx, 1e-4));
  EXPECT_TRUE(CloseTo(dgamma, num_dgamma, 1e-4));
  EXPECT_TRUE(CloseTo(dbeta, num_dbeta, 1e-4));
  // Through the moments: each column of dx sums to 0.
  for (int64_t c = 0; c < cols; ++c) {
    double sum = 0;
    for (int64_t r = 0; r < rows; ++r) sum += dx[r * cols + c];
    EXPECT_NEAR(sum, 0, 1e-5) << "column " << c;
  }
}

// Per row: y = (x - mean) / sqrt(var + eps) * gamma + beta, in double.
std::vector<double> RefLayerNorm(int64_t rows, int64_t cols,
                                 const std::vector<double>& x,
                                 const std::vector<double>& gamma,
                                 const std::vector<double>& beta, double eps,
                                 std::vector<double>* mean = nullptr,
                                 std::vector<double>* rstd = nullptr) {
  std::vector<double> y(rows * cols);
  for (int64_t r = 0; r < rows; ++r) {
    double m = 0, var = 0;
    for (int64_t c = 0; c < cols; ++c) m += x[r * cols + c];
    m /= cols;
    for (int64_t c = 0; c < cols; ++c) {
      var += (x[r * cols + c] - m) * (x[r * cols + c] - m);
    }
    var /= cols;
    const double s = 1 / std::sqrt(var + eps);
    if (mean != nullptr) mean->push_back(m);
    if (rstd != nullptr) rstd->push_back(s);
    for (int64_t c = 0; c < cols; ++c) {
      y[r * cols + c] = (x[r * cols + c] - m) * s * gamma[c] + beta[c];
    }
  }
  return y;
}

TEST(CpuNnOpsTest, LayerNormForwardAndBackwardAgainstFiniteDifferences) {
  CpuBackend backend;
  const int64_t rows = 3, cols = 7;
  const float eps = 1e-3f;
  const std::vector<float> x = RandomVector(rows * cols, 50, -2, 3);
  const std::vector<float> gamma = RandomVector(cols, 51, 0.5f, 2);
  const std::vector<float> beta = RandomVector(cols, 52);
  const std::vector<float> dy = RandomVector(rows * cols, 53);
  std::vector<float> y(rows * cols, kNaN), mean(rows, kNaN), rstd(rows, kNaN);
  backend.LayerNormForward(rows, cols, x.data(), gamma.data(), beta.data(), eps,
                           y.data(), mean.data(), rstd.data());
  const std::vector<double> xd = ToDouble(x), gd = ToDouble(gamma),
                            bd = ToDouble(beta);
  std::vector<double> want_mean, want_rstd;
  EXPECT_TRUE(CloseTo(
      y, RefLayerNorm(rows, cols, xd, gd, bd, eps, &want_mean, &want_rstd),
      1e-5));
  EXPECT_TRUE(CloseTo(mean, want_mean, 1e-6));
  EXPECT_TRUE(CloseTo(rstd, want_rstd, 1e-6));

  std::vector<float> dx(rows * cols, kNaN), dgamma(cols, kNaN),
      dbeta(cols, kNaN);
  backend.LayerNormBackward(rows, cols, x.data(), mean.data(), rstd.data(),
                            gamma.data(), dy.data(), dx.data(), dgamma.data(),
                            dbeta.data());
  const std::vector<double> num_dx = NumericGradient(
      [&](const std::vector<double>& v) {
        return Dot(dy, RefLayerNorm(rows, cols, v, gd, bd, eps));
      },
      xd);
  const std::vector<double> num_dgamma = NumericGradient(
      [&](const std::vector<double>& v) {
        return Dot(dy, RefLayerNorm(rows, cols, xd, v, bd, eps));
      },
      gd);
  const std::vector<double> num_dbeta = NumericGradient(
      [&](const std::vector<double>& v) {
        return Dot(dy, RefLayerNorm(rows, cols, xd, gd, v, eps));
      },
      bd);
  EXPECT_TRUE(CloseTo(dx, num_dx, 1e-4));
  EXPECT_TRUE(CloseTo(dgamma, num_dgamma, 1e-4));
  EXPECT_TRUE(CloseTo(dbeta, num_dbeta, 1e-4));
}

// ---- The factorization machine's second-order term.

TEST(CpuNnOpsTest, FmOrder2ForwardIsTheSumOfPairwiseProducts) {
  CpuBackend backend;
  const int64_t batch = 3, fields = 4, dim = 5;
  const std::vector<float> x = RandomVector(batch * fields * dim, 60);
  std::vector<float> y(batch * dim, kNaN);
  backend.FmOrder2Forward(batch, fields, dim, x.data(), y.data());
  std::vector<double> want(batch * dim, 0.0);
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t k = 0; k < dim; ++k) {
      for (int64_t f = 0; f < fields; ++f) {
        for (int64_t g = f + 1; g < fields; ++g) {
          want[b * dim + k] += double{x[(b * fields + f) * dim + k]} *
                               x[(b * fields + g) * dim + k];
        }
      }
    }
  }
  EXPECT_TRUE(CloseTo(y, want, 1e-6));
  // A hand-computed one: fields {1, 2, 3}: 1*2 + 1*3 + 2*3 = 11.
  const std::vector<float> small = {1, 2, 3};
  float out = 0;
  backend.FmOrder2Forward(1, 3, 1, small.data(), &out);
  EXPECT_FLOAT_EQ(out, 11);
}

TEST(CpuNnOpsTest, FmOrder2BackwardMatchesFormulaAndFiniteDifferences) {
  CpuBackend backend;
  const int64_t batch = 2, fields = 3, dim = 4;
  const std::vector<float> x = RandomVector(batch * fields * dim, 61);
  const std::vector<float> dy = RandomVector(batch * dim, 62);
  std::vector<float> dx(x.size(), kNaN);
  backend.FmOrder2Backward(batch, fields, dim, x.data(), dy.data(), dx.data());
  std::vector<double> want(x.size());
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t k = 0; k < dim; ++k) {
      double sum = 0;
      for (int64_t f = 0; f < fields; ++f) sum += x[(b * fields + f) * dim + k];
      for (int64_t f = 0; f < fields; ++f) {
        want[(b * fields + f) * dim + k] =
            dy[b * dim + k] * (sum - x[(b * fields + f) * dim + k]);
      }
    }
  }
  EXPECT_TRUE(CloseTo(dx, want, 1e-6));
  const std::vector<double> numeric = NumericGradient(
      [&](const std::vector<double>& v) {
        double total = 0;
        for (int64_t b = 0; b < batch; ++b) {
          for (int64_t k = 0; k < dim; ++k) {
            double sum = 0, sq = 0;
            for (int64_t f = 0; f < fields; ++f) {
              sum += v[(b * fields + f) * dim + k];
              sq +=
                  v[(b * fields + f) * dim + k] * v[(b * fields + f) * dim + k];
            }
            total += dy[b * dim + k] * 0.5 * (sum * sum - sq);
          }
        }
        return total;
      },
      ToDouble(x));
  EXPECT_TRUE(CloseTo(dx, numeric, 1e-5));
}

}  // namespace
}  // namespace tessera
