#ifndef TESSERA_WORKER_BACKEND_DEVICE_CHOICE_H_
#define TESSERA_WORKER_BACKEND_DEVICE_CHOICE_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "worker/backend/backend.h"
#include "worker/backend/gpu_probe.h"

namespace tessera {

// What --device asks for: auto, cpu, cuda (= cuda:0) or cuda:N.
struct DeviceRequest {
  enum class Kind { kAuto, kCpu, kCuda };
  Kind kind = Kind::kAuto;
  int ordinal = 0;  // kCuda only
};

// InvalidArgument, quoting the flag, for anything else.
absl::StatusOr<DeviceRequest> ParseDeviceFlag(absl::string_view flag);

// Where a worker computes, and why (a sentence for the log).
struct DeviceChoice {
  bool cuda = false;
  int ordinal = 0;     // cuda only
  std::string device;  // "cpu" or "cuda:N"
  std::string reason;
};

// Decides from the request, the GPUs that answered (ProbeGpus, which
// counts only those CUDA_VISIBLE_DEVICES leaves visible: cuda:N is the
// N-th of them), whether this build has the CUDA backend, and the value of
// CUDA_VISIBLE_DEVICES (nullptr when unset; quoted in reasons and errors).
// auto takes a GPU when one answers and the build has CUDA, else the CPU:
// the GPU of this process's local rank on its host (`local_rank` mod the
// GPUs that answer; -1, unknown, takes cuda:0), so the workers of one host
// each get their own GPU while there are enough. An explicit cuda[:N] that
// cannot be honoured is an error (FailedPrecondition without CUDA in the build,
// Unavailable when no GPU answers, InvalidArgument when N is not below the
// count): never a silent fall-back to the CPU.
absl::StatusOr<DeviceChoice> ChooseDevice(const DeviceRequest& request,
                                          const GpuProbe& probe,
                                          bool cuda_built,
                                          const char* cuda_visible_devices,
                                          int local_rank = -1);

// This process's rank among the tasks of its host: TESSERA_LOCAL_RANK (set
// by tessera_local), else SLURM_LOCALID (set by srun), else -1.
int LocalRankFromEnvironment();

// ParseDeviceFlag, ProbeGpus and ChooseDevice with this process's
// environment and build.
absl::StatusOr<DeviceChoice> ChooseDeviceForFlag(absl::string_view flag);

// The CpuBackend or the CUDA backend on the chosen GPU.
absl::StatusOr<std::unique_ptr<Backend>> MakeBackend(
    const DeviceChoice& choice);

}  // namespace tessera

#endif  // TESSERA_WORKER_BACKEND_DEVICE_CHOICE_H_
