#include "worker/backend/device_choice.h"

#include <cstdlib>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "worker/backend/cpu/cpu_backend.h"
#include "worker/backend/cuda/cuda_backend.h"

namespace tessera {
namespace {

std::string VisibleNote(const char* cuda_visible_devices) {
  if (cuda_visible_devices == nullptr) return "CUDA_VISIBLE_DEVICES unset";
  return absl::StrCat("CUDA_VISIBLE_DEVICES=\"", cuda_visible_devices, "\"");
}

}  // namespace

absl::StatusOr<DeviceRequest> ParseDeviceFlag(absl::string_view flag) {
  DeviceRequest request;
  if (flag == "auto") return request;
  if (flag == "cpu") {
    request.kind = DeviceRequest::Kind::kCpu;
    return request;
  }
  absl::string_view rest = flag;
  if (absl::ConsumePrefix(&rest, "cuda")) {
    request.kind = DeviceRequest::Kind::kCuda;
    if (rest.empty()) return request;
    int ordinal = -1;
    if (absl::ConsumePrefix(&rest, ":") && !rest.empty() &&
        rest.find_first_not_of("0123456789") == absl::string_view::npos &&
        absl::SimpleAtoi(rest, &ordinal) && ordinal >= 0) {
      request.ordinal = ordinal;
      return request;
    }
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "--device must be auto, cpu, cuda or cuda:N (N = 0, 1, ...), got \"",
      flag, "\""));
}

absl::StatusOr<DeviceChoice> ChooseDevice(const DeviceRequest& request,
                                          const GpuProbe& probe,
                                          bool cuda_built,
                                          const char* cuda_visible_devices,
                                          int local_rank) {
  const std::string visible = VisibleNote(cuda_visible_devices);
  DeviceChoice cpu;
  cpu.device = "cpu";
  switch (request.kind) {
    case DeviceRequest::Kind::kCpu:
      cpu.reason = "asked for with --device=cpu";
      return cpu;
    case DeviceRequest::Kind::kAuto:
      if (!cuda_built) {
        cpu.reason =
            "auto: this build has no CUDA backend (nvcc was not found when "
            "it was configured)";
        return cpu;
      }
      if (probe.count == 0) {
        cpu.reason = absl::StrCat("auto: no GPU answers (", probe.detail, "; ",
                                  visible, ")");
        return cpu;
      }
      break;
    case DeviceRequest::Kind::kCuda: {
      const std::string asked = absl::StrCat("--device=cuda:", request.ordinal);
      if (!cuda_built) {
        return absl::FailedPreconditionError(absl::StrCat(
            asked,
            " but this build has no CUDA backend (nvcc was not found when it "
            "was configured); use --device=cpu or --device=auto"));
      }
      if (probe.count == 0) {
        return absl::UnavailableError(absl::StrCat(
            asked, " but no GPU answers (", probe.detail, "; ", visible, ")"));
      }
      if (request.ordinal >= probe.count) {
        return absl::InvalidArgumentError(absl::StrCat(
            asked, " but only ", probe.count, " GPU(s) answer (", probe.detail,
            "; ", visible,
            "); N counts the GPUs CUDA_VISIBLE_DEVICES leaves visible"));
      }
      break;
    }
  }
  DeviceChoice gpu;
  gpu.cuda = true;
  std::string why;
  if (request.kind == DeviceRequest::Kind::kCuda) {
    gpu.ordinal = request.ordinal;
    why = absl::StrCat("asked for with --device=cuda:", gpu.ordinal, "; ");
  } else if (local_rank < 0) {
    gpu.ordinal = 0;
    why = "auto: took the first visible GPU (no local rank known); ";
  } else {
    gpu.ordinal = local_rank % probe.count;
    why = absl::StrCat("auto: local rank ", local_rank, " takes GPU ",
                       gpu.ordinal,
                       local_rank >= probe.count
                           ? " (more workers than GPUs on this host: shared)"
                           : "",
                       "; ");
  }
  gpu.device = absl::StrCat("cuda:", gpu.ordinal);
  gpu.reason = absl::StrCat(why, probe.count, " GPU(s) answer (", probe.detail,
                            "; ", visible, ")");
  return gpu;
}

absl::StatusOr<DeviceChoice> ChooseDeviceForFlag(absl::string_view flag) {
  absl::StatusOr<DeviceRequest> request = ParseDeviceFlag(flag);
  if (!request.ok()) return request.status();
  GpuProbe probe;
  if (request->kind == DeviceRequest::Kind::kCpu) {
    probe.detail = "not probed";
  } else {
    probe = ProbeGpus();
  }
  return ChooseDevice(*request, probe, CudaBackendBuilt(),
                      std::getenv("CUDA_VISIBLE_DEVICES"),
                      LocalRankFromEnvironment());
}

int LocalRankFromEnvironment() {
  for (const char* name : {"TESSERA_LOCAL_RANK", "SLURM_LOCALID"}) {
    const char* value = std::getenv(name);
    int rank = -1;
    if (value != nullptr && absl::SimpleAtoi(value, &rank) && rank >= 0) {
      return rank;
    }
  }
  return -1;
}

absl::StatusOr<std::unique_ptr<Backend>> MakeBackend(
    const DeviceChoice& choice) {
  if (!choice.cuda) return std::unique_ptr<Backend>(new CpuBackend());
  return NewCudaBackend(choice.ordinal);
}

}  // namespace tessera
