#include "coordinator/membership/member_state.h"

namespace tessera {

const char* MemberStateName(MemberState state) {
  switch (state) {
    case MemberState::kJoining:
      return "joining";
    case MemberState::kActive:
      return "active";
    case MemberState::kDraining:
      return "draining";
    case MemberState::kDrained:
      return "drained";
    case MemberState::kDown:
      return "down";
    case MemberState::kRemoved:
      return "removed";
  }
  return "unknown";
}

bool MemberStateMayBecome(MemberState from, MemberState to) {
  using S = MemberState;
  switch (from) {
    case S::kJoining:
      return to == S::kActive || to == S::kRemoved;
    case S::kActive:
      return to == S::kDown || to == S::kDraining || to == S::kRemoved;
    case S::kDown:
      return to == S::kActive || to == S::kDraining || to == S::kDrained ||
             to == S::kRemoved;
    case S::kDraining:
      return to == S::kDown || to == S::kDrained;
    case S::kDrained:
    case S::kRemoved:
      return false;
  }
  return false;
}

}  // namespace tessera
