#ifndef TESSERA_DEPLOY_BUILD_ROOT_H_
#define TESSERA_DEPLOY_BUILD_ROOT_H_

#include <string>

#include "absl/status/statusor.h"

namespace tessera {

// The folder the running launcher finds the binaries it starts under: the
// launcher's own folder when tessera_worker sits beside it (a bundle's
// bin/, where deploy/bundle.sh puts every binary), else the build root two
// folders above it (<build>/deploy/local/tessera_local,
// <build>/deploy/slurm/tessera_slurm_task). Internal error (saying to pass
// --bin_dir) when /proc/self/exe cannot be read.
absl::StatusOr<std::string> BuildRootOfThisLauncher();

// Where binary `name` (tessera_ps, tessera_worker, tessera_coordinator,
// tessera_evaluator) is under `root`, either such folder: <root>/<name>
// when that file exists (a bundle's bin/), else its place in a build tree
// (<root>/ps_server/tessera_ps, ...).
std::string BinaryUnder(const std::string& root, const std::string& name);

}  // namespace tessera

#endif  // TESSERA_DEPLOY_BUILD_ROOT_H_
