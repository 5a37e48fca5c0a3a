#include "tools/ctr_gen/ctr_generator.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/binary_metrics.h"
#include "data/criteo/criteo_reader.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace tessera {
namespace {

using ::testing::HasSubstr;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in),
                     std::istreambuf_iterator<char>());
}

CtrGeneratorOptions Small() {
  CtrGeneratorOptions o;
  o.train_examples = 3000;
  o.test_examples = 2000;
  o.num_fields = 5;
  o.num_dense = 3;
  o.vocab_size = 500;
  o.multi_hot_fields = 2;
  o.multi_hot = 3;
  o.seed = 7;
  return o;
}

class CtrGeneratorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = absl::StrCat(
        ::testing::TempDir(), "/ctr_generator_test_", getpid(), "_",
        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  CtrGeneratorSummary Generate(const CtrGeneratorOptions& o,
                               const std::string& name) {
    const std::string out = absl::StrCat(dir_, "/", name);
    std::filesystem::create_directories(out);
    absl::StatusOr<CtrGeneratorSummary> summary = GenerateCtrFiles(o, out);
    EXPECT_TRUE(summary.ok()) << summary.status();
    return summary.ok() ? *summary : CtrGeneratorSummary();
  }

  std::string dir_;
};

TEST_F(CtrGeneratorTest, SameSeedWritesTheSameBytes) {
  CtrGeneratorOptions one_thread = Small();
  one_thread.threads = 1;
  CtrGeneratorOptions three_threads = Small();
  three_threads.threads = 3;
  // More than one round of chunks per thread.
  one_thread.train_examples = three_threads.train_examples = 30000;
  const CtrGeneratorSummary a = Generate(one_thread, "a");
  const CtrGeneratorSummary b = Generate(three_threads, "b");
  for (auto [x, y] : {std::pair{a.train_path, b.train_path},
                      std::pair{a.test_path, b.test_path},
                      std::pair{a.meta_path, b.meta_path}}) {
    const std::string bytes = ReadFile(x);
    EXPECT_GT(bytes.size(), 100u) << x;
    EXPECT_EQ(bytes, ReadFile(y)) << x << " vs " << y;
  }
  CtrGeneratorOptions other = one_thread;
  other.seed = 8;
  const CtrGeneratorSummary c = Generate(other, "c");
  EXPECT_NE(ReadFile(a.train_path), ReadFile(c.train_path));
  // The test set does not depend on the training set's size.
  CtrGeneratorOptions longer = one_thread;
  longer.train_examples = 40000;
  const CtrGeneratorSummary d = Generate(longer, "d");
  EXPECT_EQ(ReadFile(a.test_path), ReadFile(d.test_path));
  EXPECT_EQ(ReadFile(a.train_path),
            ReadFile(d.train_path).substr(0, ReadFile(a.train_path).size()));
}

TEST_F(CtrGeneratorTest, MetaBestAucIsTheAucOfTheTrueProbabilities) {
  const CtrGeneratorOptions o = Small();
  const CtrGeneratorSummary summary = Generate(o, "m");
  const nlohmann::json meta =
      nlohmann::json::parse(ReadFile(summary.meta_path));
  EXPECT_EQ(meta["fields"], 5);
  EXPECT_EQ(meta["vocab_size"], 500);
  EXPECT_EQ(meta["test_file"], "test.tsv");
  const double best_auc = meta["best_auc"].get<double>();
  EXPECT_EQ(best_auc, summary.best_auc);
  EXPECT_GT(best_auc, 0.65);
  EXPECT_LT(best_auc, 0.95);
  EXPECT_NEAR(meta["test_positive_rate"].get<double>(), o.base_ctr, 0.04);
  EXPECT_NEAR(meta["train_positive_rate"].get<double>(), o.base_ctr, 0.04);

  // Read the test set back and score it with the hidden model.
  absl::StatusOr<CtrDataset> test =
      LoadCriteo(summary.test_path, 0, -1, CriteoFormat{3, 5});
  ASSERT_TRUE(test.ok()) << test.status();
  ASSERT_EQ(test->size, o.test_examples);
  absl::StatusOr<std::vector<float>> p = TrueCtrProbabilities(o, *test);
  ASSERT_TRUE(p.ok()) << p.status();
  absl::StatusOr<double> auc = RocAuc(*p, test->labels);
  ASSERT_TRUE(auc.ok()) << auc.status();
  EXPECT_DOUBLE_EQ(*auc, best_auc);
  absl::StatusOr<double> log_loss = LogLoss(*p, test->labels);
  ASSERT_TRUE(log_loss.ok()) << log_loss.status();
  EXPECT_DOUBLE_EQ(*log_loss, meta["best_log_loss"].get<double>());
  // A constant prediction has AUC 0.5; the true probabilities beat it.
  EXPECT_LT(*log_loss, 0.5623);  // the entropy of a 0.25 coin
}

