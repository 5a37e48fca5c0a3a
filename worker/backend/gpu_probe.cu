#include <cuda_runtime.h>

#include <string>

#include "worker/backend/gpu_probe.h"

namespace tessera {

GpuProbe ProbeGpus() {
  GpuProbe probe;
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    probe.detail = std::string("CUDA runtime: ") + cudaGetErrorString(err);
    return probe;
  }
  probe.count = count;
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop;
    if (cudaGetDeviceProperties(&prop, i) == cudaSuccess) {
      if (!probe.detail.empty()) probe.detail += ", ";
      probe.detail += "cuda:" + std::to_string(i) + " " + prop.name;
    }
  }
  if (count == 0) probe.detail = "CUDA runtime: no device";
  return probe;
}

}  // namespace tessera
