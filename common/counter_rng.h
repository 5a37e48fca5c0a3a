#ifndef TESSERA_COMMON_COUNTER_RNG_H_
#define TESSERA_COMMON_COUNTER_RNG_H_

#include <cstdint>

// Compiles for the host and for CUDA devices, so the CPU and GPU backends
// draw the same numbers for the same (seed, counter).
#if defined(__CUDACC__)
#define TESSERA_HOST_DEVICE __host__ __device__
#else
#define TESSERA_HOST_DEVICE
#endif

namespace tessera {

// A counter-based generator: the value is a pure function of (seed,
// counter), so any element of any tensor can be drawn independently, in any
// order, on any device, and be reproduced later (dropout masks, initial
// values of a shard wherever it is placed). SplitMix64's finalizer passes
// BigCrush on sequential counters.
TESSERA_HOST_DEVICE inline uint64_t CounterHash(uint64_t seed,
                                                uint64_t counter) {
  uint64_t z = seed * 0xD1B54A32D192ED03ull + counter + 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Uniform in [0, 1) with 24 bits of precision (every value is a float).
TESSERA_HOST_DEVICE inline float CounterUniform(uint64_t seed,
                                                uint64_t counter) {
  return static_cast<float>(CounterHash(seed, counter) >> 40) *
         (1.0f / 16777216.0f);
}

// A 32-bit counter hash, for streams drawn many to a row where 32 bits a
// draw are enough (a stochastic rounding's): key + counter times the
// golden ratio, through Wellons' "lowbias32" finaliser. For one key it is
// a bijection of the counter, and its two 32-bit multiplies are one AVX2
// instruction each for eight lanes, where CounterHash's 64-bit ones take
// three each for four.
constexpr uint32_t kCounterHash32Step = 0x9E3779B9u;
constexpr uint32_t kCounterHash32Mix1 = 0x7FEB352Du;
constexpr uint32_t kCounterHash32Mix2 = 0x846CA68Bu;
TESSERA_HOST_DEVICE inline uint32_t CounterHash32(uint32_t key,
                                                  uint32_t counter) {
  uint32_t z = key + counter * kCounterHash32Step;
  z = (z ^ (z >> 16)) * kCounterHash32Mix1;
  z = (z ^ (z >> 15)) * kCounterHash32Mix2;
  return z ^ (z >> 16);
}

// Mixes a step or layer number into a seed, so streams do not overlap.
TESSERA_HOST_DEVICE inline uint64_t DeriveSeed(uint64_t seed, uint64_t salt) {
  return CounterHash(seed ^ 0x5851F42D4C957F2Dull, salt);
}

}  // namespace tessera

#endif  // TESSERA_COMMON_COUNTER_RNG_H_
