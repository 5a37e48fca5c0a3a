// tessera_ctr_gen: writes a synthetic click-through data set in the Criteo
// format with a known best achievable AUC
// (tools/ctr_gen/ctr_generator.h).
//
//   tessera_ctr_gen --out_dir=/data/ctr --train_examples=1000000
//
// Exit codes as every tool's (common/exit_code.h): 2 for a mistake in the
// flags or a folder that cannot be made, 1 for a failure a retry might fix.

#include <cstdio>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/command_line.h"
#include "common/exit_code.h"
#include "common/io/output_folder.h"
#include "gflags/gflags.h"
#include "tools/ctr_gen/ctr_generator.h"

DEFINE_string(out_dir, "",
              "Folder to write train.tsv, test.tsv and meta.json into "
              "(created if missing).");
DEFINE_int64(train_examples, 100000, "Training examples to write.");
DEFINE_int64(test_examples, 20000, "Test examples to write.");
DEFINE_int32(fields, 26, "Categorical fields (Criteo: 26).");
DEFINE_int32(dense, 13, "Integer features (Criteo: 13).");
DEFINE_int64(vocab_size, 100000, "Distinct ids per field.");
DEFINE_double(zipf_s, 1.1, "Zipf exponent of the ids' frequencies.");
DEFINE_int32(multi_hot_fields, 2, "The first this many fields are multi-hot.");
DEFINE_int32(multi_hot, 4, "Most ids in a multi-hot field's bag.");
DEFINE_string(hotness, "",
              "Most ids per field, comma-separated in field order (e.g. "
              "4,1,8: field 1 up to 4, field 3 up to 8, the rest one); "
              "replaces --multi_hot_fields and --multi_hot.");
DEFINE_string(combiner, "sum",
              "How the hidden model combines a bag's weights: sum, mean.");
DEFINE_double(missing, 0.02, "Probability that a field is missing.");
DEFINE_double(base_ctr, 0.25, "Mean click probability.");
DEFINE_double(weight_scale, 0.5, "Scale of the ids' weights in the logit.");
DEFINE_double(weight_decay_rank, 50,
              "Weights shrink as 1 / (1 + rank / this), so rare ids, which "
              "no model can learn, matter less.");
DEFINE_double(dense_scale, 0.3, "Scale of the integer features' weights.");
DEFINE_double(noise, 0, "Probability that a label is flipped.");
DEFINE_int32(interaction_fields, 0,
             "The first this many fields interact pairwise through latent "
             "vectors, as in a factorization machine (0: none).");
DEFINE_int32(interaction_dim, 4, "Dimension of those latent vectors.");
DEFINE_double(interaction_scale, 1.0, "Scale of the pairwise terms.");
DEFINE_double(dense_cross, 0,
              "Scale of the integer features' pair products (0: none).");
DEFINE_uint64(seed, 1, "Seed: the same flags write the same bytes.");
DEFINE_bool(gzip, false, "Write train.tsv.gz and test.tsv.gz.");
DEFINE_int32(threads, 0,
             "Threads making examples (0: one per core); the output does "
             "not depend on it.");

int main(int argc, char** argv) {
  gflags::SetUsageMessage(
      "Writes a synthetic Criteo-format click-through data set whose best "
      "achievable AUC is known (meta.json).");
  tessera::ParseCommandLineOrExit(&argc, &argv);
  constexpr char kProgram[] = "tessera_ctr_gen";
  if (FLAGS_out_dir.empty()) {
    return tessera::ExitWith(
        kProgram, absl::InvalidArgumentError("--out_dir is required"));
  }
  if (absl::Status s = tessera::CreateOutputFolder(FLAGS_out_dir); !s.ok()) {
    return tessera::ExitWith(kProgram, s);
  }

  tessera::CtrGeneratorOptions o;
  o.train_examples = FLAGS_train_examples;
  o.test_examples = FLAGS_test_examples;
  o.num_fields = FLAGS_fields;
  o.num_dense = FLAGS_dense;
  o.vocab_size = FLAGS_vocab_size;
  o.zipf_s = FLAGS_zipf_s;
  o.multi_hot_fields = FLAGS_multi_hot_fields;
  o.multi_hot = FLAGS_multi_hot;
  for (absl::string_view part :
       absl::StrSplit(FLAGS_hotness, ',', absl::SkipEmpty())) {
    int h = 0;
    if (!absl::SimpleAtoi(part, &h)) {
      return tessera::ExitWith(
          kProgram, absl::InvalidArgumentError(absl::StrCat(
                        "--hotness: \"", part, "\" is not a number")));
    }
    o.hotness.push_back(h);
  }
  o.combiner = FLAGS_combiner;
  o.missing = FLAGS_missing;
  o.base_ctr = FLAGS_base_ctr;
  o.weight_scale = FLAGS_weight_scale;
  o.weight_decay_rank = FLAGS_weight_decay_rank;
  o.dense_scale = FLAGS_dense_scale;
  o.noise = FLAGS_noise;
  o.interaction_fields = FLAGS_interaction_fields;
  o.interaction_dim = FLAGS_interaction_dim;
  o.interaction_scale = FLAGS_interaction_scale;
  o.dense_cross = FLAGS_dense_cross;
  o.seed = FLAGS_seed;
  o.gzip = FLAGS_gzip;
  o.threads = FLAGS_threads;
  // A bad option is a command-line error (exit 2), before anything is
  // written.
  if (absl::Status s = tessera::ValidateCtrGeneratorOptions(o); !s.ok()) {
    return tessera::ExitWith(kProgram, s);
  }
  absl::StatusOr<tessera::CtrGeneratorSummary> summary =
      tessera::GenerateCtrFiles(o, FLAGS_out_dir, [](const std::string& line) {
        std::fprintf(stderr, "%s\n", line.c_str());
      });
  if (!summary.ok()) return tessera::ExitWith(kProgram, summary.status());
  std::printf(
      "wrote %s, %s, %s\nbest AUC %.4f, best log loss %.4f (test set)\n",
      summary->train_path.c_str(), summary->test_path.c_str(),
      summary->meta_path.c_str(), summary->best_auc, summary->best_log_loss);
  return 0;
}
