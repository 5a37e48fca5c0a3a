// Fuzzes the TF_CONFIG parser: any input gives a spec or an error, and a
// spec survives its own round trip through ToTfConfigJson (the header's
// promise).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "common/cluster/cluster_spec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<tessera::ClusterSpec> spec =
      tessera::ClusterSpec::FromTfConfigJson(text);
  if (!spec.ok()) {
    if (spec.status().message().empty()) std::abort();  // errors must say why
    return 0;
  }
  const std::string json = spec->ToTfConfigJson();
  absl::StatusOr<tessera::ClusterSpec> again =
      tessera::ClusterSpec::FromTfConfigJson(json);
  if (!again.ok() || again->DebugString() != spec->DebugString()) {
    std::fprintf(stderr, "round trip changed the spec:\n  %s\n  %s\n",
                 spec->DebugString().c_str(),
                 again.ok() ? again->DebugString().c_str()
                            : std::string(again.status().message()).c_str());
    std::abort();
  }
  (void)spec->ValidateForParameterServerTraining();
  (void)spec->own_address();
  return 0;
}
