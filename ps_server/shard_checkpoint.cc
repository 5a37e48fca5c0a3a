// Saving (SaveShardCheckpoint); restoring is in shard_restore.cc.
#include "ps_server/shard_checkpoint.h"

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/checkpoint/checkpoint_dir.h"
#include "common/checkpoint/checkpoint_file.h"

namespace tessera {
namespace {

// Appends one array of a hash table's entry, row by row, through a buffer
// of a few hundred KiB, so a row costs a memcpy rather than a call into the
// writer. Keeps the first error; later appends are skipped.
class ArrayAppender {
 public:
  explicit ArrayAppender(CheckpointWriter* writer) : writer_(writer) {
    buffer_.reserve(kBufferBytes);
  }

  void Add(const void* data, size_t size) {
    if (!status_.ok()) return;
    if (buffer_.size() + size > kBufferBytes) Flush();
    if (size >= kBufferBytes) {
      if (status_.ok()) {
        status_ = writer_->Append(
            absl::string_view(static_cast<const char*>(data), size));
      }
      return;
    }
    buffer_.append(static_cast<const char*>(data), size);
  }

  absl::Status Finish() {
    Flush();
    return status_;
  }

 private:
  static constexpr size_t kBufferBytes = 256 << 10;

  void Flush() {
    if (status_.ok() && !buffer_.empty()) status_ = writer_->Append(buffer_);
    buffer_.clear();
  }

