// Test-only fault points: named places in the code where a test makes a
// process die or stop at exactly that moment, instead of racing the moment
// with a sleep. Off, and one relaxed atomic load per call, unless a main
// turns them on (StartProcess does when the environment variable
// TESSERA_FAULT_POINTS names a folder).
//
// At FaultPoint("configure") in the process named "worker-1", a file
// <folder>/worker-1.configure, when present, is acted on once: it is renamed
// to worker-1.configure.hit (which a test waits for; its modification time
// is the moment of the hit), and then, by the
// file's first word,
//   kill   the process sends itself SIGKILL (a crash at that point);
//   stop   the process sends itself SIGSTOP (the test decides what next);
// any other word only leaves the .hit file. A number after the word, N,
// lets the point pass N times first (counted from when the file is
// there): "kill 60" at "step" kills the worker in its 61st step.
// The points each role has are listed in docs/operations.md.

#ifndef TESSERA_COMMON_PROCESS_FAULT_POINT_H_
#define TESSERA_COMMON_PROCESS_FAULT_POINT_H_

#include <string>

#include "absl/strings/string_view.h"

namespace tessera {

// Turns the fault points on for this process, which is `process` (e.g.
// "worker-1", "chief-0", "ps-0") in the file names. Called once, by a main.
void EnableFaultPoints(std::string folder, std::string process);

// A named place; see the file comment. Thread-safe; a file is acted on by
// one call only, even when several threads pass the point at once.
void FaultPoint(absl::string_view name);

}  // namespace tessera

#endif  // TESSERA_COMMON_PROCESS_FAULT_POINT_H_
