#ifndef TESSERA_BENCH_CPU_PIN_H_
#define TESSERA_BENCH_CPU_PIN_H_

#include <string>

#include "absl/status/status.h"

namespace tessera {

// Runs the calling thread (and the threads it starts later, which inherit
// its mask) on `cpus`, a comma-separated list of core numbers; "" leaves
// it alone. `flag` names the option in the error, e.g. "server_cpus".
// Benches pin a server and its clients to cores of their own so that a
// figure says what the server costs, not what its clients take from it
// on a machine with few cores.
absl::Status PinTo(const std::string& cpus, const char* flag);

// Seconds the cores of `cpus` (as for PinTo) have been busy since boot, by
// /proc/stat: user, nice, system, irq and softirq time, not idle, iowait
// or the time the hypervisor gave to other guests (steal). The difference
// over a run is what the code pinned there cost, kernel work included.
// 0 when `cpus` is empty or /proc/stat cannot be read.
double CoresBusySeconds(const std::string& cpus);

}  // namespace tessera

#endif  // TESSERA_BENCH_CPU_PIN_H_
