// The click-through generator's hidden model (ctr_generator.h describes
// it): the weights, latent vectors and integer-column laws drawn from the
// seed, the bias that gives the base click rate, and the draw of one
// example from its own counter stream, so that any example can be made
// alone and the output does not depend on how the work is split.
#ifndef TESSERA_TOOLS_CTR_GEN_HIDDEN_CTR_MODEL_H_
#define TESSERA_TOOLS_CTR_GEN_HIDDEN_CTR_MODEL_H_

#include <cmath>
#include <cstdint>
#include <vector>

#include "common/counter_rng.h"
#include "tools/ctr_gen/ctr_generator.h"

namespace tessera {
namespace ctr_gen {

// Salts of the training and test sets' streams drawn from the seed.
constexpr uint64_t kTrainStream = 1;
constexpr uint64_t kTestStream = 2;
// Bounds of the options (ValidateCtrGeneratorOptions checks them).
constexpr int kMaxInteractionDim = 64;
constexpr int kMaxDense = 1024;

// Draws from a (seed, counter) stream: each example gets its own, so any
// example can be made alone and the output does not depend on chunking.
class Stream {
 public:
  explicit Stream(uint64_t seed) : seed_(seed) {}
  uint64_t Next() { return CounterHash(seed_, counter_++); }
  // Uniform in [0, 1) with 53 bits.
  double Uniform() { return (Next() >> 11) * (1.0 / 9007199254740992.0); }
  double Normal() {
    // Box-Muller; 1 - u keeps the logarithm finite.
    const double u = 1.0 - Uniform(), v = Uniform();
    return std::sqrt(-2.0 * std::log(u)) * std::cos(6.283185307179586 * v);
  }
  // Uniform in [0, n).
  uint64_t Below(uint64_t n) {
    return static_cast<uint64_t>((static_cast<unsigned __int128>(Next()) * n) >>
                                 64);
  }

 private:
  const uint64_t seed_;
  uint64_t counter_ = 0;
};

// Vose's alias method: O(1) draws from a fixed discrete distribution. An
// entry's threshold and alias share a cache line, so a draw from a large
// vocabulary costs one cache miss.
class AliasTable {
 public:
  explicit AliasTable(const std::vector<double>& weights) {
    const int64_t n = static_cast<int64_t>(weights.size());
    double total = 0;
    for (double w : weights) total += w;
    std::vector<double> scaled(n);
    std::vector<int64_t> small, large;
    for (int64_t i = 0; i < n; ++i) {
      scaled[i] = weights[i] * n / total;
      (scaled[i] < 1 ? small : large).push_back(i);
    }
    entries_.resize(n);
    for (int64_t i = 0; i < n; ++i) {
      entries_[i] = {1.0f, static_cast<int32_t>(i)};
    }
    while (!small.empty() && !large.empty()) {
      const int64_t s = small.back(), l = large.back();
      small.pop_back();
      entries_[s] = {static_cast<float>(scaled[s]), static_cast<int32_t>(l)};
      scaled[l] -= 1 - scaled[s];
      if (scaled[l] < 1) {
        large.pop_back();
        small.push_back(l);
      }
    }
  }

  int32_t Sample(Stream* stream) const {
    const uint64_t bits = stream->Next();
    // High bits pick the entry, the low 24 the coin.
    const uint64_t i = static_cast<uint64_t>(
        (static_cast<unsigned __int128>(bits) * entries_.size()) >> 64);
    const float coin =
        static_cast<float>(bits & 0xFFFFFF) * (1.0f / 16777216.0f);
    const Entry& e = entries_[i];
    return coin < e.keep ? static_cast<int32_t>(i) : e.alias;
  }

 private:
  struct Entry {
    float keep;
    int32_t alias;
  };
  std::vector<Entry> entries_;
};

// The most ids of field `field`'s bag.
int FieldHotness(const CtrGeneratorOptions& o, int field);

// One example before it is written: ranks, not ids.
struct Example {
  float label = 0;
  double logit = 0;                   // without the bias
  float probability = 0;              // of a click, with the label noise
  std::vector<int64_t> counts;        // per integer column
  std::vector<bool> count_missing;    // per integer column
  std::vector<int32_t> rank_offsets;  // num_fields + 1
  std::vector<int32_t> ranks;
};

// The hidden model and the example distribution.
class HiddenModel {
 public:
  explicit HiddenModel(const CtrGeneratorOptions& o);

