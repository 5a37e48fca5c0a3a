#include "coordinator/report/epoch_result.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/example_digest.h"

namespace tessera {

void AddEpochPart(const EpochResult& part, EpochResult* total) {
  const int64_t steps = total->steps + part.steps;
  const int64_t examples = total->examples + part.examples;
  if (steps > 0) {
    total->train_loss =
        (total->train_loss * total->steps + part.train_loss * part.steps) /
        steps;
  }
  if (examples > 0) {
    total->train_accuracy = (total->train_accuracy * total->examples +
                             part.train_accuracy * part.examples) /
                            examples;
  }
  total->steps = steps;
  total->examples = examples;
  total->seconds += part.seconds;
  total->examples_per_second = total->examples / std::max(1e-9, total->seconds);
  for (const auto& [staleness, count] : part.staleness) {
    total->staleness[staleness] += count;
  }
  total->late_shards += part.late_shards;
  total->bad_records += part.bad_records;
  total->example_digest += part.example_digest;
  total->digest_known = total->digest_known && part.digest_known;
  // The later part's rates are the latest.
  if (part.learning_rate >= 0) total->learning_rate = part.learning_rate;
  if (part.embedding_learning_rate >= 0) {
    total->embedding_learning_rate = part.embedding_learning_rate;
  }
}

absl::Status CheckExampleDigest(const EpochResult& result, uint64_t one_pass) {
  if (!result.digest_known || result.example_digest == one_pass) {
    return absl::OkStatus();
  }
  return absl::InternalError(absl::StrCat(
      "epoch ", result.epoch, " trained ", result.examples,
      " examples, but not each example of the training set once: their "
      "digest is ",
      DigestText(result.example_digest), " where one pass gives ",
      DigestText(one_pass),
      " (an example trained twice and another missed, or a step counted "
      "twice)"));
}

}  // namespace tessera
