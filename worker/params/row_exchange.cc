#include "worker/params/row_exchange.h"

#include <algorithm>
#include <functional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "data/criteo/ctr_dataset.h"

namespace tessera {
namespace {

std::future<absl::Status> Ready(absl::Status status) {
  std::promise<absl::Status> promise;
  promise.set_value(std::move(status));
  return promise.get_future();
}

// The servers `routes` sends anything to: a shard's rows, or with
// `any_shard` any shard at all (a sync push's empty parts).
std::vector<int> ServersOf(const RowRoutes& routes, bool any_shard) {
  std::vector<int> servers;
  for (size_t k = 0; k < routes.per_ps.size(); ++k) {
    for (const ShardRows& r : routes.per_ps[k]) {
      if (any_shard || !r.ids.empty()) {
        servers.push_back(static_cast<int>(k));
        break;
      }
    }
  }
  return servers;
}

// Runs call(k) for every k of `servers` at once: each but the last on a
// lane (a kept thread, so no thread starts per call), the last on this
// thread, which then waits for the others. The first error in the order
// of `servers`.
absl::Status CallEach(const std::vector<int>& servers,
                      std::vector<std::unique_ptr<SerialExecutor>>* lanes,
                      const std::function<absl::Status(int)>& call) {
  if (servers.empty()) return absl::OkStatus();
  std::vector<std::future<absl::Status>> others;
  for (size_t i = 0; i + 1 < servers.size(); ++i) {
    const int k = servers[i];
    others.push_back((*lanes)[i]->Async([&call, k] { return call(k); }));
  }
  absl::Status last = call(servers.back());
  absl::Status first;
  for (std::future<absl::Status>& f : others) first.Update(f.get());
  first.Update(last);
  return first;
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
    if (kept) continue;
    served.push_back(exchange->tables_[t]);
    exchange->table_of_served_.push_back(static_cast<int>(t));
  }
  if (!o.servers || served.empty()) return exchange;
  const int servers = static_cast<int>(o.clients.size());
  absl::StatusOr<RowRouting> routing =
      RowRouting::Create(served, *o.placements, servers);
  if (!routing.ok()) return routing.status();
  exchange->routing_ = *std::move(routing);
  for (int k = 1; k < servers; ++k) {
    exchange->lanes_.push_back(std::make_unique<SerialExecutor>());
    if (o.pushes_in_flight > 0) {
      exchange->push_lanes_.push_back(std::make_unique<SerialExecutor>());
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
  if (!routing_.has_value()) return absl::OkStatus();
  return PullServed(sync_step);
}

absl::Status RowExchange::PullServed(std::optional<int64_t> sync_step) {
  std::vector<std::vector<int64_t>> rows(routing_->num_tables());
  for (size_t s = 0; s < rows.size(); ++s) {
    rows[s].swap(unique_[table_of_served_[s]]);
  }
  absl::Status routed = routing_->Route(rows, &routes_);
  for (size_t s = 0; s < rows.size(); ++s) {
    rows[s].swap(unique_[table_of_served_[s]]);
  }
  if (!routed.ok()) return routed;
  return CallEach(ServersOf(routes_, /*any_shard=*/false), &lanes_,
                  [this, sync_step](int k) { return PullFrom(k, sync_step); });
}

absl::Status RowExchange::PullFrom(int k, std::optional<int64_t> sync_step) {
  // Every shard of this server in one call: one round trip on the data
  // plane.
  const std::vector<ShardRows>& on_ps = routes_.per_ps[k];
  std::vector<RowsPart> parts;
  std::vector<std::vector<float>> pulled;
  for (const ShardRows& r : on_ps) {
    if (r.ids.empty()) continue;
    parts.push_back({r.name, r.dim, r.ids, r.precision});
    pulled.emplace_back(r.ids.size() * r.dim);
  }
  std::vector<absl::Span<float>> out(pulled.begin(), pulled.end());
  absl::Status s = options_.clients[k]->PullRows(parts, out, sync_step);
  if (!s.ok()) return s;
  // Each row to its place among its table's rows (another server's rows
  // are at other places, so the lanes write apart).
  size_t part = 0;
  for (const ShardRows& r : on_ps) {
    if (r.ids.empty()) continue;
    const int64_t dim = r.dim;
    const float* from = pulled[part++].data();
    float* to = rows_[table_of_served_[r.table]].data();
    for (size_t i = 0; i < r.ids.size(); ++i) {
      std::copy_n(from + i * dim, dim, to + r.positions[i] * dim);
    }
  }
  return absl::OkStatus();
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
  if (!routing_.has_value()) return {};
  RowRoutes routes;
  std::vector<std::vector<float>> grads(table_of_served_.size());
  if (absl::Status s = RoutesOfGradients(&routes, &grads); !s.ok()) {
    return Ready(std::move(s));
  }
  return Send(std::move(routes), std::move(grads), sync);
}

absl::Status RowExchange::RoutesOfGradients(
    RowRoutes* routes, std::vector<std::vector<float>>* grads) {
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
  if (!as_pulled) return routing_->Route(rows, routes);
  *routes = std::move(routes_);
  routes_ = RowRoutes();
  return absl::OkStatus();
}

std::future<absl::Status> RowExchange::StartEmptyPush(const SyncPush& sync) {
  if (!routing_.has_value()) return {};
  RowRoutes routes;
  std::vector<std::vector<int64_t>> rows(routing_->num_tables());
  if (absl::Status s = routing_->Route(rows, &routes); !s.ok()) {
    return Ready(std::move(s));
  }
  return Send(std::move(routes),
              std::vector<std::vector<float>>(routing_->num_tables()), &sync);
}

std::future<absl::Status> RowExchange::Send(
    RowRoutes routes, std::vector<std::vector<float>> grads,
    const SyncPush* sync) {
  // Pushes left in flight have their own thread and lanes, so the next
  // step's pull runs beside them.
  const bool leave = options_.pushes_in_flight > 0;
  Lanes* lanes = leave ? &push_lanes_ : &lanes_;
  std::optional<SyncPush> tag;
  if (sync != nullptr) tag = *sync;
  std::future<absl::Status> push =
      (leave ? pushes_ : calls_)
          .Async([this, lanes, routes = std::move(routes),
                  grads = std::move(grads), tag] {
            return PushAlong(routes, grads, tag ? &*tag : nullptr, lanes);
          });
  if (!leave) return push;
  in_flight_.push_back(std::move(push));
  return {};
}

absl::Status RowExchange::PushAlong(const RowRoutes& routes,
                                    absl::Span<const std::vector<float>> grads,
                                    const SyncPush* sync, Lanes* lanes) const {
  if (grads.size() != routes.tables.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("gradients of ", grads.size(),
                     " tables given, the model has ", routes.tables.size()));
  }
  for (size_t t = 0; t < grads.size(); ++t) {
    const RowRoutes::Table& table = routes.tables[t];
    if (grads[t].size() != table.rows * table.dim) {
      return absl::InvalidArgumentError(
          absl::StrCat("table ", table.name, ": gradient of ", grads[t].size(),
                       " floats for ", table.rows, " rows of ", table.dim));
    }
  }
  // A sync push reaches every shard of every table, one without rows too.
  const bool every_shard = sync != nullptr && sync->lockstep();
  return CallEach(ServersOf(routes, every_shard), lanes, [&](int k) {
    return PushTo(k, routes.per_ps[k], grads, sync, every_shard);
  });
}

absl::Status RowExchange::PushTo(int k, const std::vector<ShardRows>& on_ps,
                                 absl::Span<const std::vector<float>> grads,
                                 const SyncPush* sync, bool every_shard) const {
  // Each shard's rows gathered from their places among the table's rows,
  // every shard of this server in one call.
  std::vector<RowsPart> parts;
  std::vector<std::vector<float>> gathered;
  for (const ShardRows& r : on_ps) {
    if (!every_shard && r.ids.empty()) continue;
    parts.push_back({r.name, r.dim, r.ids, r.gradient_precision});
    gathered.emplace_back(r.ids.size() * r.dim);
    const float* in = grads[r.table].data();
    float* out = gathered.back().data();
    for (size_t i = 0; i < r.ids.size(); ++i) {
      std::copy_n(in + r.positions[i] * r.dim, r.dim, out + i * r.dim);
    }
  }
  std::vector<absl::Span<const float>> spans(gathered.begin(), gathered.end());
  PushResponse response;
  return options_.clients[k]->PushRows(parts, spans, &response, sync);
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
