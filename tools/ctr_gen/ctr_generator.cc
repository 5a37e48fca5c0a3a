#include "tools/ctr_gen/ctr_generator.h"

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
#include "data/criteo/criteo_reader.h"
#include "data/criteo/hex_id.h"
#include "nlohmann/json.hpp"
#include "tools/ctr_gen/hidden_ctr_model.h"

namespace tessera {
namespace {

using ctr_gen::Example;
using ctr_gen::FieldHotness;
using ctr_gen::HiddenModel;
using ctr_gen::kMaxDense;
using ctr_gen::kMaxInteractionDim;
using ctr_gen::kTestStream;
using ctr_gen::kTrainStream;

constexpr int64_t kProgressEvery = 200000;
// Examples per chunk of text made by one thread (about 4 MB with the
// defaults).
constexpr int64_t kChunkExamples = 8192;

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
      AppendHexId(static_cast<uint64_t>(model.Id(f, e.ranks[i])), out);
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

absl::Status ValidateSizes(const CtrGeneratorOptions& o) {
  if (o.train_examples < 1 || o.test_examples < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("train_examples and test_examples must be >= 1, "
                     "got ",
                     o.train_examples, " and ", o.test_examples));
  }
  if (o.num_fields < 0 || o.num_dense < 0 || o.num_dense > kMaxDense) {
    return absl::InvalidArgumentError(
        absl::StrCat("fields must be >= 0 and dense in [0, ", kMaxDense,
                     "], got ", o.num_fields, " and ", o.num_dense));
  }
  return absl::OkStatus();
}

// The pairwise interactions of fields and of dense features.
absl::Status ValidateInteractions(const CtrGeneratorOptions& o) {
  if (o.interaction_fields < 0 || o.interaction_fields > o.num_fields ||
      o.interaction_fields == 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("interaction_fields must be 0 or in [2, fields], got ",
                     o.interaction_fields));
  }
  if (o.interaction_dim < 1 || o.interaction_dim > kMaxInteractionDim) {
    return absl::InvalidArgumentError(
        absl::StrCat("interaction_dim must be in [1, ", kMaxInteractionDim,
                     "], got ", o.interaction_dim));
  }
  if (!(o.interaction_scale >= 0 && o.interaction_scale <= 100) ||
      !(o.dense_cross >= 0 && o.dense_cross <= 100)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "interaction_scale and dense_cross must be in [0, 100], got ",
        o.interaction_scale, " and ", o.dense_cross));
  }
  return absl::OkStatus();
}

// How the ids of the categorical fields are drawn.
absl::Status ValidateIds(const CtrGeneratorOptions& o) {
  if (o.vocab_size < 1 || o.vocab_size > (int64_t{1} << 28)) {
    return absl::InvalidArgumentError(
        absl::StrCat("vocab_size must be in [1, 2^28], got ", o.vocab_size));
  }
  if (!(o.zipf_s > 0 && o.zipf_s < 10)) {
    return absl::InvalidArgumentError(
        absl::StrCat("zipf_s must be in (0, 10), got ", o.zipf_s));
  }
  if (o.multi_hot_fields < 0 || o.multi_hot_fields > o.num_fields) {
    return absl::InvalidArgumentError(absl::StrCat(
        "multi_hot_fields must be in [0, fields], got ", o.multi_hot_fields));
  }
  if (o.hotness.size() > static_cast<size_t>(o.num_fields)) {
    return absl::InvalidArgumentError(
        absl::StrCat("hotness lists ", o.hotness.size(), " fields, there are ",
                     o.num_fields));
  }
  for (size_t f = 0; f < o.hotness.size(); ++f) {
    if (o.hotness[f] < 1 || o.hotness[f] > 1000) {
      return absl::InvalidArgumentError(
          absl::StrCat("hotness of field ", f + 1,
                       " must be in [1, 1000], got ", o.hotness[f]));
    }
  }
  if (o.multi_hot < 1 || o.multi_hot > 1000) {
    return absl::InvalidArgumentError(
        absl::StrCat("multi_hot must be in [1, 1000], got ", o.multi_hot));
  }
  if (o.combiner != "sum" && o.combiner != "mean") {
    return absl::InvalidArgumentError(
        absl::StrCat("combiner must be sum or mean, got \"", o.combiner, "\""));
  }
  if (!(o.missing >= 0 && o.missing < 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("missing must be in [0, 1), got ", o.missing));
  }
  return absl::OkStatus();
}

// The click model: how the label follows from the features.
absl::Status ValidateClickModel(const CtrGeneratorOptions& o) {
  if (!(o.base_ctr > 0 && o.base_ctr < 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("base_ctr must be in (0, 1), got ", o.base_ctr));
  }
  if (!(o.weight_scale >= 0 && o.weight_scale <= 100) ||
      !(o.dense_scale >= 0 && o.dense_scale <= 100)) {
    return absl::InvalidArgumentError(
        absl::StrCat("weight_scale and dense_scale must be in [0, 100], "
                     "got ",
                     o.weight_scale, " and ", o.dense_scale));
  }
  if (!(o.weight_decay_rank > 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "weight_decay_rank must be > 0, got ", o.weight_decay_rank));
  }
  if (!(o.noise >= 0 && o.noise < 0.5)) {
    return absl::InvalidArgumentError(
        absl::StrCat("noise must be in [0, 0.5), got ", o.noise));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateCtrGeneratorOptions(const CtrGeneratorOptions& o) {
  for (absl::Status s : {ValidateSizes(o), ValidateInteractions(o),
                         ValidateIds(o), ValidateClickModel(o)}) {
    if (!s.ok()) return s;
  }
  if (o.threads < 0 || o.threads > 256) {
    return absl::InvalidArgumentError(
        absl::StrCat("threads must be in [0, 256], got ", o.threads));
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
