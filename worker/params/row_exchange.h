// The embedding rows of a worker's steps. Pull maps each table's ids in
// the batch to its distinct rows and routes them once (RowRouting: which
// shard of which server holds each row), then fetches them: from every
// server at once (one PullRows per server: one round trip on the data
// plane), or copied out of the replica for a table the replica keeps
// whole (ReplicatedTables). The graph reads them (pulled, positions) and
// writes the rows' gradients into gradients(); Push sends those along the
// same routes, or adds a kept table's into the replica's gradient buffer
// for the all-reduce. The rows, their positions in the batch, the routes and
// the gradients stay here from the pull to the push.
//
// Thread safety: one step at a time. StartPull and StartPush run on the
// exchange's own thread, which makes one server's call itself and hands
// the others to kept threads (lanes); a push left in flight
// (hybrid:ssp:S) owns its routes and gradients and runs beside the next
// steps on a thread and lanes of its own.

#ifndef TESSERA_WORKER_PARAMS_ROW_EXCHANGE_H_
#define TESSERA_WORKER_PARAMS_ROW_EXCHANGE_H_

#include <cstdint>
#include <deque>
#include <future>
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/serial_executor.h"
#include "data/example_set.h"
#include "google/protobuf/repeated_field.h"
#include "proto/worker_service.pb.h"
#include "ps_server/client/ps_client.h"
#include "worker/backend/host_memory.h"
#include "worker/data/batch_view.h"
#include "worker/nn/graph.h"
#include "worker/params/mirrored_parameters.h"
#include "worker/params/replicated_tables.h"
#include "worker/params/row_routing.h"

namespace tessera {

class RowExchange {
 public:
  struct Options {
    // The graph whose tables' rows are exchanged; must outlive this.
    const Graph* graph = nullptr;
    // The tables the replica keeps whole, and the replica (null: none;
    // then `kept` is empty), which must outlive this.
    ReplicatedTables kept;
    MirroredParameters* replica = nullptr;
    // The other tables are on the parameter servers (when `servers`):
    // their placements (read by Create only), and clients[k] for ps task
    // k, which must outlive this.
    bool servers = false;
    const google::protobuf::RepeatedPtrField<VariablePlacement>* placements =
        nullptr;
    std::vector<PsClient*> clients;
    // hybrid:ssp:S: how many pushes may stay in flight while the next
    // steps train (S); 0: each step's push ends within it.
    int pushes_in_flight = 0;
    // The rows' host memory (the backend's: pinned on a GPU, so the copy
    // to the device is asynchronous); must outlive this.
    HostAllocator* host_memory = nullptr;
  };
  // InvalidArgument names a table whose placement does not fit.
  static absl::StatusOr<std::unique_ptr<RowExchange>> Create(Options options);
  ~RowExchange();

  // Whether the graph has tables at all.
  bool empty() const { return tables_.empty(); }

  // Maps `batch`'s ids of every table to distinct rows and fetches them
  // (in sync mode, `sync_step` set: the rows after every global step
  // before it). StartPull runs on the exchange's thread; `batch` must
  // stay unchanged until its future is ready.
  absl::Status Pull(const HostBatch& batch,
                    std::optional<int64_t> sync_step = std::nullopt);
  std::future<absl::Status> StartPull(const HostBatch& batch,
                                      std::optional<int64_t> sync_step);
  // The pulled rows of each table, and per table each collected id's
  // index among them: the graph's view of the batch (ViewOf).
  const std::vector<absl::Span<const float>>& pulled() const { return pulled_; }
  const std::vector<std::vector<int64_t>>& positions() const {
    return positions_;
  }
  // Where the graph writes this step's row gradients (Graph::TrainStep).
  std::vector<TableGradient>* gradients() { return &grads_; }

