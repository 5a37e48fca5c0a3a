// Runs one call per task (a worker, a parameter server) concurrently, at
// most a bounded number at a time, as the chief's start-up needs: waiting
// for, configuring or stopping hundreds of tasks one after another adds up
// their round trips and their work, while one thread per task would start
// a thousand threads.
//
// Contract:
//  - call(i) runs at most once for each i in [0, n), on at most
//    `max_concurrency` threads at once (values below 1 count as 1); with
//    one thread, or one task, the calls run in order on the caller's
//    thread.
//  - Once a call fails, calls not yet started are skipped (as a loop that
//    returns at its first error would); those already running finish.
//  - Returns OK when every call succeeded, else the failure of the lowest
//    task index among the calls that failed, unchanged: the call's status
//    should name its task.
//  - `call` must be safe to run concurrently for different indices.

#ifndef TESSERA_COORDINATOR_PARALLEL_BOUNDED_FOR_EACH_H_
#define TESSERA_COORDINATOR_PARALLEL_BOUNDED_FOR_EACH_H_

#include <functional>

#include "absl/status/status.h"

namespace tessera {

absl::Status BoundedForEach(int n, int max_concurrency,
                            const std::function<absl::Status(int)>& call);

}  // namespace tessera

#endif  // TESSERA_COORDINATOR_PARALLEL_BOUNDED_FOR_EACH_H_
