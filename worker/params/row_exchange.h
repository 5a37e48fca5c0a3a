// The embedding rows of a worker's steps. Pull maps each table's ids in
// the batch to its distinct rows and routes them once (which shard of
// which server holds each row), then fetches them: from the servers, or
// copied out of the replica for a table the replica keeps whole
// (ReplicatedTables). The graph reads them (pulled, positions) and
// writes the rows' gradients into gradients(); Push sends those along the
// same routes, or adds a kept table's into the replica's gradient buffer
// for the all-reduce. The rows, their positions in the batch, the routes and
// the gradients stay here from the pull to the push.
//
// Thread safety: one step at a time. StartPull and StartPush run on the
// exchange's own thread; a push left in flight (hybrid:ssp:S) owns its
// routes and gradients and runs beside the next steps.

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
#include "worker/params/sparse_parameters.h"

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

  // Pull's fetch from the replica of kept table t.
  absl::Status GatherKept(int t);
  // Sends `grads` (per served table) along `routes` on the exchange's
  // thread, or on the in-flight one.
  std::future<absl::Status> Send(SparseParameters::Routes routes,
                                 std::vector<std::vector<float>> grads,
                                 const SyncPush* sync);
  // Pull's routes for the served tables' gradients, when the graph's
  // gradient has one row per pulled row in order (as TrainStep makes it);
  // else the gradients' own rows routed anew.
  absl::Status RoutesOfGradients(SparseParameters::Routes* routes,
                                 std::vector<std::vector<float>>* grads);

  const Options options_;
  const std::vector<VariableDef> tables_;
  // Per table: its index among the served tables, -1 for a kept one.
  std::vector<int> served_;
  // The served tables; with pushes in flight, a second view of them for
  // those pushes (SparseParameters runs one call at a time).
  std::unique_ptr<SparseParameters> sparse_, sparse_push_;

  // Per step, reused: the batch's ids of a table, and per table the
  // distinct rows, each id's position among them, the pulled rows and
  // the rows' gradients; the served tables' routes.
  std::vector<int64_t> ids_;
  std::vector<std::vector<int64_t>> unique_, positions_;
  std::vector<HostBuffer<float>> rows_;
  std::vector<absl::Span<const float>> pulled_;  // views of rows_
  std::vector<TableGradient> grads_;
  SparseParameters::Routes routes_;

  std::deque<std::future<absl::Status>> in_flight_;
  // Last, so they end their work while the tables above still exist.
  SerialExecutor calls_;
  SerialExecutor pushes_;  // the pushes left in flight
};

}  // namespace tessera

#endif  // TESSERA_WORKER_PARAMS_ROW_EXCHANGE_H_
