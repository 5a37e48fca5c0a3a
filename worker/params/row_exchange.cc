#include "worker/params/row_exchange.h"

#include <utility>

#include "data/criteo/ctr_dataset.h"

namespace tessera {
namespace {

std::future<absl::Status> Ready(absl::Status status) {
  std::promise<absl::Status> promise;
  promise.set_value(std::move(status));
  return promise.get_future();
}

}  // namespace

absl::StatusOr<std::unique_ptr<RowExchange>> RowExchange::Create(
    Options options) {
  std::unique_ptr<RowExchange> exchange(new RowExchange(std::move(options)));
  const Options& o = exchange->options_;
  // The tables on the servers, in the graph's order.
  std::vector<VariableDef> served;
  for (size_t t = 0; t < exchange->tables_.size(); ++t) {
    const bool kept = o.kept.holds(static_cast<int>(t));
    exchange->served_.push_back(kept ? -1 : static_cast<int>(served.size()));
    if (!kept) served.push_back(exchange->tables_[t]);
  }
  if (o.servers && !served.empty()) {
    absl::StatusOr<std::unique_ptr<SparseParameters>> tables =
        SparseParameters::Create(served, *o.placements, o.clients);
    if (!tables.ok()) return tables.status();
    exchange->sparse_ = *std::move(tables);
    if (o.pushes_in_flight > 0) {
      tables = SparseParameters::Create(served, *o.placements, o.clients);
      if (!tables.ok()) return tables.status();
      exchange->sparse_push_ = *std::move(tables);
    }
  }
  return exchange;
}

RowExchange::RowExchange(Options options)
    : options_(std::move(options)), tables_(options_.graph->tables()) {
  unique_.assign(tables_.size(), {});
  positions_.assign(tables_.size(), {});
  for (size_t t = 0; t < tables_.size(); ++t) {
    rows_.emplace_back(options_.host_memory);
  }
  grads_.resize(tables_.size());
  pulled_.resize(tables_.size());
}

RowExchange::~RowExchange() { WaitForPushes(0).IgnoreError(); }

absl::Status RowExchange::Pull(const HostBatch& batch,
                               std::optional<int64_t> sync_step) {
  for (size_t t = 0; t < tables_.size(); ++t) {
    CollectTableIds(*options_.graph, batch, static_cast<int>(t), &ids_);
    // Row id = id mod vocab_size, or the id itself in a growing table
    // (vocab_size 0), as the servers and the replica hold them.
    LocalizeTableIds(tables_[t].shape[0], ids_, &unique_[t], &positions_[t]);
    rows_[t].Resize(static_cast<int64_t>(unique_[t].size()) *
                    tables_[t].shape[1]);
    pulled_[t] = rows_[t].span();
    if (served_[t] >= 0) continue;
    if (absl::Status s = GatherKept(static_cast<int>(t)); !s.ok()) return s;
  }
  if (sparse_ == nullptr) return absl::OkStatus();
  std::vector<std::vector<int64_t>> rows(sparse_->num_tables());
  std::vector<absl::Span<float>> into(rows.size());
  for (size_t t = 0; t < tables_.size(); ++t) {
    if (served_[t] < 0) continue;
    rows[served_[t]].swap(unique_[t]);
    into[served_[t]] = rows_[t].span();
  }
  absl::Status pulled = sparse_->Pull(rows, into, sync_step, &routes_);
  for (size_t t = 0; t < tables_.size(); ++t) {
    if (served_[t] >= 0) rows[served_[t]].swap(unique_[t]);
  }
  return pulled;
}

std::future<absl::Status> RowExchange::StartPull(
    const HostBatch& batch, std::optional<int64_t> sync_step) {
  return calls_.Async(
      [this, &batch, sync_step] { return Pull(batch, sync_step); });
}

absl::Status RowExchange::GatherKept(int t) {
  // The kept tables follow the graph's dense variables in the replica.
  const size_t v = options_.graph->dense_variables().size() +
                   static_cast<size_t>(options_.kept.slot(t));
  return options_.kept.Gather(t, unique_[t], options_.replica->values()[v],
                              rows_[t].span());
}

std::future<absl::Status> RowExchange::StartPush(float scale,
                                                 const SyncPush* sync) {
  std::vector<int64_t> ids;
  for (size_t t = 0; t < grads_.size(); ++t) {
    TableGradient& grad = grads_[t];
    if (served_[t] >= 0) {
      // Sync: a served table's rows are this worker's part of the step,
      // weighed by the scale; a kept table's are weighed in the
      // all-reduce, as the dense variables are.
      if (scale != 0 && scale != 1) {
        for (float& x : grad.values) x *= scale;
      }
      continue;
    }
    // The graph's rows index this batch's distinct rows.
    ids.resize(grad.rows.size());
    for (size_t k = 0; k < grad.rows.size(); ++k) {
      ids[k] = unique_[t][grad.rows[k]];
    }
    // Into the replica's gradient buffer, for the all-reduce.
    const int v = static_cast<int>(options_.graph->dense_variables().size()) +
                  options_.kept.slot(static_cast<int>(t));
    options_.kept.Scatter(static_cast<int>(t), ids, grad.values,
                          options_.replica->gradients()[v],
                          options_.replica->touched_rows(v));
  }
  if (sparse_ == nullptr) return {};
  SparseParameters::Routes routes;
  std::vector<std::vector<float>> grads(sparse_->num_tables());
  if (absl::Status s = RoutesOfGradients(&routes, &grads); !s.ok()) {
    return Ready(std::move(s));
  }
  return Send(std::move(routes), std::move(grads), sync);
}

absl::Status RowExchange::RoutesOfGradients(
    SparseParameters::Routes* routes, std::vector<std::vector<float>>* grads) {
  bool as_pulled = true;
  for (size_t t = 0; t < tables_.size() && as_pulled; ++t) {
    if (served_[t] < 0) continue;
    const std::vector<int64_t>& rows = grads_[t].rows;
    as_pulled = rows.size() == unique_[t].size();
    for (size_t k = 0; k < rows.size() && as_pulled; ++k) {
      as_pulled = rows[k] == static_cast<int64_t>(k);
    }
  }
  std::vector<std::vector<int64_t>> rows(grads->size());
  for (size_t t = 0; t < tables_.size(); ++t) {
    if (served_[t] < 0) continue;
    if (!as_pulled) {
      for (int64_t k : grads_[t].rows)
        rows[served_[t]].push_back(unique_[t][k]);
    }
    (*grads)[served_[t]] = std::move(grads_[t].values);
    grads_[t].values.clear();
  }
  if (!as_pulled) return sparse_->Route(rows, routes);
  *routes = std::move(routes_);
  routes_ = SparseParameters::Routes();
  return absl::OkStatus();
}

std::future<absl::Status> RowExchange::StartEmptyPush(const SyncPush& sync) {
  if (sparse_ == nullptr) return {};
  SparseParameters::Routes routes;
  std::vector<std::vector<int64_t>> rows(sparse_->num_tables());
  if (absl::Status s = sparse_->Route(rows, &routes); !s.ok()) {
    return Ready(std::move(s));
  }
  return Send(std::move(routes),
              std::vector<std::vector<float>>(sparse_->num_tables()), &sync);
}

std::future<absl::Status> RowExchange::Send(
    SparseParameters::Routes routes, std::vector<std::vector<float>> grads,
    const SyncPush* sync) {
  // Pushes left in flight have their own SparseParameters and thread, so
  // the next step's pull runs beside them.
  const bool leave = sparse_push_ != nullptr;
  SparseParameters* sparse = leave ? sparse_push_.get() : sparse_.get();
  std::optional<SyncPush> tag;
  if (sync != nullptr) tag = *sync;
  std::future<absl::Status> push =
      (leave ? pushes_ : calls_)
          .Async([sparse, routes = std::move(routes), grads = std::move(grads),
                  tag]() mutable {
            return sparse->PushAlong(&routes, grads, tag ? &*tag : nullptr);
          });
  if (!leave) return push;
  in_flight_.push_back(std::move(push));
  return {};
}

absl::Status RowExchange::WaitForPushes(size_t at_most) {
  absl::Status first;
  while (in_flight_.size() > at_most) {
    absl::Status s = in_flight_.front().get();
    in_flight_.pop_front();
    if (first.ok()) first = s;
  }
  return first;
}

}  // namespace tessera
