// Command-line parsing with Tessera's exit code for mistakes. gflags exits
// with code 1 on an unknown flag or a value of the wrong type, the code of
// a crash, so tessera_local restarted a coordinator given a typo three
// times. Every binary parses through here instead: a command-line mistake
// prints gflags-style "ERROR: ..." naming the flag and exits 2, the code
// launchers do not restart.

#ifndef TESSERA_COMMON_COMMAND_LINE_H_
#define TESSERA_COMMON_COMMAND_LINE_H_

#include <string>
#include <vector>

#include "common/exit_code.h"

namespace tessera {

// The exit code of every Tessera binary for a bad command line or
// configuration.
inline constexpr int kCommandLineErrorExitCode = kExitUserError;

// The first mistake among argv's flags (argv[0] is the program; scanning
// stops at "--"): an unknown flag, or a value its flag's type cannot take.
// Empty when there is none. Checking a value sets the flag, as parsing will.
std::string FirstFlagError(int argc, char** argv);

// FirstFlagError, then gflags::ParseCommandLineFlags(argc, argv, true);
// exits kCommandLineErrorExitCode after printing the error if there is one.
void ParseCommandLineOrExit(int* argc, char*** argv);

}  // namespace tessera

#endif  // TESSERA_COMMON_COMMAND_LINE_H_
