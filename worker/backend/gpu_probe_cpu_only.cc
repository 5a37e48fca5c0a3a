// The CPU-only twin of gpu_probe.cu, for builds without nvcc.
#include "worker/backend/gpu_probe.h"

namespace tessera {

GpuProbe ProbeGpus() { return GpuProbe{0, "this build has no CUDA support"}; }

}  // namespace tessera
