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
    case Kind::kHybrid:
      if (sync_rows) return "hybrid:sync";
      return ssp_rows ? absl::StrCat("hybrid:ssp:", staleness) : "hybrid";
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
  if (text == "hybrid" || text == "hybrid:sync") {
    mode.kind = TrainingMode::Kind::kHybrid;
    mode.sync_rows = text == "hybrid:sync";
    return mode;
  }
  if (absl::StartsWith(text, "hybrid:ssp:")) {
    int64_t s = -1;
    if (absl::SimpleAtoi(text.substr(11), &s) && s >= 0) {
      mode.kind = TrainingMode::Kind::kHybrid;
      mode.ssp_rows = true;
      mode.staleness = s;
      return mode;
    }
    return absl::InvalidArgumentError(absl::StrCat(
        "mode: \"", text,
        "\" needs a staleness bound S >= 0 after \"hybrid:ssp:\""));
  }
  if (absl::StartsWith(text, "hybrid:")) {
    return absl::InvalidArgumentError(absl::StrCat(
        "mode: \"", text,
        "\": the rows of a hybrid job are pushed "
        "asynchronously (hybrid), with bounded staleness (hybrid:ssp:S) or "
        "per global step (hybrid:sync)"));
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
      "mode: \"", text,
      "\" is not one of async, sync, ssp:S, mirrored, hybrid, hybrid:ssp:S, "
      "hybrid:sync"));
}

absl::StatusOr<TrainingMode> ModeForCluster(absl::string_view text, int num_ps,
                                            std::string* note) {
  note->clear();
  absl::StatusOr<TrainingMode> mode = ParseTrainingMode(text);
  if (!mode.ok()) return mode.status();
  if (num_ps == 0 && mode->kind == TrainingMode::Kind::kAsync) {
    mode->kind = TrainingMode::Kind::kMirrored;
    *note = absl::StrCat(
        "mode ", text.empty() ? "async (the default)" : "async",
        " becomes mirrored: the cluster has no parameter servers, so every "
        "worker holds every variable and gradients are all-reduced");
  } else if (num_ps == 0 && mode->uses_parameter_servers()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "mode ", mode->ToString(),
        " needs parameter servers; the cluster has none (start some, e.g. "
        "tessera_local --num_ps=2, or use --mode=mirrored)"));
  } else if (num_ps > 0 && !mode->uses_parameter_servers()) {
    *note = absl::StrCat(
        "mode mirrored keeps every variable on the workers: the ", num_ps,
        " parameter server", num_ps == 1 ? "" : "s",
        " of the cluster will hold nothing (start none: tessera_local "
        "--num_ps=0)");
  }
  return mode;
}

}  // namespace tessera