  double bias() const { return bias_; }
  int64_t Id(int field, int32_t rank) const {
    return static_cast<int64_t>(CounterHash(id_seeds_[field], rank));
  }

  // The logit without the bias. field_ranks(f, visit) calls visit(rank)
  // for each id of field f in order; dense_value(j) is the reader's feature
  // of integer column j. The generator and TrueCtrProbabilities share this
  // code, so they compute the same doubles.
  template <typename FieldRanks, typename DenseValue>
  double Logit(FieldRanks field_ranks, DenseValue dense_value) const {
    const int k = o_.interaction_dim;
    // The factorization machine's pair sum as 0.5 * (|sum u|^2 - sum |u|^2).
    double fm_total[kMaxInteractionDim] = {};
    double fm_squares = 0;
    double logit = 0;
    for (int f = 0; f < o_.num_fields; ++f) {
      const bool interacts = f < o_.interaction_fields;
      double sum = 0;
      double u[kMaxInteractionDim] = {};
      int n = 0;
      field_ranks(f, [&](int32_t rank) {
        sum += weights_[f][rank];
        if (interacts) {
          const float* v = &latent_[f][int64_t{rank} * k];
          for (int c = 0; c < k; ++c) u[c] += v[c];
        }
        ++n;
      });
      if (mean_ && n > 0) {
        sum /= n;
        for (int c = 0; c < k; ++c) u[c] /= n;
      }
      logit += sum;
      if (interacts) {
        for (int c = 0; c < k; ++c) {
          fm_total[c] += u[c];
          fm_squares += u[c] * u[c];
        }
      }
    }
    if (o_.interaction_fields > 0) {
      double total_square = 0;
      for (int c = 0; c < k; ++c) total_square += fm_total[c] * fm_total[c];
      logit += 0.5 * (total_square - fm_squares);
    }
    double centred[kMaxDense];
    for (int j = 0; j < o_.num_dense; ++j) {
      centred[j] = static_cast<double>(dense_value(j)) - log_mean_[j];
      logit += slope_[j] * centred[j];
    }
    if (!cross_.empty()) {
      for (int j = 0; j < o_.num_dense; ++j) {
        for (int l = j + 1; l < o_.num_dense; ++l) {
          logit += cross_[j * o_.num_dense + l] * centred[j] * centred[l];
        }
      }
    }
    return logit;
  }

  // The click probability, with the label noise, for a logit without bias.
  double Probability(double logit) const {
    const double p = 1.0 / (1.0 + std::exp(-(logit + bias_)));
    return o_.noise + (1 - 2 * o_.noise) * p;
  }

  // Draws example `index` of the stream `salt` into *e.
  void Draw(uint64_t salt, int64_t index, Example* e) const;

 private:
  static AliasTable ZipfWeights(int64_t vocab, double s);

  // The bias that makes the mean click probability base_ctr (before the
  // label noise), on a sample of its own.
  double CalibrateBias();

  const CtrGeneratorOptions o_;
  const AliasTable zipf_;
  const bool mean_;
  std::vector<std::vector<float>> weights_;  // [field][rank]
  std::vector<int> hotness_;                 // most ids per field
  std::vector<bool> multi_hot_;              // draws its bag's size
  std::vector<std::vector<float>> latent_;   // [field][rank * dim + c]
  std::vector<double> cross_;                // [j * num_dense + l], j < l
  std::vector<uint64_t> id_seeds_;
  std::vector<double> log_mean_, log_sd_, slope_;
  double bias_ = 0;
};

}  // namespace ctr_gen
}  // namespace tessera

#endif  // TESSERA_TOOLS_CTR_GEN_HIDDEN_CTR_MODEL_H_
