#include "ps_server/dense_push_reactor.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/rpc/grpc_status.h"
#include "grpcpp/support/slice.h"
#include "proto/ps_service.pb.h"
#include "ps_server/dense_push_apply.h"
#include "ps_server/finite_copy.h"
#include "ps_server/gradient_check.h"

namespace tessera {
namespace internal {

absl::Status CopyChunkAndCheckFinite(const TensorChunkView& chunk, float* dst,
                                     absl::string_view shard,
                                     int64_t first_element) {
  char* const out = reinterpret_cast<char*>(dst);
  size_t copied = 0;  // bytes
  // The error names the first bad element of `count` floats from `first`.
  auto refuse = [&](size_t first, size_t count) {
    return internal::NameNonFinite(absl::MakeConstSpan(dst + first, count),
                                   shard,
                                   first_element + static_cast<int64_t>(first));
  };
  for (absl::string_view piece : chunk.data) {
    const char* src = piece.data();
    size_t left = piece.size();
    // Complete a float the previous piece ended in the middle of.
    if (const size_t partial = copied % sizeof(float); partial != 0) {
      const size_t n = std::min(sizeof(float) - partial, left);
      std::memcpy(out + copied, src, n);
      copied += n;
      src += n;
      left -= n;
      if (copied % sizeof(float) == 0) {
        const size_t index = copied / sizeof(float) - 1;
        if (!std::isfinite(dst[index])) return refuse(index, 1);
      }
    }
    const size_t first = copied / sizeof(float);
    const size_t floats = left / sizeof(float);
    if (CopyFloatsAnyNonFinite(src, floats, dst + first)) {
      return refuse(first, floats);
    }
    copied += floats * sizeof(float);
    src += floats * sizeof(float);
    left -= floats * sizeof(float);
    // The start of a float the next piece completes (and checks).
    std::memcpy(out + copied, src, left);
    copied += left;
  }
  return absl::OkStatus();
}

}  // namespace internal

DensePushReactor::DensePushReactor(ShardStore* store, SyncSteps* sync_steps,
                                   absl::StatusOr<std::optional<SyncPush>> sync,
                                   absl::StatusOr<PushSize> declared,
                                   grpc::ByteBuffer* response)
    : store_(store),
      sync_steps_(sync_steps),
      sync_(std::move(sync)),
      declared_(std::move(declared)),
      response_(response) {
  if (!sync_.ok() || !declared_.ok()) {
    Finish(ToGrpcStatus(!sync_.ok() ? sync_.status() : declared_.status()));
    return;
  }
  StartRead(&message_);
}

void DensePushReactor::OnReadDone(bool ok) {
  if (!ok) {
    if (absl::Status s = Validate(); !s.ok()) {
      Finish(ToGrpcStatus(s));
      return;
    }
    FinishAndApply();
    return;
  }
  absl::Status s = parser_.Parse(message_);
  if (s.ok()) s = Accept(parser_.chunk());
  // Hand gRPC's receive buffers back before waiting for the next chunk.
  parser_.Clear();
  message_.Clear();
  if (!s.ok()) {
    Finish(ToGrpcStatus(s));
    return;
  }
  StartRead(&message_);
}

absl::Status DensePushReactor::Accept(const TensorChunkView& chunk) {
  const TensorChunkHeader& header = chunk.header;
  const bool continues = !pending_.empty() &&
                         pending_.back().shard->def().name() == header.name &&
                         header.offset != 0;
  if (!continues) {
    absl::StatusOr<std::shared_ptr<Shard>> shard = store_->Find(header.name);
    if (!shard.ok()) return shard.status();
    const int64_t expected = (*shard)->byte_size();
    if (header.total_bytes != expected) {
      return absl::InvalidArgumentError(absl::StrCat(
          "wrong shape: shard ", header.name, " has shape [",
          absl::StrJoin((*shard)->def().shape().dims(), ","), "] (", expected,
          " bytes) but the gradient has ", header.total_bytes, " bytes"));
    }
    for (const Pending& seen : pending_) {
      if (seen.shard == *shard) {
        return absl::InvalidArgumentError(
            absl::StrCat("shard ", header.name, " appears twice in one push"));
      }
    }
    if (static_cast<int64_t>(pending_.size()) >= declared_->parts) {
      return absl::InvalidArgumentError(absl::StrCat(
          "PushDense: shard ", header.name, " is one more than the ",
          declared_->parts, " the call declared"));
    }
    Pending p;
    p.shard = *std::move(shard);
    p.grad = p.shard->AcquireBuffer();
    p.base_version = header.version;
    pending_.push_back(std::move(p));
  }
  Pending& p = pending_.back();
  const int64_t size = chunk.data_bytes;
  const int64_t total = p.shard->byte_size();
  if (header.total_bytes != total) {
    return absl::InvalidArgumentError(absl::StrCat(
        "wrong shape: shard ", header.name, " holds ", total,
        " bytes but a chunk of its gradient says ", header.total_bytes));
  }
  if (header.offset != p.received || size % sizeof(float) != 0 ||
      p.received + size > total) {
    return absl::InvalidArgumentError(absl::StrCat(
        "shard ", header.name, ": chunk at byte ", header.offset, " of ", size,
        " bytes does not follow byte ", p.received, " of ", total));
  }
  if (received_bytes_ + size > declared_->bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "PushDense: shard ", header.name, ": chunk at byte ", header.offset,
        " goes past the ", declared_->bytes, " bytes the call declared"));
  }
  received_bytes_ += size;
  const int64_t first = p.received / sizeof(float);
  absl::Status finite = internal::CopyChunkAndCheckFinite(
      chunk, p.grad.get() + first, header.name, first);
  p.received += size;
  return finite;
}

absl::Status DensePushReactor::Validate() const {
  for (const Pending& p : pending_) {
    if (p.received != p.shard->byte_size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "shard ", p.shard->def().name(), ": gradient ended at byte ",
          p.received, " of ", p.shard->byte_size(), "; nothing was applied"));
    }
  }
  // A cancelled call or a dropped connection ends the stream like the
  // client's last write; between two shards only the declaration tells
  // them apart.
  if (static_cast<int64_t>(pending_.size()) != declared_->parts ||
      received_bytes_ != declared_->bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "PushDense: the stream ended after ", pending_.size(), " shards and ",
        received_bytes_, " bytes, but the call declared ", declared_->parts,
        " shards and ", declared_->bytes,
        " bytes (cut off midway?); nothing was applied"));
  }
  return absl::OkStatus();
}

void DensePushReactor::FinishAndApply() {
  std::vector<DenseGradient> grads;
  for (Pending& p : pending_) {
    grads.push_back(
        {p.shard, absl::MakeConstSpan(p.grad.get(), p.shard->num_elements())});
  }
  // OnDone (which deletes this reactor) waits for this reaction to return,
  // so the buffers stay valid while the update runs after Finish.
  ApplyDensePush(
      grads, *sync_, sync_steps_,
      [this](const absl::Status& status, const PushResponse& response) {
        if (!status.ok()) {
          Finish(ToGrpcStatus(status));
          return;
        }
        const grpc::Slice bytes(response.SerializeAsString());
        *response_ = grpc::ByteBuffer(&bytes, 1);
        Finish(grpc::Status::OK);
      });
}

void DensePushReactor::OnDone() {
  for (Pending& p : pending_) p.shard->ReleaseBuffer(std::move(p.grad));
  delete this;
}

}  // namespace tessera
