#include "ps_server/row_reactors.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/byte_codec.h"
#include "common/rpc/grpc_status.h"
#include "ps_server/gradient_check.h"
#include "ps_server/row_push_apply.h"

namespace tessera {

absl::StatusOr<std::vector<int64_t>> DecodeIds(const RowTable& table,
                                               absl::string_view id_bytes) {
  absl::StatusOr<std::vector<int64_t>> ids =
      DecodeRaw<int64_t>(id_bytes, absl::StrCat(table.def().name(), " ids"));
  if (!ids.ok()) return ids.status();
  if (absl::Status s = table.CheckIds(*ids); !s.ok()) return s;
  return ids;
}

RowPullReactor::RowPullReactor(ShardStore* store,
                               const PullRowsRequest& request,
                               int64_t chunk_bytes) {
  absl::StatusOr<std::shared_ptr<RowTable>> table =
      store->FindRows(request.shard());
  if (!table.ok()) {
    Finish(ToGrpcStatus(table.status()));
    return;
  }
  table_ = *std::move(table);
  absl::StatusOr<std::vector<int64_t>> ids = DecodeIds(*table_, request.ids());
  if (!ids.ok()) {
    Finish(ToGrpcStatus(ids.status()));
    return;
  }
  ids_ = *std::move(ids);
  if (absl::Status s = CheckWirePrecision(*table_, request.precision());
      !s.ok()) {
    Finish(ToGrpcStatus(s));
    return;
  }
  precision_ = request.precision();
  const int64_t row_bytes = std::max<int64_t>(
      1, table_->row_elements() * RowPrecisionBytes(precision_));
  rows_per_chunk_ = std::max<int64_t>(1, chunk_bytes / row_bytes);
  NextWrite();
}

void RowPullReactor::NextWrite() {
  const int64_t total = static_cast<int64_t>(ids_.size());
  if (next_ >= total && !(total == 0 && next_ == 0)) {
    Finish(grpc::Status::OK);
    return;
  }
  const int64_t n = std::min(rows_per_chunk_, total - next_);
  const int64_t row_elements = table_->row_elements();
  chunk_.set_name(table_->def().name());
  chunk_.set_row_elements(row_elements);
  chunk_.set_first(next_);
  chunk_.set_precision(precision_);
  std::string* values = chunk_.mutable_values();
  values->resize(n * row_elements * RowPrecisionBytes(precision_));
  chunk_.set_version(table_->ReadAs(absl::MakeConstSpan(ids_.data() + next_, n),
                                    precision_, values->data()));
  next_ += std::max<int64_t>(n, 1);
  StartWrite(&chunk_);
}

void RowPullReactor::OnWriteDone(bool ok) {
  if (!ok) {
    Finish(grpc::Status(grpc::StatusCode::CANCELLED, "client went away"));
    return;
  }
  NextWrite();
}

void RowPullReactor::OnDone() { delete this; }

RowPushReactor::RowPushReactor(ShardStore* store, SyncSteps* sync_steps,
                               absl::StatusOr<std::optional<SyncPush>> sync,
                               absl::StatusOr<PushSize> declared,
                               PushResponse* response)
    : store_(store),
      sync_steps_(sync_steps),
      sync_(std::move(sync)),
      declared_(std::move(declared)),
      response_(response) {
  if (!sync_.ok() || !declared_.ok()) {
    Finish(ToGrpcStatus(!sync_.ok() ? sync_.status() : declared_.status()));
    return;
  }
  StartRead(&chunk_);
}

void RowPushReactor::OnReadDone(bool ok) {
  if (!ok) {
    // A cancelled call or a dropped connection ends the stream like the
    // client's last write; only the declaration tells them apart.
    if (received_rows_ != declared_->parts ||
        received_bytes_ != declared_->bytes) {
      Finish(ToGrpcStatus(absl::InvalidArgumentError(absl::StrCat(
          "PushRows: the stream ended after ", received_rows_, " rows and ",
          received_bytes_, " bytes, but the call declared ", declared_->parts,
          " rows and ", declared_->bytes,
          " bytes (cut off midway?); nothing was applied"))));
      return;
    }
    Finish(ToGrpcStatus(ApplyAll()));
    return;
  }
  if (absl::Status s = Accept(chunk_); !s.ok()) {
    Finish(ToGrpcStatus(s));
    return;
  }
  StartRead(&chunk_);
}

absl::Status RowPushReactor::Accept(const RowsChunk& chunk) {
  auto it = std::find_if(pending_.begin(), pending_.end(), [&](const auto& p) {
    return p.table->def().name() == chunk.name();
  });
  if (it == pending_.end()) {
    absl::StatusOr<std::shared_ptr<RowTable>> table =
        store_->FindRows(chunk.name());
    if (!table.ok()) return table.status();
    pending_.push_back(Pending{*std::move(table), {}, {}});
    it = pending_.end() - 1;
  }
  Pending& p = *it;
  const int64_t row_elements = p.table->row_elements();
  if (chunk.row_elements() != row_elements) {
    return absl::InvalidArgumentError(absl::StrCat(
        "wrong shape: rows of shard ", chunk.name(), " have ", row_elements,
        " elements, the gradient has ", chunk.row_elements()));
  }
  absl::StatusOr<std::vector<int64_t>> ids = DecodeIds(*p.table, chunk.ids());
  if (!ids.ok()) return ids.status();
  if (!RowPrecision_IsValid(chunk.precision())) {
    return absl::InvalidArgumentError(
        absl::StrCat("PushRows: shard ", chunk.name(), ": gradient precision ",
                     chunk.precision(), " is not fp32, fp16 or bf16"));
  }
  const size_t expected =
      ids->size() * row_elements * RowPrecisionBytes(chunk.precision());
  if (chunk.values().size() != expected) {
    return absl::InvalidArgumentError(absl::StrCat(
        "wrong shape: ", ids->size(), " ids of shard ", chunk.name(), " need ",
        expected, " bytes of ", RowPrecisionName(chunk.precision()),
        " values, got ", chunk.values().size()));
  }
  received_rows_ += static_cast<int64_t>(ids->size());
  received_bytes_ += static_cast<int64_t>(expected);
  if (received_rows_ > declared_->parts || received_bytes_ > declared_->bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("PushRows: shard ", chunk.name(),
                     ": the rows go past the ", declared_->parts, " rows and ",
                     declared_->bytes, " bytes the call declared"));
  }
  const size_t old = p.grads.size();
  p.grads.resize(old + ids->size() * row_elements);
  // Element numbers in the error count within this request's rows of the
  // shard, row-major, so "element e" is row e / row_elements of the push.
  if (expected > 0) {
    if (absl::Status s = WidenAndCheckFinite(
            chunk.precision(), chunk.values().data(),
            ids->size() * row_elements, p.grads.data() + old, chunk.name(),
            static_cast<int64_t>(old));
        !s.ok()) {
      return s;
    }
  }
  p.ids.insert(p.ids.end(), ids->begin(), ids->end());
  return absl::OkStatus();
}

absl::Status RowPushReactor::ApplyAll() {
  std::vector<RowGradient> parts;
  parts.reserve(pending_.size());
  for (Pending& p : pending_) parts.push_back({p.table, &p.ids, &p.grads});
  return ApplyRowPush(parts, *sync_, sync_steps_, response_);
}

void RowPushReactor::OnDone() { delete this; }

}  // namespace tessera
