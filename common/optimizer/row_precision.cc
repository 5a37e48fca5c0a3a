#include "common/optimizer/row_precision.h"

#include <cmath>
#include <cstring>

#include "Eigen/Core"
#include "absl/strings/str_cat.h"
#include "common/counter_rng.h"
#include "common/optimizer/optimizer.h"
#include "common/optimizer/row_precision_f16c.h"

namespace tessera {
namespace {

constexpr uint16_t kHalfMaxFinite = 0x7BFF;  // 65504
constexpr uint16_t kHalfSign = 0x8000;

inline float HalfBitsToFloat(uint16_t bits) {
  return static_cast<float>(Eigen::numext::bit_cast<Eigen::half>(bits));
}

inline uint16_t FloatToHalfBits(float x) {
  return Eigen::numext::bit_cast<uint16_t>(Eigen::half(x));
}

inline uint16_t FloatToBfloat16Bits(float x) {
  return Eigen::numext::bit_cast<uint16_t>(Eigen::bfloat16(x));
}

// bf16 is the upper half of a float: widening is a shift, which these
// plain loops let the compiler vectorise.
inline void WidenBfloat16(const uint16_t* s, float* d, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t bits = static_cast<uint32_t>(s[i]) << 16;
    std::memcpy(d + i, &bits, sizeof(bits));
  }
}

// Round to nearest even, as Eigen::bfloat16(float) does (NaN: its quiet
// NaN with the sign).
inline void NarrowBfloat16Nearest(const float* s, uint16_t* d, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, s + i, sizeof(bits));
    const uint32_t rounded = (bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16;
    const bool nan = (bits & 0x7FFFFFFFu) > 0x7F800000u;
    d[i] = static_cast<uint16_t>(nan ? ((bits >> 16) & 0x8000u) | 0x7FC0u
                                     : rounded);
  }
}

}  // namespace

namespace row_precision_internal {

bool UseF16c() {
#ifdef TESSERA_ROW_PRECISION_F16C
  static const bool kF16c =
      __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c");
  return kF16c;
#else
  return false;
#endif
}

}  // namespace row_precision_internal

int RowPrecisionBytes(RowPrecision precision) {
  return precision == ROW_FP16 || precision == ROW_BF16 ? 2 : 4;
}

std::string RowPrecisionName(RowPrecision precision) {
  switch (precision) {
    case ROW_FP16:
      return "fp16";
    case ROW_BF16:
      return "bf16";
    default:
      return "fp32";
  }
}

absl::StatusOr<RowPrecision> ParseRowPrecision(absl::string_view name) {
  if (name == "fp32") return ROW_FP32;
  if (name == "fp16") return ROW_FP16;
  if (name == "bf16") return ROW_BF16;
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown table precision \"", name, "\" (one of fp32, fp16, bf16)"));
}

uint64_t RowRoundingSeed(uint64_t table_seed, int64_t step, int64_t row) {
  return DeriveSeed(DeriveSeed(table_seed, static_cast<uint64_t>(step)),
                    static_cast<uint64_t>(row));
}

uint64_t RowTableSeed(absl::string_view variable, uint64_t initializer_seed) {
  uint64_t seed = DeriveSeed(initializer_seed, 0x5EED0F5A11ull);
  for (unsigned char c : variable) seed = CounterHash(seed, c);
  return seed;
}

TableRowBytes RowBytesOf(RowPrecision precision, int64_t dim,
                         const Optimizer& optimizer, bool growing) {
  TableRowBytes b;
  b.values = (dim * RowPrecisionBytes(precision) + 3) / 4 * 4;
  for (int k = 0; k < optimizer.num_slots(); ++k) {
    b.slots += optimizer.slot_row_elements(k, dim) * 4;
  }
  if (growing) {
    const int64_t record = (8 + b.values + b.slots + 7) / 8 * 8;
    b.header = record - b.values - b.slots;
    b.index = 4 * 4 / 3;  // 5.33 bytes at the most load; counted as 5
  }
  return b;
}