TEST_F(CtrGeneratorTest, IdsAreZipfAndOnlyTheFirstFieldsMultiHot) {
  const CtrGeneratorOptions o = Small();
  const CtrGeneratorSummary summary = Generate(o, "z");
  absl::StatusOr<CtrDataset> train =
      LoadCriteo(summary.train_path, 0, -1, CriteoFormat{3, 5});
  ASSERT_TRUE(train.ok()) << train.status();
  for (int f = 0; f < 5; ++f) {
    const CtrFieldColumn& column = train->fields[f];
    int64_t longest = 0, empty = 0;
    for (int64_t i = 0; i < train->size; ++i) {
      const int64_t n = column.offsets[i + 1] - column.offsets[i];
      longest = std::max(longest, n);
      empty += n == 0;
    }
    EXPECT_EQ(longest, f < 2 ? 3 : 1) << "field " << f;
    // About 2% missing.
    EXPECT_GT(empty, 20) << "field " << f;
    EXPECT_LT(empty, 120) << "field " << f;
    std::map<int64_t, int64_t> counts;
    for (int64_t id : column.ids) ++counts[id];
    int64_t top = 0;
    for (const auto& [id, n] : counts) top = std::max(top, n);
    // Rank 0 of a Zipf(1.1) law over 500 ranks has probability ~0.19.
    EXPECT_GT(top, 0.13 * column.ids.size()) << "field " << f;
    EXPECT_LT(top, 0.26 * column.ids.size()) << "field " << f;
    EXPECT_GT(counts.size(), 150u) << "field " << f;
  }
}

TEST_F(CtrGeneratorTest, GzipFilesHoldTheSameData) {
  CtrGeneratorOptions o = Small();
  const CtrGeneratorSummary plain = Generate(o, "p");
  o.gzip = true;
  const CtrGeneratorSummary gz = Generate(o, "g");
  EXPECT_THAT(gz.train_path, HasSubstr("train.tsv.gz"));
  absl::StatusOr<CtrDataset> a =
      LoadCriteo(plain.test_path, 0, -1, CriteoFormat{3, 5});
  absl::StatusOr<CtrDataset> b =
      LoadCriteo(gz.test_path, 0, -1, CriteoFormat{3, 5});
  ASSERT_TRUE(a.ok() && b.ok()) << a.status() << b.status();
  EXPECT_EQ(a->labels, b->labels);
  EXPECT_EQ(a->dense, b->dense);
  EXPECT_EQ(a->fields[0].ids, b->fields[0].ids);
  EXPECT_EQ(plain.best_auc, gz.best_auc);
}

TEST_F(CtrGeneratorTest, MeanCombinerAndLabelNoise) {
  CtrGeneratorOptions o = Small();
  const CtrGeneratorSummary clean = Generate(o, "clean");
  o.combiner = "mean";
  o.noise = 0.2;
  const CtrGeneratorSummary noisy = Generate(o, "noisy");
  EXPECT_LT(noisy.best_auc, clean.best_auc);
  absl::StatusOr<CtrDataset> test =
      LoadCriteo(noisy.test_path, 0, -1, CriteoFormat{3, 5});
  ASSERT_TRUE(test.ok()) << test.status();
  absl::StatusOr<std::vector<float>> p = TrueCtrProbabilities(o, *test);
  ASSERT_TRUE(p.ok()) << p.status();
  for (float x : *p) {
    EXPECT_GE(x, 0.2f);
    EXPECT_LE(x, 0.8f);
  }
  EXPECT_DOUBLE_EQ(*RocAuc(*p, test->labels), noisy.best_auc);
}

