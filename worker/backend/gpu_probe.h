#ifndef TESSERA_WORKER_BACKEND_GPU_PROBE_H_
#define TESSERA_WORKER_BACKEND_GPU_PROBE_H_

#include <string>

namespace tessera {

struct GpuProbe {
  int count = 0;       // GPUs that answered
  std::string detail;  // why none, or their names
};

// Asks the CUDA runtime which GPUs answer (honouring
// CUDA_VISIBLE_DEVICES). Never fails: a build without CUDA, a machine
// without a driver or without a GPU all give count 0 and say why.
GpuProbe ProbeGpus();

}  // namespace tessera

#endif  // TESSERA_WORKER_BACKEND_GPU_PROBE_H_
