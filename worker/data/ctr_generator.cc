#include "worker/data/ctr_generator.h"

#include <zlib.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <memory>
#include <thread>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/binary_metrics.h"
#include "common/counter_rng.h"
#include "nlohmann/json.hpp"
#include "worker/data/criteo_reader.h"

namespace tessera {
namespace {

// Salts of the independent streams drawn from the seed.
constexpr uint64_t kTrainStream = 1;
constexpr uint64_t kTestStream = 2;
constexpr uint64_t kCalibrationStream = 3;
constexpr uint64_t kFieldScaleStream = 4;
constexpr uint64_t kDenseStream = 5;
constexpr uint64_t kCrossStream = 6;
constexpr uint64_t kWeightStream = 1000;     // + field
constexpr uint64_t kIdHashStream = 1000000;  // + field
constexpr uint64_t kLatentStream = 2000000;  // + field
constexpr int64_t kCalibrationExamples = 20000;
constexpr int64_t kProgressEvery = 200000;
constexpr double kNegativeCount = 0.005;  // share of integers written as -1
constexpr int kMaxInteractionDim = 64;
constexpr int kMaxDense = 1024;
// Examples per chunk of text made by one thread (about 4 MB with the
// defaults).
constexpr int64_t kChunkExamples = 8192;

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

int FieldHotness(const CtrGeneratorOptions& o, int field) {
  if (o.hotness.empty()) return field < o.multi_hot_fields ? o.multi_hot : 1;
  return field < static_cast<int>(o.hotness.size()) ? o.hotness[field] : 1;
}

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
  explicit HiddenModel(const CtrGeneratorOptions& o)
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
        weights_[f][r] = static_cast<float>(s * w.Normal() /
                                            (1.0 + r / o.weight_decay_rank));
      }
      id_seeds_[f] = DeriveSeed(o.seed, kIdHashStream + f);
    }
    for (int f = 0; f < o.num_fields; ++f) {
      const bool listed = !o.hotness.empty();
      hotness_.push_back(listed                   ? FieldHotness(o, f)
                         : f < o.multi_hot_fields ? o.multi_hot
                                                  : 1);
      multi_hot_.push_back(listed ? hotness_.back() > 1
                                  : f < o.multi_hot_fields);
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
    const double pairs =
        0.5 * o.interaction_fields * (o.interaction_fields - 1);
    latent_.resize(o.interaction_fields);
    for (int f = 0; f < o.interaction_fields; ++f) {
      Stream u(DeriveSeed(o.seed, kLatentStream + f));
      const double scale = std::sqrt(o.interaction_scale) /
                           std::pow(std::max(1.0, pairs) * k, 0.25);
      latent_[f].resize(o.vocab_size * k);
      for (int64_t r = 0; r < o.vocab_size; ++r) {
        const double decay = 1.0 / (1.0 + r / o.weight_decay_rank);
        for (int c = 0; c < k; ++c) {
          latent_[f][r * k + c] =
              static_cast<float>(scale * decay * u.Normal());
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
  void Draw(uint64_t salt, int64_t index, Example* e) const {
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

 private:
  static AliasTable ZipfWeights(int64_t vocab, double s) {
    std::vector<double> w(vocab);
    for (int64_t r = 0; r < vocab; ++r) w[r] = std::pow(r + 1.0, -s);
    return AliasTable(w);
  }

  // The bias that makes the mean click probability base_ctr (before the
  // label noise), on a sample of its own.
  double CalibrateBias() {
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

// A plain or gzip output file.
class OutputFile {
 public:
  static absl::StatusOr<std::unique_ptr<OutputFile>> Open(
      const std::string& path, bool gzip) {
    std::unique_ptr<OutputFile> out(new OutputFile(path));
    if (gzip) {
      // Level 1: several times faster than the default, files a bit larger.
      out->gz_ = gzopen(path.c_str(), "wb1");
      if (out->gz_ != nullptr) gzbuffer(out->gz_, 1 << 20);
    } else {
      out->plain_ = std::fopen(path.c_str(), "wb");
    }
    if (out->gz_ == nullptr && out->plain_ == nullptr) {
      return absl::ErrnoToStatus(errno, absl::StrCat(path, ": cannot create"));
    }
    return out;
  }
  ~OutputFile() { Close().IgnoreError(); }

  absl::Status Write(const std::string& data) {
    if (data.empty()) return absl::OkStatus();
    const bool ok =
        gz_ != nullptr
            ? gzwrite(gz_, data.data(), static_cast<unsigned>(data.size())) ==
                  static_cast<int>(data.size())
            : std::fwrite(data.data(), 1, data.size(), plain_) == data.size();
    if (!ok) return absl::ErrnoToStatus(errno, absl::StrCat(path_, ": write"));
    return absl::OkStatus();
  }

  absl::Status Close() {
    int rc = 0;
    if (gz_ != nullptr) rc = gzclose(gz_) == Z_OK ? 0 : -1;
    if (plain_ != nullptr) rc = std::fclose(plain_);
    gz_ = nullptr;
    plain_ = nullptr;
    if (rc != 0)
      return absl::ErrnoToStatus(errno, absl::StrCat(path_, ": close"));
    return absl::OkStatus();
  }

 private:
  explicit OutputFile(std::string path) : path_(std::move(path)) {}
  const std::string path_;
  gzFile gz_ = nullptr;
  std::FILE* plain_ = nullptr;
};

void AppendLine(const HiddenModel& model, const Example& e, int num_fields,
                std::string* out) {
  static constexpr char kHex[] = "0123456789abcdef";
  out->push_back(e.label == 1.0f ? '1' : '0');
  char digits[24];
  for (size_t j = 0; j < e.counts.size(); ++j) {
    out->push_back('\t');
    if (e.count_missing[j]) continue;
    const auto r = std::to_chars(digits, digits + sizeof(digits), e.counts[j]);
    out->append(digits, r.ptr);
  }
  for (int f = 0; f < num_fields; ++f) {
    out->push_back('\t');
    for (int32_t i = e.rank_offsets[f]; i < e.rank_offsets[f + 1]; ++i) {
      if (i > e.rank_offsets[f]) out->push_back(',');
      const uint64_t id = static_cast<uint64_t>(model.Id(f, e.ranks[i]));
      for (int k = 15; k >= 0; --k) digits[15 - k] = kHex[(id >> (4 * k)) & 15];
      out->append(digits, 16);
    }
  }
  out->push_back('\n');
}

struct SetResult {
  double positive_rate = 0, auc = 0, log_loss = 0;
};

absl::StatusOr<SetResult> WriteSet(
    const HiddenModel& model, const CtrGeneratorOptions& o, uint64_t salt,
    int64_t examples, const std::string& path,
    const std::function<void(const std::string&)>& progress) {
  absl::StatusOr<std::unique_ptr<OutputFile>> file =
      OutputFile::Open(path, o.gzip);
  if (!file.ok()) return file.status();
  const auto start = std::chrono::steady_clock::now();
  std::vector<float> probabilities(examples), labels(examples);
  const int threads =
      o.threads > 0
          ? o.threads
          : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  // Rounds of one chunk per thread, made in parallel and written in order:
  // every example comes from its own stream, so the bytes do not depend on
  // the number of threads.
  std::vector<std::string> chunks(threads);
  int64_t next_progress = kProgressEvery;
  for (int64_t round = 0; round < examples;
       round += int64_t{threads} * kChunkExamples) {
    auto make_chunk = [&](int t) {
      const int64_t begin = round + t * kChunkExamples;
      const int64_t end = std::min(examples, begin + kChunkExamples);
      std::string& text = chunks[t];
      text.clear();
      Example e;
      for (int64_t i = begin; i < end; ++i) {
        model.Draw(salt, i, &e);
        probabilities[i] = e.probability;
        labels[i] = e.label;
        AppendLine(model, e, o.num_fields, &text);
      }
    };
    std::vector<std::thread> pool;
    for (int t = 1; t < threads; ++t) pool.emplace_back(make_chunk, t);
    make_chunk(0);
    for (std::thread& thread : pool) thread.join();
    for (const std::string& text : chunks) {
      if (absl::Status s = (*file)->Write(text); !s.ok()) return s;
    }
    const int64_t done =
        std::min(examples, round + int64_t{threads} * kChunkExamples);
    if (progress && done >= next_progress && done < examples) {
      next_progress = done + kProgressEvery;
      const double seconds = std::chrono::duration<double>(
                                 std::chrono::steady_clock::now() - start)
                                 .count();
      progress(absl::StrFormat("%s: %d / %d examples (%.1f s)", path, done,
                               examples, seconds));
    }
  }
  if (absl::Status s = (*file)->Close(); !s.ok()) return s;

  SetResult result;
  double positives = 0;
  for (float l : labels) positives += l;
  result.positive_rate = positives / examples;
  // AUC is undefined for a set of one class (only tiny ones): NaN.
  absl::StatusOr<double> auc = RocAuc(probabilities, labels);
  result.auc = auc.ok() ? *auc : std::numeric_limits<double>::quiet_NaN();
  absl::StatusOr<double> log_loss = LogLoss(probabilities, labels);
  if (!log_loss.ok()) return log_loss.status();
  result.log_loss = *log_loss;
  if (progress) {
    progress(absl::StrFormat(
        "%s: %d examples, %.4f positive, best AUC %.4f (%.1f s)", path,
        examples, result.positive_rate, result.auc,
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count()));
  }
  return result;
}

nlohmann::json JsonNumber(double x) {
  return std::isfinite(x) ? nlohmann::json(x) : nlohmann::json(nullptr);
}

}  // namespace

absl::Status ValidateCtrGeneratorOptions(const CtrGeneratorOptions& o) {
  auto bad = [](absl::string_view what) {
    return absl::InvalidArgumentError(what);
  };
  if (o.train_examples < 1 || o.test_examples < 1) {
    return bad(
        absl::StrCat("train_examples and test_examples must be >= 1, "
                     "got ",
                     o.train_examples, " and ", o.test_examples));
  }
  if (o.num_fields < 0 || o.num_dense < 0 || o.num_dense > kMaxDense) {
    return bad(absl::StrCat("fields must be >= 0 and dense in [0, ", kMaxDense,
                            "], got ", o.num_fields, " and ", o.num_dense));
  }
  if (o.interaction_fields < 0 || o.interaction_fields > o.num_fields ||
      o.interaction_fields == 1) {
    return bad(
        absl::StrCat("interaction_fields must be 0 or in [2, fields], got ",
                     o.interaction_fields));
  }
  if (o.interaction_dim < 1 || o.interaction_dim > kMaxInteractionDim) {
    return bad(absl::StrCat("interaction_dim must be in [1, ",
                            kMaxInteractionDim, "], got ", o.interaction_dim));
  }
  if (!(o.interaction_scale >= 0 && o.interaction_scale <= 100) ||
      !(o.dense_cross >= 0 && o.dense_cross <= 100)) {
    return bad(absl::StrCat(
        "interaction_scale and dense_cross must be in [0, 100], got ",
        o.interaction_scale, " and ", o.dense_cross));
  }
  if (o.vocab_size < 1 || o.vocab_size > (int64_t{1} << 28)) {
    return bad(
        absl::StrCat("vocab_size must be in [1, 2^28], got ", o.vocab_size));
  }
  if (!(o.zipf_s > 0 && o.zipf_s < 10)) {
    return bad(absl::StrCat("zipf_s must be in (0, 10), got ", o.zipf_s));
  }
  if (o.multi_hot_fields < 0 || o.multi_hot_fields > o.num_fields) {
    return bad(absl::StrCat("multi_hot_fields must be in [0, fields], got ",
                            o.multi_hot_fields));
  }
  if (o.hotness.size() > static_cast<size_t>(o.num_fields)) {
    return bad(absl::StrCat("hotness lists ", o.hotness.size(),
                            " fields, there are ", o.num_fields));
  }
  for (size_t f = 0; f < o.hotness.size(); ++f) {
    if (o.hotness[f] < 1 || o.hotness[f] > 1000) {
      return bad(absl::StrCat("hotness of field ", f + 1,
                              " must be in [1, 1000], got ", o.hotness[f]));
    }
  }
  if (o.multi_hot < 1 || o.multi_hot > 1000) {
    return bad(
        absl::StrCat("multi_hot must be in [1, 1000], got ", o.multi_hot));
  }
  if (o.combiner != "sum" && o.combiner != "mean") {
    return bad(
        absl::StrCat("combiner must be sum or mean, got \"", o.combiner, "\""));
  }
  if (!(o.missing >= 0 && o.missing < 1)) {
    return bad(absl::StrCat("missing must be in [0, 1), got ", o.missing));
  }
  if (!(o.base_ctr > 0 && o.base_ctr < 1)) {
    return bad(absl::StrCat("base_ctr must be in (0, 1), got ", o.base_ctr));
  }
  if (!(o.weight_scale >= 0 && o.weight_scale <= 100) ||
      !(o.dense_scale >= 0 && o.dense_scale <= 100)) {
    return bad(
        absl::StrCat("weight_scale and dense_scale must be in [0, 100], "
                     "got ",
                     o.weight_scale, " and ", o.dense_scale));
  }
  if (!(o.weight_decay_rank > 0)) {
    return bad(absl::StrCat("weight_decay_rank must be > 0, got ",
                            o.weight_decay_rank));
  }
  if (o.threads < 0 || o.threads > 256) {
    return bad(absl::StrCat("threads must be in [0, 256], got ", o.threads));
  }
  if (!(o.noise >= 0 && o.noise < 0.5)) {
    return bad(absl::StrCat("noise must be in [0, 0.5), got ", o.noise));
  }
  return absl::OkStatus();
}

absl::StatusOr<CtrGeneratorSummary> GenerateCtrFiles(
    const CtrGeneratorOptions& o, const std::string& out_dir,
    const std::function<void(const std::string&)>& progress) {
  if (absl::Status s = ValidateCtrGeneratorOptions(o); !s.ok()) return s;
  const std::string prefix = (out_dir.empty() || out_dir.back() == '/')
                                 ? out_dir
                                 : absl::StrCat(out_dir, "/");
  const std::string ext = o.gzip ? ".tsv.gz" : ".tsv";
  CtrGeneratorSummary summary;
  summary.train_path = absl::StrCat(prefix, "train", ext);
  summary.test_path = absl::StrCat(prefix, "test", ext);
  summary.meta_path = absl::StrCat(prefix, "meta.json");

  const HiddenModel model(o);
  summary.bias = model.bias();
  absl::StatusOr<SetResult> train = WriteSet(
      model, o, kTrainStream, o.train_examples, summary.train_path, progress);
  if (!train.ok()) return train.status();
  absl::StatusOr<SetResult> test = WriteSet(
      model, o, kTestStream, o.test_examples, summary.test_path, progress);
  if (!test.ok()) return test.status();
  summary.train_positive_rate = train->positive_rate;
  summary.test_positive_rate = test->positive_rate;
  summary.best_auc = test->auc;
  summary.best_log_loss = test->log_loss;
  summary.best_auc_train = train->auc;
  summary.best_log_loss_train = train->log_loss;

  nlohmann::json meta;
  meta["format"] = "criteo-tsv";
  meta["train_file"] = summary.train_path.substr(prefix.size());
  meta["test_file"] = summary.test_path.substr(prefix.size());
  meta["train_examples"] = o.train_examples;
  meta["test_examples"] = o.test_examples;
  meta["fields"] = o.num_fields;
  meta["dense"] = o.num_dense;
  meta["vocab_size"] = o.vocab_size;
  meta["zipf_s"] = o.zipf_s;
  meta["multi_hot_fields"] = o.multi_hot_fields;
  meta["multi_hot"] = o.multi_hot;
  std::vector<int> hotness;
  for (int f = 0; f < o.num_fields; ++f) hotness.push_back(FieldHotness(o, f));
  meta["hotness"] = hotness;  // most ids per field, whichever option set it
  meta["combiner"] = o.combiner;
  meta["missing"] = o.missing;
  meta["base_ctr"] = o.base_ctr;
  meta["weight_scale"] = o.weight_scale;
  meta["weight_decay_rank"] = o.weight_decay_rank;
  meta["dense_scale"] = o.dense_scale;
  meta["noise"] = o.noise;
  meta["interaction_fields"] = o.interaction_fields;
  meta["interaction_dim"] = o.interaction_dim;
  meta["interaction_scale"] = o.interaction_scale;
  meta["dense_cross"] = o.dense_cross;
  meta["seed"] = o.seed;
  meta["gzip"] = o.gzip;
  meta["bias"] = summary.bias;
  meta["train_positive_rate"] = summary.train_positive_rate;
  meta["test_positive_rate"] = summary.test_positive_rate;
  meta["best_auc"] = JsonNumber(summary.best_auc);
  meta["best_log_loss"] = JsonNumber(summary.best_log_loss);
  meta["best_auc_train"] = JsonNumber(summary.best_auc_train);
  meta["best_log_loss_train"] = JsonNumber(summary.best_log_loss_train);
  absl::StatusOr<std::unique_ptr<OutputFile>> file =
      OutputFile::Open(summary.meta_path, /*gzip=*/false);
  if (!file.ok()) return file.status();
  if (absl::Status s = (*file)->Write(meta.dump(2) + "\n"); !s.ok()) return s;
  if (absl::Status s = (*file)->Close(); !s.ok()) return s;
  return summary;
}

absl::StatusOr<std::vector<float>> TrueCtrProbabilities(
    const CtrGeneratorOptions& o, const CtrDataset& data) {
  if (absl::Status s = ValidateCtrGeneratorOptions(o); !s.ok()) return s;
  if (data.num_fields != o.num_fields || data.num_dense != o.num_dense) {
    return absl::InvalidArgumentError(absl::StrCat(
        "data set has ", data.num_fields, " fields and ", data.num_dense,
        " dense features, the generator ", o.num_fields, " and ", o.num_dense));
  }
  const HiddenModel model(o);
  std::vector<absl::flat_hash_map<int64_t, int32_t>> rank_of(o.num_fields);
  for (int f = 0; f < o.num_fields; ++f) {
    rank_of[f].reserve(o.vocab_size);
    for (int64_t r = 0; r < o.vocab_size; ++r) {
      rank_of[f][model.Id(f, static_cast<int32_t>(r))] =
          static_cast<int32_t>(r);
    }
  }
  std::vector<float> probabilities(data.size);
  for (int64_t i = 0; i < data.size; ++i) {
    absl::Status bad_id;
    const double logit = model.Logit(
        [&](int f, auto&& visit) {
          const CtrFieldColumn& column = data.fields[f];
          for (uint32_t k = column.offsets[i]; k < column.offsets[i + 1]; ++k) {
            auto it = rank_of[f].find(column.ids[k]);
            if (it == rank_of[f].end()) {
              if (bad_id.ok()) {
                bad_id = absl::InvalidArgumentError(absl::StrFormat(
                    "example %d field %d: id %016x is not one the generator "
                    "writes",
                    i, f, static_cast<uint64_t>(column.ids[k])));
              }
              continue;
            }
            visit(it->second);
          }
        },
        [&](int j) { return data.dense_row(i)[j]; });
    if (!bad_id.ok()) return bad_id;
    probabilities[i] = static_cast<float>(model.Probability(logit));
  }
  return probabilities;
}

}  // namespace tessera
