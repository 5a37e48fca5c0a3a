// TrainingWorker's row exchange in a step: the table rows it pulls from
// and pushes to the servers (or copies out of its replica). Kept apart
// from training_worker.cc, which configures the worker and runs the step
// around it.

#include <utility>

#include "worker/data/batch_view.h"
#include "worker/data/criteo/ctr_dataset.h"
#include "worker/training_worker.h"

namespace tessera {

absl::Status TrainingWorker::PullRows(std::optional<int64_t> sync_step) {
  const std::vector<VariableDef>& tables = graph_->tables();
  std::vector<absl::Span<const float>> replica;
  if (!kept_.empty()) replica = replica_->values();
  const size_t dense = graph_->dense_variables().size();
  for (size_t t = 0; t < tables.size(); ++t) {
    CollectTableIds(*graph_, batch_, static_cast<int>(t), &table_ids_);
    const int on_servers = sparse_index_[t];
    if (on_servers >= 0) {
      sparse_->Localize(on_servers, table_ids_, &unique_[t], &positions_[t]);
    } else {
      LocalizeTableIds(tables[t].shape[0], table_ids_, &unique_[t],
                       &positions_[t]);
    }
    rows_[t].Resize(static_cast<int64_t>(unique_[t].size()) *
                    tables[t].shape[1]);
    if (on_servers >= 0) continue;
    // A table kept whole: its rows come from the replica.
    if (absl::Status s =
            kept_.Gather(static_cast<int>(t), unique_[t],
                         replica[dense + kept_.slot(t)], rows_[t].span());
        !s.ok()) {
      return s;
    }
  }
  if (sparse_ == nullptr) return absl::OkStatus();
  std::vector<std::vector<int64_t>> rows(sparse_->num_tables());
  std::vector<absl::Span<float>> into(rows.size());
  for (size_t t = 0; t < tables.size(); ++t) {
    if (sparse_index_[t] < 0) continue;
    rows[sparse_index_[t]].swap(unique_[t]);
    into[sparse_index_[t]] = rows_[t].span();
  }
  absl::Status pulled = sparse_->Pull(rows, into, sync_step);
  for (size_t t = 0; t < tables.size(); ++t) {
    if (sparse_index_[t] >= 0) rows[sparse_index_[t]].swap(unique_[t]);
  }
  return pulled;
}

std::optional<int64_t> TrainingWorker::SyncStepOf(
    const StepRequest& request) const {
  if (!mode_.aggregates_steps() || request.sync_required() <= 0) {
    return std::nullopt;
  }
  return request.sync_step();
}

SyncPush TrainingWorker::SyncPushOf(const StepRequest& request) const {
  SyncPush sync;
  if (!SyncStepOf(request).has_value()) return sync;  // required 0: untagged
  sync.step = request.sync_step();
  sync.required = request.sync_required();
  sync.part = request.sync_part();
  return sync;
}

std::future<absl::Status> TrainingWorker::PushRows(const StepRequest& request) {
  if (sparse_ == nullptr) return {};
  // The tables on the servers only (the kept ones went into the replica's
  // all-reduce), moved out: a push left in flight (hybrid:ssp:S) owns
  // its rows while the next step fills push_ids_ and push_grads_ again.
  std::vector<std::vector<int64_t>> ids(sparse_->num_tables());
  std::vector<std::vector<float>> grads(ids.size());
  for (size_t t = 0; t < sparse_index_.size(); ++t) {
    if (sparse_index_[t] < 0) continue;
    ids[sparse_index_[t]] = std::move(push_ids_[t]);
    grads[sparse_index_[t]] = std::move(push_grads_[t]);
    push_ids_[t].clear();
    push_grads_[t].clear();
  }
  // Pushes left in flight have their own SparseParameters and thread, so
  // the next step's pull runs beside them.
  SparseParameters* sparse =
      sparse_push_ != nullptr ? sparse_push_.get() : sparse_.get();
  SerialExecutor& thread = sparse_push_ != nullptr ? row_pushes_ : row_calls_;
  return thread.Async([sparse, ids = std::move(ids), grads = std::move(grads),
                       sync = SyncPushOf(request)] {
    return sparse->Push(ids, grads, sync.required > 0 ? &sync : nullptr);
  });
}

absl::Status TrainingWorker::WaitForRowPushes(size_t at_most) {
  absl::Status first;
  while (row_pushes_in_flight_.size() > at_most) {
    absl::Status s = row_pushes_in_flight_.front().get();
    row_pushes_in_flight_.pop_front();
    if (first.ok()) first = s;
  }
  return first;
}

std::vector<absl::Span<const float>> TrainingWorker::DenseValues() const {
  std::vector<absl::Span<const float>> values = params_->values();
  values.resize(graph_->dense_variables().size());
  return values;
}

std::vector<absl::Span<float>> TrainingWorker::DenseGradients() {
  std::vector<absl::Span<float>> gradients = params_->gradients();
  gradients.resize(graph_->dense_variables().size());
  return gradients;
}

absl::Status TrainingWorker::StepWithoutExamples(const StepRequest& request,
                                                 StepResponse* response) {
  // Hybrid:sync: the servers wait for every part of the step, this
  // replica's empty one too.
  for (size_t t = 0; t < push_ids_.size(); ++t) {
    push_ids_[t].clear();
    push_grads_[t].clear();
  }
  std::future<absl::Status> row_push = SyncStepOf(request).has_value()
                                           ? PushRows(request)
                                           : std::future<absl::Status>();
  const SyncPush sync = SyncPushOf(request);
  absl::Status reduced = params_->Push({/*examples=*/0, request.sync_scale(),
                                        sync.required > 0 ? &sync : nullptr},
                                       response);
  absl::Status rows_pushed =
      row_push.valid() ? row_push.get() : absl::OkStatus();
  if (!reduced.ok()) return reduced;
  return rows_pushed;
}

void TrainingWorker::ScaleRowGradients(float scale) {
  for (size_t t = 0; t < table_grads_.size(); ++t) {
    // A kept table's gradient is weighed in the all-reduce, as the dense.
    if (kept_.holds(static_cast<int>(t))) continue;
    for (float& x : table_grads_[t].values) x *= scale;
  }
}

}  // namespace tessera