// The logit of one example with only fields 0 and 1 (ids a or b each) and
// the integer features `dense`: from TrueCtrProbabilities, bias removed.
std::vector<double> PairLogits(const CtrGeneratorOptions& o,
                               const CtrDataset& data, int64_t a0, int64_t b0,
                               int64_t a1, int64_t b1,
                               const std::vector<float>& dense) {
  CtrDataset probe;
  probe.num_dense = data.num_dense;
  probe.num_fields = data.num_fields;
  probe.fields.resize(data.num_fields);
  for (auto [x, y] : {std::pair{a0, a1}, std::pair{a0, b1}, std::pair{b0, a1},
                      std::pair{b0, b1}}) {
    probe.labels.push_back(0);
    probe.dense.insert(probe.dense.end(), dense.begin(), dense.end());
    for (int f = 0; f < data.num_fields; ++f) {
      CtrFieldColumn& c = probe.fields[f];
      if (c.offsets.empty()) c.offsets.push_back(0);
      if (f < 2) c.ids.push_back(f == 0 ? x : y);
      c.offsets.push_back(static_cast<uint32_t>(c.ids.size()));
    }
    ++probe.size;
  }
  absl::StatusOr<std::vector<float>> p = TrueCtrProbabilities(o, probe);
  EXPECT_TRUE(p.ok()) << p.status();
  std::vector<double> logits;
  for (float x : *p) logits.push_back(std::log(x / (1.0 - x)));
  return logits;
}

// Interactions are what a model linear in the features cannot learn: with
// them, the effect of field 0's id depends on field 1's (and one integer
// feature's on another's); without, it does not. The best AUC is still the
// AUC of the true probabilities.
TEST_F(CtrGeneratorTest, InteractionsMakeEffectsDependOnEachOther) {
  CtrGeneratorOptions o = Small();
  o.multi_hot_fields = 0;
  o.interaction_fields = 3;
  o.interaction_dim = 3;
  o.interaction_scale = 2;
  o.dense_cross = 2;
  const CtrGeneratorSummary summary = Generate(o, "fm");
  const nlohmann::json meta =
      nlohmann::json::parse(ReadFile(summary.meta_path));
  EXPECT_EQ(meta["interaction_fields"], 3);
  EXPECT_EQ(meta["interaction_dim"], 3);
  EXPECT_EQ(meta["dense_cross"], 2.0);
  absl::StatusOr<CtrDataset> test =
      LoadCriteo(summary.test_path, 0, -1, CriteoFormat{3, 5});
  ASSERT_TRUE(test.ok()) << test.status();
  absl::StatusOr<std::vector<float>> p = TrueCtrProbabilities(o, *test);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_DOUBLE_EQ(*RocAuc(*p, test->labels), summary.best_auc);

  // The two most frequent ids of fields 0 and 1.
  auto top_two = [&](int f) {
    std::map<int64_t, int> count;
    for (int64_t id : test->fields[f].ids) ++count[id];
    std::vector<std::pair<int, int64_t>> by_count;
    for (auto [id, n] : count) by_count.push_back({n, id});
    std::sort(by_count.rbegin(), by_count.rend());
    return std::pair{by_count[0].second, by_count[1].second};
  };
  const auto [a0, b0] = top_two(0);
  const auto [a1, b1] = top_two(1);
  auto contrast = [](const std::vector<double>& l) {
    return l[0] - l[1] - l[2] + l[3];
  };
  const std::vector<float> zero = {0, 0, 0};
  EXPECT_GT(std::fabs(contrast(PairLogits(o, *test, a0, b0, a1, b1, zero))),
            0.01);
  CtrGeneratorOptions additive = o;
  additive.interaction_fields = 0;
  additive.dense_cross = 0;
  EXPECT_LT(
      std::fabs(contrast(PairLogits(additive, *test, a0, b0, a1, b1, zero))),
      1e-4);

  // Integer features 0 and 1 at two values each, ids fixed.
  auto dense_contrast = [&](const CtrGeneratorOptions& options) {
    std::vector<double> l;
    for (float x : {0.0f, 3.0f}) {
      for (float y : {0.0f, 3.0f}) {
        l.push_back(PairLogits(options, *test, a0, a0, a1, a1, {x, y, 0})[0]);
      }
    }
    return contrast(l);
  };
  EXPECT_GT(std::fabs(dense_contrast(o)), 0.01);
  EXPECT_LT(std::fabs(dense_contrast(additive)), 1e-4);
}

