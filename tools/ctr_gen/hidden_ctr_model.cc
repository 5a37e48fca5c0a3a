#include "tools/ctr_gen/hidden_ctr_model.h"

#include <algorithm>

#include "data/criteo/criteo_reader.h"

namespace tessera {
namespace ctr_gen {
namespace {

// Salts of the independent streams drawn from the seed.
constexpr uint64_t kCalibrationStream = 3;
constexpr uint64_t kFieldScaleStream = 4;
constexpr uint64_t kDenseStream = 5;
constexpr uint64_t kCrossStream = 6;
constexpr uint64_t kWeightStream = 1000;     // + field
constexpr uint64_t kIdHashStream = 1000000;  // + field
constexpr uint64_t kLatentStream = 2000000;  // + field
constexpr int64_t kCalibrationExamples = 20000;
constexpr double kNegativeCount = 0.005;  // share of integers written as -1

}  // namespace

int FieldHotness(const CtrGeneratorOptions& o, int field) {
  if (o.hotness.empty()) return field < o.multi_hot_fields ? o.multi_hot : 1;
  return field < static_cast<int>(o.hotness.size()) ? o.hotness[field] : 1;
}

HiddenModel::HiddenModel(const CtrGeneratorOptions& o)
    : o_(o),
      zipf_(ZipfWeights(o.vocab_size, o.zipf_s)),
      mean_(o.combiner == "mean") {
  Stream scales(DeriveSeed(o.seed, kFieldScaleStream));
  weights_.resize(o.num_fields);
  id_seeds_.resize(o.num_fields);
  for (int f = 0; f < o.num_fields; ++f) {
    const double s = o.weight_scale * (0.25 + 0.75 * scales.Uniform());
    Stream w(DeriveSeed(o.seed, kWeightStream + f));
    weights_[f].resize(o.vocab_size);
    for (int64_t r = 0; r < o.vocab_size; ++r) {
      weights_[f][r] =
          static_cast<float>(s * w.Normal() / (1.0 + r / o.weight_decay_rank));
    }
    id_seeds_[f] = DeriveSeed(o.seed, kIdHashStream + f);
  }
  for (int f = 0; f < o.num_fields; ++f) {
    const bool listed = !o.hotness.empty();
    hotness_.push_back(listed                   ? FieldHotness(o, f)
                       : f < o.multi_hot_fields ? o.multi_hot
                                                : 1);
    multi_hot_.push_back(listed ? hotness_.back() > 1 : f < o.multi_hot_fields);
  }
  Stream dense(DeriveSeed(o.seed, kDenseStream));
  for (int j = 0; j < o.num_dense; ++j) {
    log_mean_.push_back(0.5 + 2.5 * dense.Uniform());
    log_sd_.push_back(0.5 + dense.Uniform());
    slope_.push_back(o.dense_scale * dense.Normal());
  }
  const int k = o.interaction_dim;
  // A dot product of two vectors with components of spread sigma has
  // variance k sigma^4; over P pairs, P k sigma^4 = interaction_scale^2.
  const double pairs = 0.5 * o.interaction_fields * (o.interaction_fields - 1);
  latent_.resize(o.interaction_fields);
  for (int f = 0; f < o.interaction_fields; ++f) {
    Stream u(DeriveSeed(o.seed, kLatentStream + f));
    const double scale = std::sqrt(o.interaction_scale) /
                         std::pow(std::max(1.0, pairs) * k, 0.25);
    latent_[f].resize(o.vocab_size * k);
    for (int64_t r = 0; r < o.vocab_size; ++r) {
      const double decay = 1.0 / (1.0 + r / o.weight_decay_rank);
      for (int c = 0; c < k; ++c) {
        latent_[f][r * k + c] = static_cast<float>(scale * decay * u.Normal());
      }
    }
  }
  if (o.dense_cross > 0) {
    Stream cross(DeriveSeed(o.seed, kCrossStream));
    cross_.resize(o.num_dense * o.num_dense, 0.0);
    for (int j = 0; j < o.num_dense; ++j) {
      for (int l = j + 1; l < o.num_dense; ++l) {
        cross_[j * o.num_dense + l] =
            o.dense_cross * cross.Normal() / o.num_dense;
      }
    }
  }
  bias_ = CalibrateBias();
}

void HiddenModel::Draw(uint64_t salt, int64_t index, Example* e) const {
  Stream s(DeriveSeed(DeriveSeed(o_.seed, salt), index));
  e->counts.assign(o_.num_dense, 0);
  e->count_missing.assign(o_.num_dense, false);
  for (int j = 0; j < o_.num_dense; ++j) {
    if (s.Uniform() < o_.missing) {
      e->count_missing[j] = true;
    } else if (s.Uniform() < kNegativeCount) {
      e->counts[j] = -1;
    } else {
      const double x = std::exp(log_mean_[j] + log_sd_[j] * s.Normal());
      e->counts[j] = static_cast<int64_t>(std::max(0.0, std::floor(x - 1)));
    }
  }
  e->rank_offsets.assign(1, 0);
  e->ranks.clear();
  for (int f = 0; f < o_.num_fields; ++f) {
    if (s.Uniform() >= o_.missing) {
      const int n =
          multi_hot_[f] ? 1 + static_cast<int>(s.Below(hotness_[f])) : 1;
      for (int i = 0; i < n; ++i) e->ranks.push_back(zipf_.Sample(&s));
    }
    e->rank_offsets.push_back(static_cast<int32_t>(e->ranks.size()));
  }
  const double logit = Logit(
      [&](int f, auto&& visit) {
        for (int32_t i = e->rank_offsets[f]; i < e->rank_offsets[f + 1]; ++i)
          visit(e->ranks[i]);
      },
      [&](int j) {
        return e->count_missing[j] ? 0.0f : CriteoDenseValue(e->counts[j]);
      });
  e->logit = logit;
  const double p = Probability(logit);
  e->probability = static_cast<float>(p);
  e->label = s.Uniform() < p ? 1.0f : 0.0f;
}

AliasTable HiddenModel::ZipfWeights(int64_t vocab, double s) {
  std::vector<double> w(vocab);
  for (int64_t r = 0; r < vocab; ++r) w[r] = std::pow(r + 1.0, -s);
  return AliasTable(w);
}

double HiddenModel::CalibrateBias() {
  std::vector<double> logits;
  Example e;
  for (int64_t i = 0; i < kCalibrationExamples; ++i) {
    Draw(kCalibrationStream, i, &e);
    logits.push_back(e.logit);
  }
  double lo = -40, hi = 40;
  for (int it = 0; it < 100; ++it) {
    const double mid = 0.5 * (lo + hi);
    double mean = 0;
    for (double l : logits) mean += 1.0 / (1.0 + std::exp(-(l + mid)));
    mean /= logits.size();
    (mean < o_.base_ctr ? lo : hi) = mid;
  }
  return 0.5 * (lo + hi);
}

}  // namespace ctr_gen
}  // namespace tessera