  CheckpointWriter* const writer_;
  std::string buffer_;
  absl::Status status_;
};

std::vector<int64_t> DimsOf(const TensorShape& shape) {
  return std::vector<int64_t>(shape.dims().begin(), shape.dims().end());
}

absl::Status WriteDense(const Shard& shard, CheckpointWriter* writer) {
  const std::vector<std::string> slots = CheckpointSlotNames(shard.optimizer());
  const std::vector<int64_t> dims = DimsOf(shard.def().shape());
  return shard.VisitState([&](const ShardStateView& view) {
    std::vector<CheckpointArrayView> arrays;
    if (view.precision == ROW_FP32) {
      arrays.push_back(CheckpointArrayView::Of<float>(kCheckpointValuesKey,
                                                      view.values, dims));
    } else {
      arrays.push_back(CheckpointArrayView{
          {kCheckpointValuesKey, CheckpointValuesDtype(view.precision), dims},
          absl::string_view(reinterpret_cast<const char*>(view.narrow.data()),
                            view.narrow.size() * sizeof(uint16_t))});
    }
    for (size_t k = 0; k < slots.size(); ++k) {
      const int k_int = static_cast<int>(k);
      // A row-wise slot is [rows, its floats per row].
      const std::vector<int64_t> slot_dims =
          shard.slot_row_elements(k_int) == shard.row_elements()
              ? dims
              : std::vector<int64_t>{shard.rows(),
                                     shard.slot_row_elements(k_int)};
      arrays.push_back(CheckpointArrayView::Of<float>(
          CheckpointSlotKey(slots[k]), view.slots[k], slot_dims));
    }
    const int64_t version = view.version;
    const int64_t updates = view.updates;
    arrays.push_back(CheckpointArrayView::Of<int64_t>(
        kCheckpointVersionKey, absl::MakeConstSpan(&version, 1), {1}));
    arrays.push_back(CheckpointArrayView::Of<int64_t>(
        kCheckpointUpdatesKey, absl::MakeConstSpan(&updates, 1), {1}));
    return writer->WriteEntry(shard.def().name(), arrays);
  });
}

// Writes a hash table's entry and sets *rows to the rows it holds. Each
// array is one pass over the rows, which come in the same order each time.
absl::Status WriteHash(const HashTable& table, CheckpointWriter* writer,
                       int64_t* rows) {
  const std::vector<std::string> slots = CheckpointSlotNames(table.optimizer());
  const int64_t dim = table.row_elements();
  // The values as stored: a narrow table's 2-byte bits, never widened.
  const size_t row_bytes = dim * RowPrecisionBytes(table.precision());
  constexpr bool kStored = false;  // ForEach's `widen`
  return table.VisitRows([&](const HashTable::Rows& view) -> absl::Status {
    const int64_t n = view.size();
    *rows = n;
    std::vector<CheckpointArrayInfo> arrays;
    arrays.push_back({kCheckpointIdsKey, CheckpointDtype::kInt64, {n}});
    arrays.push_back({kCheckpointValuesKey,
                      CheckpointValuesDtype(table.precision()),
                      {n, dim}});
    for (size_t k = 0; k < slots.size(); ++k) {
      arrays.push_back({CheckpointSlotKey(slots[k]),
                        CheckpointDtype::kFloat32,
                        {n, table.slot_row_elements(static_cast<int>(k))}});
    }
    arrays.push_back({kCheckpointStepKey, CheckpointDtype::kInt64, {1}});
    if (table.tracks_seen()) {
      arrays.push_back(
          {kCheckpointStepsUnseenKey, CheckpointDtype::kInt64, {n}});
      arrays.push_back({kCheckpointPushesKey, CheckpointDtype::kInt32, {n}});
      arrays.push_back({kCheckpointSweptKey, CheckpointDtype::kUint8, {n}});
    }
    if (absl::Status s = writer->BeginEntry(table.def().name(), arrays);
        !s.ok()) {
      return s;
    }
    ArrayAppender out(writer);
    view.ForEach(
        [&](const HashRowRef& row) { out.Add(&row.id, sizeof(row.id)); },
        kStored);
    view.ForEach([&](const HashRowRef& row) { out.Add(row.stored, row_bytes); },
                 kStored);
    for (size_t k = 0; k < slots.size(); ++k) {
      const int k_int = static_cast<int>(k);
      const int64_t offset = table.slot_offset(k_int);
      const size_t slot_bytes = table.slot_row_elements(k_int) * sizeof(float);
      view.ForEach(
          [&](const HashRowRef& row) {
            out.Add(row.slots + offset, slot_bytes);
          },
          kStored);
    }
    const int64_t step = view.step();
    out.Add(&step, sizeof(step));
    if (table.tracks_seen()) {
      view.ForEach(
          [&](const HashRowRef& row) {
            const int64_t unseen = row.steps_unseen;
            out.Add(&unseen, sizeof(unseen));
          },
          kStored);
      view.ForEach(
          [&](const HashRowRef& row) {
            const int32_t pushes = static_cast<int32_t>(row.pushes);
            out.Add(&pushes, sizeof(pushes));
          },
          kStored);
      view.ForEach(
          [&](const HashRowRef& row) {
            const uint8_t swept = row.swept ? 1 : 0;
            out.Add(&swept, sizeof(swept));
          },
          kStored);
    }
    if (absl::Status s = out.Finish(); !s.ok()) return s;
    // EndEntry refuses an entry whose rows were not all appended.
    return writer->EndEntry();
  });
}

// This server's part of `def`'s variable, added to `response` the first
// time. FailedPrecondition when two shards of one variable disagree.
absl::StatusOr<CheckpointVariable*> VariableFor(
    const StoredShard& stored,
    absl::flat_hash_map<std::string, CheckpointVariable*>* variables,
    SaveShardsResponse* response) {
  const ShardDef& def = stored.def();
  const Optimizer& optimizer =
      stored.shard ? stored.shard->optimizer() : stored.table->optimizer();
  const std::vector<std::string> slots = CheckpointSlotNames(optimizer);
  const char* kind = stored.shard ? kDenseKind : kHashKind;
  auto [it, added] = variables->try_emplace(def.variable(), nullptr);
  if (!added) {
    CheckpointVariable* v = it->second;
    const bool same_slots = std::equal(v->slots().begin(), v->slots().end(),
                                       slots.begin(), slots.end());
    if (v->kind() != kind || !same_slots ||
        v->shape().SerializeAsString() !=
            def.variable_shape().SerializeAsString()) {
      return absl::FailedPreconditionError(
          absl::StrCat("shards of variable ", def.variable(),
                       " on this server disagree on kind, shape or optimizer "
                       "slots (shard ",
                       def.name(), ")"));
    }
    return v;
  }
  CheckpointVariable* v = response->add_variables();
  v->set_name(def.variable());
  *v->mutable_shape() = def.variable_shape();
  v->set_dtype(def.dtype());
  v->set_kind(kind);
  for (const std::string& slot : slots) v->add_slots(slot);
  it->second = v;
  return v;
}

}  // namespace

std::vector<std::string> CheckpointSlotNames(const Optimizer& optimizer) {
  std::vector<std::string> names;
  for (int k = 0; k < optimizer.num_slots(); ++k) {
    names.push_back(optimizer.slot_name(k));
  }
  return names;
}

std::string CheckpointSlotKey(absl::string_view slot) {
  return absl::StrCat("slot/", slot);
}

CheckpointDtype CheckpointValuesDtype(RowPrecision precision) {
  switch (precision) {
    case ROW_FP16:
      return CheckpointDtype::kFloat16;
    case ROW_BF16:
      return CheckpointDtype::kBFloat16;
    default:
      return CheckpointDtype::kFloat32;
  }
}

absl::StatusOr<RowPrecision> RowPrecisionOfValues(CheckpointDtype dtype) {
  switch (dtype) {
    case CheckpointDtype::kFloat32:
      return ROW_FP32;
    case CheckpointDtype::kFloat16:
      return ROW_FP16;
    case CheckpointDtype::kBFloat16:
      return ROW_BF16;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat(CheckpointDtypeName(dtype),
                       " is not a precision of values (float32, float16 or "
                       "bfloat16)"));
  }
}

