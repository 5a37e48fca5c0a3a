#ifndef TESSERA_PS_SERVER_GRADIENT_CHECK_H_
#define TESSERA_PS_SERVER_GRADIENT_CHECK_H_

#include <cmath>
#include <cstdint>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "common/optimizer/row_precision.h"

namespace tessera {
namespace internal {

// 1 when any of the n floats at `p` is NaN or infinite. Works on whole
// blocks whose exponent tests GCC vectorises even at -O2; one pass.
inline uint32_t AnyNonFinite(const float* p, size_t n) {
  constexpr size_t kBlock = 16;
  uint32_t bad = 0;
  size_t i = 0;
  for (; i + kBlock <= n; i += kBlock) {
    uint32_t block = 0;
    for (size_t j = 0; j < kBlock; ++j) {
      uint32_t b;
      std::memcpy(&b, p + i + j, sizeof(b));
      block |= static_cast<uint32_t>((b & 0x7F800000u) == 0x7F800000u);
    }
    bad |= block;
  }
  for (; i < n; ++i) {
    uint32_t b;
    std::memcpy(&b, p + i, sizeof(b));
    bad |= static_cast<uint32_t>((b & 0x7F800000u) == 0x7F800000u);
  }
  return bad;
}

inline absl::Status NameNonFinite(absl::Span<const float> grad,
                                  absl::string_view shard,
                                  int64_t first_element) {
  for (size_t i = 0; i < grad.size(); ++i) {
    if (!std::isfinite(grad[i])) {
      return absl::InvalidArgumentError(absl::StrCat(
          "non-finite gradient for shard ", shard, ": element ",
          first_element + static_cast<int64_t>(i), " is ", grad[i]));
    }
  }
  return absl::OkStatus();
}

}  // namespace internal

// InvalidArgument naming the shard and the first element that is NaN or
// infinite; `first_element` is the index of grad[0] within the shard. A
// non-finite gradient would poison the shard and every later pull, so it
// is refused before anything is applied.
inline absl::Status CheckFinite(absl::Span<const float> grad,
                                absl::string_view shard,
                                int64_t first_element) {
  if (internal::AnyNonFinite(grad.data(), grad.size()) == 0) {
    return absl::OkStatus();
  }
  return internal::NameNonFinite(grad, shard, first_element);
}

// Copies n floats from `src` (any alignment) to `dst` and checks them in
// the same pass, as CheckFinite does; received bytes are touched once.
inline absl::Status CopyAndCheckFinite(const char* src, size_t n, float* dst,
                                       absl::string_view shard,
                                       int64_t first_element) {
  std::memcpy(dst, src, n * sizeof(float));
  // The copy leaves the block in cache for the check at these chunk sizes.
  return CheckFinite(absl::MakeConstSpan(dst, n), shard, first_element);
}

// The same for n gradient values that travelled in `precision`
// (proto RowsChunk.precision; fp16 and bf16 take 2 bytes each): widened
// to fp32 into `dst`, which is exact, then checked.
inline absl::Status WidenAndCheckFinite(RowPrecision precision, const char* src,
                                        size_t n, float* dst,
                                        absl::string_view shard,
                                        int64_t first_element) {
  if (precision == ROW_FP32) {
    return CopyAndCheckFinite(src, n, dst, shard, first_element);
  }
  WidenRow(precision, src, dst, static_cast<int64_t>(n));
  return CheckFinite(absl::MakeConstSpan(dst, n), shard, first_element);
}

}  // namespace tessera

#endif  // TESSERA_PS_SERVER_GRADIENT_CHECK_H_
