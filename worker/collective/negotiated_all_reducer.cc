#include "worker/collective/negotiated_all_reducer.h"

#include <cmath>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "glog/logging.h"
#include "worker/collective/nccl_allreduce.h"

namespace tessera {
namespace {

// NCCL's unique id is 128 bytes (NCCL_UNIQUE_ID_BYTES).
constexpr int kIdBytes = 128;

// The NCCL communicator behind the host-memory interface of the ring, and
// its own device-memory one.
class HostStagedNccl final : public AllReducer {
 public:
  explicit HostStagedNccl(std::unique_ptr<NcclAllReduce> nccl)
      : nccl_(std::move(nccl)) {}
  int rank() const override { return nccl_->rank(); }
  int num_ranks() const override { return nccl_->num_ranks(); }
  Memory memory() const override { return Memory::kHost; }
  absl::Status AllReduce(absl::Span<float> data) override {
    return nccl_->AllReduceHost(data);
  }
  void Abort(const absl::Status& why) override { nccl_->Abort(why); }
  bool on_device() const override { return true; }
  absl::Status AllReduceOnDevice(absl::Span<float> data,
                                 void* producer_stream) override {
    return nccl_->AllReduceOnDevice(data, producer_stream);
  }

 private:
  std::unique_ptr<NcclAllReduce> nccl_;
};

// The sum of one vote per rank, as an integer: DataLoss naming the value
// when it is not a whole number in [0, n], which no n honest votes of 0
// or 1 make (a peer running other code, or a corrupted stream). Every rank
// sees the same bits, so all of them fail alike.
absl::StatusOr<int> CountVotes(float total, int n, const char* what) {
  if (!(total >= 0.0f && total <= static_cast<float>(n)) ||
      total != std::floor(total)) {
    return absl::DataLossError(absl::StrCat(
        "all-reduce negotiation: the ", what, " votes of ", n,
        " workers sum to ", total, ", not a count in [0, ", n, "]"));
  }
  return static_cast<int>(total);
}

// This rank's vote: 1 for NCCL if it can load and use it, then rank 0's
// NCCL unique id as one float per byte (0 from the other ranks), so that
// the sum carries it to every rank.
std::vector<float> Offer(const NcclChoice& choice, int rank) {
  bool can = choice.cuda_device >= 0 && choice.make != nullptr;
  if (can && choice.load != nullptr) {
    // Loaded only now, by a worker that could use it: a CPU worker, or a
    // job without mirrored training, never maps NCCL.
    if (absl::Status loaded = choice.load(); !loaded.ok()) {
      LOG(WARNING) << "all-reduce: this worker votes for the ring, NCCL "
                      "cannot be loaded here: "
                   << loaded.message();
      can = false;
    }
  }
  std::vector<float> offer(1 + kIdBytes, 0.0f);
  offer[0] = can ? 1.0f : 0.0f;
  if (rank == 0 && can) {
    absl::StatusOr<std::string> id = choice.new_id();
    if (!id.ok() || id->size() != kIdBytes) {
      LOG(WARNING) << "all-reduce: no NCCL unique id ("
                   << (id.ok() ? absl::StrCat(id->size(), " bytes")
                               : id.status().ToString())
                   << "); voting for the ring";
      offer[0] = 0.0f;
    } else {
      for (int i = 0; i < kIdBytes; ++i) {
        offer[1 + i] = static_cast<float>(static_cast<uint8_t>((*id)[i]));
      }
    }
  }
  return offer;
}

// The NCCL unique id in a summed offer; DataLoss for a sum that is not a
// byte.
absl::StatusOr<std::string> IdOf(absl::Span<const float> offer) {
  std::string id(kIdBytes, '\0');
  for (int i = 0; i < kIdBytes; ++i) {
    // Only rank 0 adds id bytes; a sum outside a byte is some peer's fault.
    const float byte = offer[1 + i];
    if (!(byte >= 0.0f && byte <= 255.0f) || byte != std::floor(byte)) {
      return absl::DataLossError(absl::StrCat(
          "all-reduce negotiation: byte ", i, " of the NCCL unique id sums to ",
          byte, ", not a byte value"));
    }
    id[i] = static_cast<char>(static_cast<uint8_t>(byte));
  }
  return id;
}

}  // namespace

double NcclInitTimeout(double timeout_s) { return timeout_s / 2; }

NcclChoice DefaultNcclChoice(int cuda_device, double timeout_s) {
  NcclChoice choice;
  choice.cuda_device = cuda_device;
  if (!NcclBuilt()) return choice;
  choice.make = [cuda_device, timeout_s](int rank, int num_ranks,
                                         const std::string& id)
      -> absl::StatusOr<std::unique_ptr<AllReducer>> {
    absl::StatusOr<std::unique_ptr<NcclAllReduce>> nccl =
        NcclAllReduce::Create(rank, num_ranks, id, cuda_device, timeout_s,
                              NcclInitTimeout(timeout_s));
    if (!nccl.ok()) return nccl.status();
    return std::unique_ptr<AllReducer>(
        std::make_unique<HostStagedNccl>(*std::move(nccl)));
  };
  choice.new_id = [] { return NcclAllReduce::NewUniqueId(); };
  choice.load = [] { return NcclLoadable(); };
  return choice;
}

NegotiatedAllReducer::NegotiatedAllReducer(AllReducer* ring, NcclChoice nccl)
    : ring_(ring), choice_(std::move(nccl)) {}

absl::Status NegotiatedAllReducer::Negotiate() {
  const int n = num_ranks();
  std::vector<float> offer = Offer(choice_, rank());
  // What this rank voted (rank 0 may have withdrawn for want of an id).
  const bool voted = offer[0] == 1.0f;
  if (absl::Status s = ring_->AllReduce(absl::MakeSpan(offer)); !s.ok()) {
    return s;
  }
  absl::StatusOr<int> votes = CountVotes(offer[0], n, "GPU");
  if (!votes.ok()) return votes.status();
  if (*votes != n) {
    LOG(INFO) << "all-reduce: ring over gRPC (" << *votes << " of " << n
              << " workers have a GPU and NCCL; NCCL needs all of them)";
    return absl::OkStatus();
  }
  absl::StatusOr<std::string> id = IdOf(offer);
  if (!id.ok()) return id.status();
  // A total of n votes does not prove this rank voted 1 (a peer may have
  // miscounted): only a rank that voted for NCCL tries to join, and the
  // others vote 0 below, so that every rank stays on the ring together.
  absl::StatusOr<std::unique_ptr<AllReducer>> nccl =
      absl::FailedPreconditionError("this worker voted for the ring");
  if (voted) {
    nccl = choice_.make(rank(), n, *id);
    if (!nccl.ok()) {
      LOG(WARNING) << "all-reduce: joining NCCL failed on this worker: "
                   << nccl.status();
    }
  } else {
    LOG(WARNING) << "all-reduce: the workers' votes sum to " << n
                 << " but this one voted for the ring; voting against NCCL";
  }
  // Every rank must agree before any uses NCCL: one that failed to join
  // would otherwise wait on the ring while the others wait on NCCL.
  std::vector<float> joined = {nccl.ok() ? 1.0f : 0.0f};
  if (absl::Status s = ring_->AllReduce(absl::MakeSpan(joined)); !s.ok()) {
    return s;
  }
  absl::StatusOr<int> ok = CountVotes(joined[0], n, "NCCL join");
  if (!ok.ok()) return ok.status();
  if (*ok != n) {
    LOG(WARNING) << "all-reduce: ring over gRPC (only " << *ok << " of " << n
                 << " workers could join NCCL)";
    return absl::OkStatus();
  }
  {
    std::lock_guard<std::mutex> lock(abort_mu_);
    nccl_ = *std::move(nccl);
  }
  LOG(INFO) << "all-reduce: NCCL on cuda:" << choice_.cuda_device
            << " (every worker has a GPU; gradients are summed on the GPU "
               "where the backward pass leaves them)";
  return absl::OkStatus();
}

void NegotiatedAllReducer::Abort(const absl::Status& why) {
  ring_->Abort(why);
  std::lock_guard<std::mutex> lock(abort_mu_);
  if (nccl_ != nullptr) nccl_->Abort(why);
}

void NegotiatedAllReducer::Shutdown(const absl::Status& why) {
  ring_->Shutdown(why);
  std::lock_guard<std::mutex> lock(abort_mu_);
  if (nccl_ != nullptr) nccl_->Abort(why);
}

void NegotiatedAllReducer::LeaveNccl() {
  std::unique_ptr<AllReducer> nccl;
  {
    std::lock_guard<std::mutex> lock(abort_mu_);
    nccl = std::move(nccl_);
  }
  if (nccl != nullptr) {
    nccl->Abort(absl::AbortedError("the all-reduce group restarts"));
  }
  nccl.reset();
  negotiated_ = false;
}

absl::Status NegotiatedAllReducer::Restart(uint64_t epoch) {
  LeaveNccl();
  return ring_->Restart(epoch);
}

absl::Status NegotiatedAllReducer::Reform(int rank,
                                          std::vector<std::string> peers,
                                          uint64_t epoch) {
  LeaveNccl();
  return ring_->Reform(rank, std::move(peers), epoch);
}

absl::Status NegotiatedAllReducer::AllReduce(absl::Span<float> data) {
  if (!negotiated_) {
    if (absl::Status s = Negotiate(); !s.ok()) return s;
    negotiated_ = true;
  }
  if (nccl_ != nullptr) return nccl_->AllReduce(data);
  return ring_->AllReduce(data);
}

absl::Status NegotiatedAllReducer::AllReduceOnDevice(absl::Span<float> data,
                                                     void* producer_stream) {
  if (!on_device()) {
    return absl::FailedPreconditionError(
        "all-reduce on the device before every worker agreed on NCCL (the "
        "first AllReduce negotiates)");
  }
  return nccl_->AllReduceOnDevice(data, producer_stream);
}

}  // namespace tessera
