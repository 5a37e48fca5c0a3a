#ifndef TESSERA_COORDINATOR_GLOBAL_STEPS_H_
#define TESSERA_COORDINATOR_GLOBAL_STEPS_H_

#include <vector>

#include "coordinator/data_plan.h"

namespace tessera {

// Sync and mirrored training run one global step at a time, each the
// union of one batch per worker. DataPlan::NextEpoch interleaves the
// shards round-robin, so a global step is one round: it closes where a
// shard would appear a second time. Rounds at the end of a one-pass epoch
// may miss shards that ran out; with `pad_missing` every round gets an
// empty step for each missing shard (mirrored mode: every replica takes
// part in every all-reduce). Within a round steps are ordered by shard.
std::vector<std::vector<PlannedStep>> GroupIntoGlobalSteps(
    std::vector<PlannedStep> steps, int num_shards, bool pad_missing);

// The rounds of a ring of `parts` replicas that no longer matches the
// plan's shards (workers joined or left a mirrored or hybrid job): `parts`
// steps each, in the order given, the empty ones left out, and the last
// round padded with empty steps, so that every member takes part in every
// all-reduce. Part i of a round is member i's. REQUIRES: parts >= 1.
std::vector<std::vector<PlannedStep>> GroupIntoRounds(
    std::vector<PlannedStep> steps, int parts);

}  // namespace tessera

#endif  // TESSERA_COORDINATOR_GLOBAL_STEPS_H_