// Each field its own bag size: field f's bags hold 1..hotness[f] ids, and
// the list that says what multi_hot_fields and multi_hot say writes the
// same bytes.
TEST_F(CtrGeneratorTest, HotnessPerField) {
  CtrGeneratorOptions o = Small();
  o.hotness = {1, 5, 2};
  const CtrGeneratorSummary summary = Generate(o, "hot");
  const nlohmann::json meta =
      nlohmann::json::parse(ReadFile(summary.meta_path));
  EXPECT_EQ(meta["hotness"], nlohmann::json({1, 5, 2, 1, 1}));
  absl::StatusOr<CtrDataset> train =
      LoadCriteo(summary.train_path, 0, -1, CriteoFormat{3, 5});
  ASSERT_TRUE(train.ok()) << train.status();
  for (int f = 0; f < 5; ++f) {
    const CtrFieldColumn& c = train->fields[f];
    uint32_t most = 0;
    for (int64_t i = 0; i < train->size; ++i) {
      most = std::max(most, c.offsets[i + 1] - c.offsets[i]);
    }
    EXPECT_EQ(most, static_cast<uint32_t>(meta["hotness"][f].get<int>()))
        << "field " << f;
  }
  CtrGeneratorOptions listed = Small();  // multi_hot_fields 2, multi_hot 3
  listed.hotness = {3, 3};
  EXPECT_EQ(ReadFile(Generate(listed, "listed").train_path),
            ReadFile(Generate(Small(), "legacy").train_path));
}

TEST_F(CtrGeneratorTest, RejectsBadOptionsAndForeignIds) {
  CtrGeneratorOptions o = Small();
  o.combiner = "max";
  EXPECT_THAT(GenerateCtrFiles(o, dir_).status().message(),
              HasSubstr("combiner"));
  o = Small();
  o.multi_hot_fields = 6;
  EXPECT_THAT(ValidateCtrGeneratorOptions(o).message(),
              HasSubstr("multi_hot_fields"));
  o = Small();
  o.base_ctr = 1;
  EXPECT_THAT(ValidateCtrGeneratorOptions(o).message(), HasSubstr("base_ctr"));
  o = Small();
  o.noise = 0.5;
  EXPECT_THAT(ValidateCtrGeneratorOptions(o).message(), HasSubstr("noise"));
  o = Small();
  o.interaction_fields = 1;
  EXPECT_THAT(ValidateCtrGeneratorOptions(o).message(),
              HasSubstr("interaction_fields"));
  o.interaction_fields = 6;
  EXPECT_THAT(ValidateCtrGeneratorOptions(o).message(),
              HasSubstr("interaction_fields"));
  o = Small();
  o.hotness = {1, 1, 1, 1, 1, 1};
  EXPECT_THAT(ValidateCtrGeneratorOptions(o).message(),
              HasSubstr("hotness lists 6 fields"));
  o.hotness = {2, 0};
  EXPECT_THAT(ValidateCtrGeneratorOptions(o).message(),
              HasSubstr("hotness of field 2"));
  o = Small();
  o.interaction_dim = 0;
  EXPECT_THAT(ValidateCtrGeneratorOptions(o).message(),
              HasSubstr("interaction_dim"));
  o = Small();
  o.dense_cross = -1;
  EXPECT_THAT(ValidateCtrGeneratorOptions(o).message(),
              HasSubstr("dense_cross"));
  o = Small();
  o.vocab_size = 0;
  EXPECT_THAT(ValidateCtrGeneratorOptions(o).message(),
              HasSubstr("vocab_size"));
  EXPECT_FALSE(GenerateCtrFiles(Small(), dir_ + "/no/such/dir").ok());

  CtrDataset data;
  data.num_dense = 3;
  data.num_fields = 5;
  data.size = 1;
  data.labels = {1};
  data.dense = {0, 0, 0};
  data.fields.resize(5);
  data.fields[4].ids = {12345};
  data.fields[4].offsets = {0, 1};
  for (int f = 0; f < 4; ++f) data.fields[f].offsets = {0, 0};
  absl::StatusOr<std::vector<float>> p = TrueCtrProbabilities(Small(), data);
  EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(p.status().message(), HasSubstr("field 4"));
  data.num_fields = 4;
  EXPECT_FALSE(TrueCtrProbabilities(Small(), data).ok());
}

}  // namespace
}  // namespace tessera
