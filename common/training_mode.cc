#include "common/training_mode.h"

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace tessera {

std::string TrainingMode::ToString() const {
  switch (kind) {
    case Kind::kAsync:
      return "async";
    case Kind::kSync:
      return "sync";
    case Kind::kSsp:
      return absl::StrCat("ssp:", staleness);
    case Kind::kMirrored:
      return "mirrored";
  }
  return "unknown";
}

absl::StatusOr<TrainingMode> ParseTrainingMode(absl::string_view text) {
  TrainingMode mode;
  if (text == "async" || text.empty()) return mode;
  if (text == "sync") {
    mode.kind = TrainingMode::Kind::kSync;
    return mode;
  }
  if (text == "mirrored") {
    mode.kind = TrainingMode::Kind::kMirrored;
    return mode;
  }
  if (absl::StartsWith(text, "ssp:")) {
    int64_t s = -1;
    if (absl::SimpleAtoi(text.substr(4), &s) && s >= 0) {
      mode.kind = TrainingMode::Kind::kSsp;
      mode.staleness = s;
      return mode;
    }
    return absl::InvalidArgumentError(absl::StrCat(
        "mode: \"", text, "\" needs a staleness bound S >= 0 after \"ssp:\""));
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "mode: \"", text, "\" is not one of async, sync, ssp:S, mirrored"));
}

}  // namespace tessera