  // Pushes this step's gradients(): a kept table's into the replica's
  // gradient buffer now, the served tables' (times `scale` when it is
  // neither 0 nor 1: a sync step's weight) to the servers on the
  // exchange's thread, as a part of sync step `sync` (null: untagged).
  // The future is that push's; invalid when nothing went to the servers
  // or the push stays in flight (WaitForPushes).
  std::future<absl::Status> StartPush(float scale, const SyncPush* sync);
  // A worker without examples in a sync step: the servers' tables get its
  // empty part of the step.
  std::future<absl::Status> StartEmptyPush(const SyncPush& sync);
  // Waits until at most `at_most` pushes are in flight; the first error
  // among those waited for.
  absl::Status WaitForPushes(size_t at_most);

 private:
  explicit RowExchange(Options options);

  // Kept threads, one per server but one: a step's calls to the servers
  // run at once, the last on the calling thread.
  using Lanes = std::vector<std::unique_ptr<SerialExecutor>>;

  // Pull's fetch from the replica of kept table t.
  absl::Status GatherKept(int t);
  // Pull's fetch of the served tables' rows (unique_) from the servers,
  // keeping their routes in routes_.
  absl::Status PullServed(std::optional<int64_t> sync_step);
  // The rows routes_.per_ps[k] holds, from server k into rows_.
  absl::Status PullFrom(int k, std::optional<int64_t> sync_step);
  // Sends `grads` (per served table) along `routes` on the exchange's
  // thread, or on the in-flight one.
  std::future<absl::Status> Send(RowRoutes routes,
                                 std::vector<std::vector<float>> grads,
                                 const SyncPush* sync);
  // Pushes grads[t] ([routes.rows[t], dim]: one summed gradient per
  // distinct row) of every served table along `routes`, every server at
  // once on `lanes`. InvalidArgument for a gradient of the wrong size; a
  // server's refusal as it is. With a lockstep `sync`, every shard of
  // every table hears of the step, one none of the rows are on too.
  absl::Status PushAlong(const RowRoutes& routes,
                         absl::Span<const std::vector<float>> grads,
                         const SyncPush* sync, Lanes* lanes) const;
  // Server k's part of PushAlong.
  absl::Status PushTo(int k, const std::vector<ShardRows>& on_ps,
                      absl::Span<const std::vector<float>> grads,
                      const SyncPush* sync, bool every_shard) const;
  // Pull's routes for the served tables' gradients, when the graph's
  // gradient has one row per pulled row in order (as TrainStep makes it);
  // else the gradients' own rows routed anew.
  absl::Status RoutesOfGradients(RowRoutes* routes,
                                 std::vector<std::vector<float>>* grads);

  const Options options_;
  const std::vector<VariableDef> tables_;
  // Per table: its index among the served tables, -1 for a kept one; per
  // served table, its index among the tables.
  std::vector<int> served_, table_of_served_;
  // Where the served tables' rows are (none: no table is served).
  std::optional<RowRouting> routing_;

  // Per step, reused: the batch's ids of a table, and per table the
  // distinct rows, each id's position among them, the pulled rows and
  // the rows' gradients; the served tables' routes.
  std::vector<int64_t> ids_;
  std::vector<std::vector<int64_t>> unique_, positions_;
  std::vector<HostBuffer<float>> rows_;
  std::vector<absl::Span<const float>> pulled_;  // views of rows_
  std::vector<TableGradient> grads_;
  RowRoutes routes_;

  std::deque<std::future<absl::Status>> in_flight_;
  // The lanes of the exchange's thread and of the pushes left in flight
  // (empty unless pushes stay in flight): each fans out its own calls, so
  // a pull never waits behind a push in flight to the same server.
  Lanes lanes_, push_lanes_;
  // Last, so they end their work while the members above still exist.
  SerialExecutor calls_;
  SerialExecutor pushes_;  // the pushes left in flight
};

}  // namespace tessera

#endif  // TESSERA_WORKER_PARAMS_ROW_EXCHANGE_H_
