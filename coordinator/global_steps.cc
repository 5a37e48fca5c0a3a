#include "coordinator/global_steps.h"

#include <algorithm>

namespace tessera {

std::vector<std::vector<PlannedStep>> GroupIntoGlobalSteps(
    std::vector<PlannedStep> steps, int num_shards, bool pad_missing) {
  std::vector<std::vector<PlannedStep>> rounds;
  std::vector<bool> seen(num_shards, false);
  auto close = [&] {
    if (rounds.empty() || rounds.back().empty()) return;
    std::vector<PlannedStep>& round = rounds.back();
    if (pad_missing) {
      for (int s = 0; s < num_shards; ++s) {
        if (!seen[s]) round.push_back({s, {}, {}});
      }
    }
    std::sort(round.begin(), round.end(),
              [](const PlannedStep& a, const PlannedStep& b) {
                return a.shard < b.shard;
              });
    std::fill(seen.begin(), seen.end(), false);
  };
  rounds.emplace_back();
  for (PlannedStep& step : steps) {
    if (seen[step.shard]) {
      close();
      rounds.emplace_back();
    }
    seen[step.shard] = true;
    rounds.back().push_back(std::move(step));
  }
  close();
  if (rounds.back().empty()) rounds.pop_back();
  return rounds;
}

std::vector<std::vector<PlannedStep>> GroupIntoRounds(
    std::vector<PlannedStep> steps, int parts) {
  std::vector<std::vector<PlannedStep>> rounds;
  for (PlannedStep& step : steps) {
    if (step.empty()) continue;
    if (rounds.empty() || static_cast<int>(rounds.back().size()) == parts) {
      rounds.emplace_back();
    }
    rounds.back().push_back(std::move(step));
  }
  if (!rounds.empty()) {
    while (static_cast<int>(rounds.back().size()) < parts) {
      rounds.back().push_back({0, {}, {}});
    }
  }
  return rounds;
}

}  // namespace tessera
