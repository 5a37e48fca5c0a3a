// Generates click-through data in the Criteo format
// (data/criteo/criteo_reader.h) from a hidden model, so that the best
// AUC any model can reach on it is known.
//
// Examples: each categorical field draws an id rank from a Zipf law over
// vocab_size ranks (P(rank r) ~ (r + 1)^-zipf_s) and writes the rank as a
// 64-bit hash of (seed, field, rank) in 16 hex digits, so files look like
// Criteo's (two ranks of a field share a hash with probability about
// vocab_size^2 / 2^65, i.e. never). The first multi_hot_fields
// fields hold 1..multi_hot ids ("," separated, repeats possible), or field
// f holds 1..hotness[f] when `hotness` is set. Each
// integer column is a log-normal count (about 1 in 200 written as -1, which
// the reader clamps to 0). Any field is missing with probability `missing`.
//
// Labels: logit = bias + sum over fields of w_f(bag) + sum_j v_j * (d_j - m_j)
// where w_f(bag) is the sum or the mean (combiner) of w_f(rank) over the
// bag's ids (0 for an empty bag), d_j is the reader's feature of integer
// column j (CriteoDenseValue, 0 when missing), m_j its typical value and
// v_j = dense_scale * z.
//
// Interactions, which no model linear in the features can learn (both are
// off by default):
//  - interaction_fields > 0: the first interaction_fields fields interact
//    pairwise as in a factorization machine, adding sum over f < g of
//    <u_f(bag_f), u_g(bag_g)>, where u_f(bag) is the sum or the mean of the
//    bag's latent vectors u_f(rank) in R^interaction_dim, u_f(rank) =
//    sqrt(interaction_scale) * z / ((P * interaction_dim)^(1/4) *
//    (1 + rank / weight_decay_rank)) with z standard normal per component
//    and P = K (K - 1) / 2 pairs, so that among the most frequent ids the
//    term's spread is interaction_scale whatever K and the dimension.
//  - dense_cross > 0: every pair j < l of integer features adds
//    c_jl * (d_j - m_j) * (d_l - m_l), c_jl = dense_cross * z / num_dense.
// w_f(rank) = s_f * z / (1 + rank / weight_decay_rank) with z standard
// normal and s_f in [0.25, 1] * weight_scale, all drawn from (seed, field,
// rank), so rare ids, which no model sees often enough to learn, carry
// small weights: with the defaults, most of the logit's variance comes from
// ids a training set of a few hundred thousand examples holds hundreds of
// times each. bias is set so that the mean click probability is
// base_ctr. p = sigmoid(logit); a label is 1 with probability
// noise + (1 - 2 noise) p (noise flips labels at random), which is the true
// probability the best AUC and log loss are computed from.
//
// Everything is a pure function of the options: the same options give the
// same bytes, whatever the machine. The training and test sets come from
// separate streams, so changing one's size does not change the other.

#ifndef TESSERA_TOOLS_CTR_GEN_CTR_GENERATOR_H_
#define TESSERA_TOOLS_CTR_GEN_CTR_GENERATOR_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "data/criteo/ctr_dataset.h"

namespace tessera {

struct CtrGeneratorOptions {
  int64_t train_examples = 100000;
  int64_t test_examples = 20000;
  int num_fields = 26;
  int num_dense = 13;
  int64_t vocab_size = 100000;  // ranks per field
  double zipf_s = 1.1;
  int multi_hot_fields = 2;  // the first fields are multi-hot
  int multi_hot = 4;         // at most this many ids in their bags
  // Set: the most ids of each field's bag, in field order (fields past the
  // list hold one id); replaces multi_hot_fields and multi_hot.
  std::vector<int> hotness;
  std::string combiner = "sum";  // of a multi-hot bag's weights: sum | mean
  double missing = 0.02;
  double base_ctr = 0.25;
  double weight_scale = 0.5;
  double weight_decay_rank = 50;
  double dense_scale = 0.3;
  double noise = 0;            // probability that a label is flipped
  int interaction_fields = 0;  // the first fields interact pairwise
  int interaction_dim = 4;     // of their latent vectors
  double interaction_scale = 1.0;
  double dense_cross = 0;  // scale of the integer features' pair products
  uint64_t seed = 1;
  bool gzip = false;  // write train.tsv.gz and test.tsv.gz
  // Threads making examples; 0: one per core. The output does not depend
  // on it.
  int threads = 0;
};

// InvalidArgument naming the first bad option.
absl::Status ValidateCtrGeneratorOptions(const CtrGeneratorOptions& options);

// What GenerateCtrFiles wrote; also in meta.json.
struct CtrGeneratorSummary {
  std::string train_path, test_path, meta_path;
  double bias = 0;
  double train_positive_rate = 0, test_positive_rate = 0;
  // Of the true probabilities on the test (training) set.
  double best_auc = 0, best_log_loss = 0;
  double best_auc_train = 0, best_log_loss_train = 0;
};

// Writes train.tsv, test.tsv (.gz with options.gzip) and meta.json into
// `out_dir` (which must exist). meta.json holds every option, the bias, the
// positive rates, best_auc and best_log_loss (test set) and their training
// set twins. `progress`, if set, gets a line of text now and then.
absl::StatusOr<CtrGeneratorSummary> GenerateCtrFiles(
    const CtrGeneratorOptions& options, const std::string& out_dir,
    const std::function<void(const std::string&)>& progress = nullptr);

// The true click probabilities (with the label noise) of the examples of
// `data`, read back from files generated with `options`: the scores that
// reach best_auc. InvalidArgument for an id the generator cannot have
// written or a data set of the wrong shape.
absl::StatusOr<std::vector<float>> TrueCtrProbabilities(
    const CtrGeneratorOptions& options, const CtrDataset& data);

}  // namespace tessera

#endif  // TESSERA_TOOLS_CTR_GEN_CTR_GENERATOR_H_
