#ifndef TESSERA_COORDINATOR_MEMBERSHIP_MEMBER_STATE_H_
#define TESSERA_COORDINATOR_MEMBERSHIP_MEMBER_STATE_H_

namespace tessera {

// Where a worker stands in a job: the one state machine of a worker's
// life, which the scheduler (StepQueue, ClusterCoordinator) and the
// membership table (Membership) both keep.
//
//   joining  -> active, removed
//   active   -> down, draining, removed
//   down     -> active (back), draining, drained, removed
//   draining -> down, drained
//   drained, removed: final
//
// A worker that fails while draining is down and then drained: its steps
// are over once it failed.
enum class MemberState {
  kJoining,   // asked to join; being configured, takes no step yet
  kActive,    // takes steps
  kDraining,  // finishes the steps it holds, takes no more
  kDrained,   // left after its steps (and was told to exit)
  kDown,      // failed; its steps run elsewhere while it is waited for
  kRemoved,   // did not come back in time, or never became ready
};

// "joining", "active", ...: as WorkerState.state and the history show it.
const char* MemberStateName(MemberState state);

// Whether a worker in state `from` may go to `to` (not to itself).
bool MemberStateMayBecome(MemberState from, MemberState to);

// Drained or removed: the worker left the job for good.
inline bool MemberStateIsGone(MemberState state) {
  return state == MemberState::kDrained || state == MemberState::kRemoved;
}

}  // namespace tessera

#endif  // TESSERA_COORDINATOR_MEMBERSHIP_MEMBER_STATE_H_