absl::Status SaveShardCheckpoint(const ShardStore& store,
                                 const std::string& directory, int ps_index,
                                 SaveShardsResponse* response) {
  if (ps_index < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("SaveShards: ps_index must be >= 0, got ", ps_index));
  }
  return SaveShardCheckpointAs(store, directory, PsCheckpointFileName(ps_index),
                               ps_index, response);
}

absl::Status SaveShardCheckpointAs(const ShardStore& store,
                                   const std::string& directory,
                                   const std::string& file_name, int saved_by,
                                   SaveShardsResponse* response) {
  absl::StatusOr<std::unique_ptr<CheckpointWriter>> writer =
      CheckpointWriter::Create(absl::StrCat(directory, "/", file_name));
  if (!writer.ok()) return writer.status();

  response->Clear();
  absl::flat_hash_map<std::string, CheckpointVariable*> variables;
  for (const StoredShard& stored : store.List()) {
    const ShardDef& def = stored.def();
    absl::StatusOr<CheckpointVariable*> variable =
        VariableFor(stored, &variables, response);
    if (!variable.ok()) return variable.status();
    CheckpointShard* saved = (*variable)->add_shards();
    saved->set_index(def.index());
    saved->set_ps(saved_by);
    saved->set_file(file_name);
    saved->set_entry(def.name());
    if (stored.shard != nullptr) {
      if (absl::Status s = WriteDense(*stored.shard, writer->get()); !s.ok()) {
        return s;
      }
      saved->set_row_offset(def.row_offset());
      *saved->mutable_shape() = def.shape();
    } else {
      int64_t rows = 0;
      if (absl::Status s = WriteHash(*stored.table, writer->get(), &rows);
          !s.ok()) {
        return s;
      }
      saved->mutable_shape()->add_dims(rows);
      saved->mutable_shape()->add_dims(stored.table->row_elements());
    }
  }
  absl::StatusOr<CheckpointFileSummary> summary = (*writer)->Finish();
  if (!summary.ok()) return summary.status();
  CheckpointFile* file = response->mutable_file();
  file->set_name(file_name);
  file->set_ps(saved_by);
  file->set_size_bytes(summary->size_bytes);
  file->set_crc32c(summary->crc32c);
  return absl::OkStatus();
}

}  // namespace tessera
