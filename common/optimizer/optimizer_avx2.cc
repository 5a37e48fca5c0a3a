// Built with -mavx2 (common/optimizer/CMakeLists.txt) on x86-64. Eigen's
// namespace is renamed here so no AVX2 instantiation of an Eigen template
// can stand in for the baseline build's (as worker/backend/cpu/
// cpu_gemm_avx2.cc does).
#include "common/optimizer/optimizer_avx2.h"

#if defined(TESSERA_OPTIMIZER_AVX2)
#include <immintrin.h>

#include <cmath>

#define Eigen tessera_optimizer_eigen_avx2
#include "Eigen/Core"
#undef Eigen
#endif

namespace tessera {
namespace optimizer_internal {

#if defined(TESSERA_OPTIMIZER_AVX2)

namespace {
using ArrayMap =
    tessera_optimizer_eigen_avx2::Map<tessera_optimizer_eigen_avx2::ArrayXf>;
using ConstArrayMap = tessera_optimizer_eigen_avx2::Map<
    const tessera_optimizer_eigen_avx2::ArrayXf>;

// optimizers.cc's ExactSqrt, for this file's packets: its own type, since
// a functor shared with the baseline build would let the linker hand this
// file's AVX2 code to a CPU without AVX2.
struct ExactSqrtAvx2 {
  float operator()(float x) const { return std::sqrt(x); }
  template <typename Packet>
  Packet packetOp(const Packet& x) const {
    return SqrtPacket(x);
  }

 private:
  static __m128 SqrtPacket(__m128 x) { return _mm_sqrt_ps(x); }
  static __m256 SqrtPacket(__m256 x) { return _mm256_sqrt_ps(x); }
};

template <typename Expr>
auto Sqrt(const Expr& x) {
  return x.unaryExpr(ExactSqrtAvx2());
}
}  // namespace
}  // namespace optimizer_internal
}  // namespace tessera

namespace tessera_optimizer_eigen_avx2 {
namespace internal {
template <>
struct functor_traits<tessera::optimizer_internal::ExactSqrtAvx2> {
  enum { Cost = 4 * NumTraits<float>::MulCost, PacketAccess = true };
};
}  // namespace internal
}  // namespace tessera_optimizer_eigen_avx2

namespace tessera {
namespace optimizer_internal {

// The same expressions as optimizers.cc's, in the same order, with the
// same correctly rounded square root: the bits of the baseline build.
void AdamAvx2(float* w, const float* g, float* m, float* v, int64_t n,
              float beta1, float beta2, float lr_t, float epsilon) {
  ArrayMap wa(w, n), ma(m, n), va(v, n);
  ConstArrayMap ga(g, n);
  ma = beta1 * ma + (1.0f - beta1) * ga;
  va = beta2 * va + (1.0f - beta2) * ga.square();
  wa -= lr_t * ma / (Sqrt(va) + epsilon);
}

void AdagradAvx2(float* w, const float* g, float* acc, int64_t n, float lr,
                 float epsilon) {
  ArrayMap wa(w, n), acca(acc, n);
  ConstArrayMap ga(g, n);
  acca += ga.square();
  wa -= lr * ga / (Sqrt(acca) + epsilon);
}

#else

void AdamAvx2(float*, const float*, float*, float*, int64_t, float, float,
              float, float) {}
void AdagradAvx2(float*, const float*, float*, int64_t, float, float) {}

#endif

}  // namespace optimizer_internal
}  // namespace tessera