uint16_t RoundHalfStochastic(float x, float u) {
  if (std::isnan(x)) return FloatToHalfBits(x);
  const uint16_t sign = std::signbit(x) ? kHalfSign : 0;
  const float a = std::fabs(x);
  if (!(a < 65504.0f)) return sign | kHalfMaxFinite;  // saturate (and inf)
  // The magnitude's bits order the halves (subnormals included), so lo is
  // nearest rounded down and hi = lo + 1 its next neighbour up.
  uint16_t lo = FloatToHalfBits(a);
  if (HalfBitsToFloat(lo) > a) --lo;
  const float low = HalfBitsToFloat(lo);
  if (low == a) return sign | lo;
  const float high = HalfBitsToFloat(static_cast<uint16_t>(lo + 1));
  // a - low is exact (Sterbenz, or low == 0), the quotient within an ulp.
  const float p = (a - low) / (high - low);
  return sign | static_cast<uint16_t>(u < p ? lo + 1 : lo);
}

uint16_t RoundBfloat16Stochastic(float x, uint32_t random16) {
  if (!std::isfinite(x)) return FloatToBfloat16Bits(x);
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof(bits));
  // Adding 16 uniform bits below the kept ones and truncating carries into
  // the kept part with probability (dropped bits) / 2^16: unbiased on the
  // magnitude, which is what the sign-magnitude bits hold.
  const uint32_t rounded = bits + (random16 & 0xFFFFu);
  const uint16_t out = static_cast<uint16_t>(rounded >> 16);
  if ((out & 0x7F80) == 0x7F80) {  // carried into infinity: saturate
    return static_cast<uint16_t>(((bits >> 16) & 0x8000u) | 0x7F7Fu);
  }
  return out;
}

void WidenRow(RowPrecision precision, const void* src, float* dst, int64_t n) {
  if (precision == ROW_FP16) {
    const uint16_t* s = static_cast<const uint16_t*>(src);
    if (row_precision_internal::UseF16c()) {
      row_precision_internal::WidenHalfF16c(s, dst, n);
      return;
    }
    for (int64_t i = 0; i < n; ++i) dst[i] = HalfBitsToFloat(s[i]);
  } else if (precision == ROW_BF16) {
    WidenBfloat16(static_cast<const uint16_t*>(src), dst, n);
  } else {
    std::memcpy(dst, src, n * sizeof(float));
  }
}

void NarrowRowStochastic(RowPrecision precision, const float* src, void* dst,
                         int64_t n, uint64_t seed) {
  if (precision == ROW_FP16) {
    uint16_t* d = static_cast<uint16_t*>(dst);
    if (row_precision_internal::UseF16c()) {
      row_precision_internal::NarrowHalfStochasticF16c(src, d, n, seed);
      return;
    }
    const uint32_t key = RowRoundingKey(seed);
    for (int64_t i = 0; i < n; ++i) {
      d[i] = RoundHalfAt(src[i], key, i);
    }
  } else if (precision == ROW_BF16) {
    uint16_t* d = static_cast<uint16_t*>(dst);
    if (row_precision_internal::UseF16c()) {
      row_precision_internal::NarrowBfloat16StochasticAvx2(src, d, n, seed);
      return;
    }
    const uint32_t key = RowRoundingKey(seed);
    for (int64_t i = 0; i < n; ++i) {
      d[i] = RoundBfloat16At(src[i], key, i);
    }
  } else {
    std::memcpy(dst, src, n * sizeof(float));
  }
}

void NarrowRowNearest(RowPrecision precision, const float* src, void* dst,
                      int64_t n) {
  if (precision == ROW_FP16) {
    uint16_t* d = static_cast<uint16_t*>(dst);
    if (row_precision_internal::UseF16c()) {
      row_precision_internal::NarrowHalfNearestF16c(src, d, n);
      return;
    }
    for (int64_t i = 0; i < n; ++i) {
      const float x = src[i];
      // Saturate as the stochastic rounding does, rather than overflow.
      d[i] = std::fabs(x) > 65504.0f && std::isfinite(x)
                 ? static_cast<uint16_t>((std::signbit(x) ? kHalfSign : 0) |
                                         kHalfMaxFinite)
                 : FloatToHalfBits(x);
    }
  } else if (precision == ROW_BF16) {
    NarrowBfloat16Nearest(src, static_cast<uint16_t*>(dst), n);
  } else {
    std::memcpy(dst, src, n * sizeof(float));
  }
}

}  // namespace tessera
