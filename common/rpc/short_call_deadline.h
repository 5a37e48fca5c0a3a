// The deadline of a call that the callee answers at once rather than after
// work: a request to shut down, the job's status, a step request or a stop
// from tessera_ctl (the ones that wait add --wait_s to it). Long enough for
// a busy process to answer, short enough that a dead one does not hold a
// shutdown up.
#ifndef TESSERA_COMMON_SHORT_CALL_DEADLINE_H_
#define TESSERA_COMMON_SHORT_CALL_DEADLINE_H_

namespace tessera {

inline constexpr double kShortCallDeadlineS = 10;

}  // namespace tessera

#endif  // TESSERA_COMMON_SHORT_CALL_DEADLINE_H_
