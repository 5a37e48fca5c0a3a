#include "common/command_line.h"

#include <cstdio>
#include <cstdlib>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "gflags/gflags.h"

namespace tessera {
namespace {

// gflags' own flags whose values have side effects when set (reading
// files, the environment) or name other flags; gflags checks them itself.
bool IsGflagsMeta(absl::string_view name) {
  return name == "flagfile" || name == "fromenv" || name == "tryfromenv" ||
         name == "undefok";
}

}  // namespace

std::string FirstFlagError(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    absl::string_view arg = argv[i];
    if (arg == "--") break;
    if (arg.size() < 2 || arg[0] != '-') continue;  // a positional argument
    arg.remove_prefix(arg[1] == '-' ? 2 : 1);
    const size_t eq = arg.find('=');
    const std::string name(arg.substr(0, eq));
    gflags::CommandLineFlagInfo info;
    if (!gflags::GetCommandLineFlagInfo(name.c_str(), &info)) {
      // --nofoo sets the bool flag foo to false.
      if (eq == absl::string_view::npos && absl::StartsWith(name, "no") &&
          gflags::GetCommandLineFlagInfo(name.c_str() + 2, &info) &&
          info.type == "bool") {
        continue;
      }
      return absl::StrCat("unknown command line flag '", name,
                          "' (--helpfull lists every flag)");
    }
    if (IsGflagsMeta(name)) continue;
    std::string value;
    if (eq != absl::string_view::npos) {
      value = std::string(arg.substr(eq + 1));
    } else if (info.type == "bool") {
      continue;
    } else if (i + 1 < argc) {
      value = argv[++i];  // "--flag value"
    } else {
      return absl::StrCat("flag '", name, "' is missing its argument");
    }
    if (gflags::SetCommandLineOption(name.c_str(), value.c_str()).empty()) {
      return absl::StrCat("illegal value '", value, "' specified for ",
                          info.type, " flag '", name, "'");
    }
  }
  return "";
}

void ParseCommandLineOrExit(int* argc, char*** argv) {
  const std::string error = FirstFlagError(*argc, *argv);
  if (!error.empty()) {
    std::fprintf(stderr, "ERROR: %s\n", error.c_str());
    std::exit(kCommandLineErrorExitCode);
  }
  gflags::ParseCommandLineFlags(argc, argv, true);
}

}  // namespace tessera
