#ifndef TESSERA_PS_SERVER_ROW_TABLE_H_
#define TESSERA_PS_SERVER_ROW_TABLE_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "proto/ps_service.pb.h"
#include "ps_server/shard.h"

namespace tessera {

// What PullRows and PushRows need of a shard: rows addressed by their id
// in the whole variable. Two kinds implement it: FixedRowTable over a Shard
// (a row range of a fixed-vocabulary variable) and HashTable (a growing
// table whose rows appear on first access).
//
// Thread safety: all methods may be called concurrently.
class RowTable {
 public:
  virtual ~RowTable() = default;

  virtual const ShardDef& def() const = 0;
  // Floats per row.
  virtual int64_t row_elements() const = 0;
  // Values plus optimizer slots plus bookkeeping, in bytes: what is
  // allocated, including a growing table's room for rows not seen yet.
  virtual int64_t resident_bytes() const = 0;
  // Of resident_bytes, what the rows present take (values, slots and each
  // row's header); all of it for a fixed shard.
  virtual int64_t used_bytes() const = 0;

  // OK when every id may be read and updated here. Otherwise OutOfRange
  // naming the first id that belongs elsewhere (or ResourceExhausted when
  // a growing table cannot take that many new rows). Changes nothing.
  virtual absl::Status CheckIds(absl::Span<const int64_t> ids) const = 0;

  // How the rows' values are stored (ShardDef.precision).
  virtual RowPrecision precision() const = 0;

  // Copies the rows `ids`, in order, to dst (ids.size() * row_elements()
  // values of `wire`: ROW_FP32 widens a narrow table's values, which is
  // exact; the table's own precision copies them as stored) and returns
  // the version they belong to. A growing table creates the rows it does
  // not hold yet. REQUIRES: CheckIds(ids).ok(),
  // CheckWirePrecision(*this, wire).ok().
  virtual int64_t ReadAs(absl::Span<const int64_t> ids, RowPrecision wire,
                         void* dst) = 0;
  // ReadAs in fp32.
  int64_t Read(absl::Span<const int64_t> ids, float* dst) {
    return ReadAs(ids, ROW_FP32, dst);
  }

  // Applies one gradient row per id (grads holds ids.size() rows) with the
  // optimizer, touching only those rows and their slots, and returns the
  // new version. `schedule_step`: the update's step on the learning-rate
  // schedule, an asynchronous push's own step number (UpdateStep); 0: the
  // table's count of updates. REQUIRES: CheckIds(ids).ok(), ids unique,
  // grads finite.
  virtual int64_t Apply(absl::Span<const int64_t> ids,
                        absl::Span<const float> grads,
                        int64_t schedule_step) = 0;
  int64_t Apply(absl::Span<const int64_t> ids, absl::Span<const float> grads) {
    return Apply(ids, grads, /*schedule_step=*/0);
  }
};

// A Shard's rows [row_offset, row_offset + rows) by variable id. One
// exclusive lock per shard serialises the pushes of a fixed shard.
class FixedRowTable final : public RowTable {
 public:
  explicit FixedRowTable(std::shared_ptr<Shard> shard)
      : shard_(std::move(shard)) {}

  const ShardDef& def() const override { return shard_->def(); }
  int64_t row_elements() const override { return shard_->row_elements(); }
  int64_t resident_bytes() const override { return shard_->resident_bytes(); }
  int64_t used_bytes() const override { return shard_->resident_bytes(); }
  RowPrecision precision() const override { return shard_->precision(); }
  absl::Status CheckIds(absl::Span<const int64_t> ids) const override;
  int64_t ReadAs(absl::Span<const int64_t> ids, RowPrecision wire,
                 void* dst) override;
  using RowTable::Apply;
  int64_t Apply(absl::Span<const int64_t> ids, absl::Span<const float> grads,
                int64_t schedule_step) override;

 private:
  std::vector<int64_t> LocalRows(absl::Span<const int64_t> ids) const;

  const std::shared_ptr<Shard> shard_;
};

// OK when `table`'s rows may be pulled in `wire`: ROW_FP32 (widened), or
// the precision the table stores them in. InvalidArgument naming the shard
// and both precisions otherwise (a narrower view of an fp32 table would
// hand the worker values the server does not hold).
absl::Status CheckWirePrecision(const RowTable& table, RowPrecision wire);

// Makes `ids` unique by summing the gradient rows of repeated ids into the
// row of their first occurrence (`grads` holds ids->size() rows of
// `row_elements`), keeping first-occurrence order. This is what Keras'
// optimizers do to IndexedSlices before a sparse apply, so a push with a
// repeated id updates the row once, with the sum.
void SumDuplicateIds(std::vector<int64_t>* ids, std::vector<float>* grads,
                     int64_t row_elements);

}  // namespace tessera

#endif  // TESSERA_PS_SERVER_ROW_TABLE_H_
