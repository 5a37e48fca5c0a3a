// The CPU-only twin of nccl_allreduce.cu, for builds without nvcc or NCCL.
#include "worker/collective/nccl_allreduce.h"

namespace tessera {
namespace {

absl::Status NoNccl() {
  return absl::UnavailableError(
      "this build has no NCCL (nvcc or nccl.h were not found when it was "
      "configured); use the ring all-reduce");
}

}  // namespace

struct NcclAllReduce::Impl {};

bool NcclBuilt() { return false; }

absl::Status NcclLoadable() { return NoNccl(); }

absl::StatusOr<std::string> NcclAllReduce::NewUniqueId() { return NoNccl(); }

absl::StatusOr<std::unique_ptr<NcclAllReduce>> NcclAllReduce::Create(
    int rank, int num_ranks, const std::string& unique_id, int device,
    double timeout_s, double init_timeout_s) {
  return NoNccl();
}

void NcclAllReduce::Abort(const absl::Status& why) {}

NcclAllReduce::NcclAllReduce(int rank, int num_ranks,
                             std::unique_ptr<Impl> impl)
    : rank_(rank), num_ranks_(num_ranks), impl_(std::move(impl)) {}

NcclAllReduce::~NcclAllReduce() = default;

absl::Status NcclAllReduce::AllReduce(absl::Span<float> data) {
  return NoNccl();
}

absl::Status NcclAllReduce::AllReduceOnDevice(absl::Span<float> data,
                                              void* producer_stream) {
  return NoNccl();
}

absl::Status NcclAllReduce::AllReduceHost(absl::Span<float> host) {
  return NoNccl();
}

}  // namespace tessera
