#include "worker/params/sparse_parameters.h"

#include <algorithm>
#include <functional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "data/criteo/ctr_dataset.h"
#include "partitioners/hash_routing.h"

namespace tessera {

absl::StatusOr<std::unique_ptr<SparseParameters>> SparseParameters::Create(
    const std::vector<VariableDef>& tables,
    const google::protobuf::RepeatedPtrField<VariablePlacement>& placements,
    std::vector<PsClient*> clients) {
  std::vector<Table> out;
  for (const VariableDef& var : tables) {
    const VariablePlacement* placement = nullptr;
    for (const VariablePlacement& p : placements) {
      if (p.name() == var.name) placement = &p;
    }
    if (placement == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("no placement for table ", var.name));
    }
    const std::vector<int64_t> shape(placement->shape().dims().begin(),
                                     placement->shape().dims().end());
    if (shape != var.shape || shape.size() != 2 || shape[1] < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("wrong shape: table ", var.name, " is [",
                       absl::StrJoin(var.shape, ","), "] in the model but [",
                       absl::StrJoin(shape, ","), "] in the placement"));
    }
    Table table;
    table.name = var.name;
    table.dim = shape[1];
    table.hash = placement->hash_table();
    table.precision = placement->precision();
    table.gradient_precision = placement->gradient_precision();
    if (!RowPrecision_IsValid(table.precision) ||
        !RowPrecision_IsValid(table.gradient_precision)) {
      return absl::InvalidArgumentError(
          absl::StrCat("table ", var.name, ": precision ", table.precision,
                       " or gradient precision ", table.gradient_precision,
                       " is not one of ROW_FP32, ROW_FP16, ROW_BF16"));
    }
    if (table.hash != (shape[0] == 0)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "table ", var.name, " has ", shape[0], " rows but is placed as ",
          table.hash ? "a growing" : "a fixed", " table"));
    }
    if (placement->shards_size() == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("table ", var.name, " has no shards"));
    }
    if (!table.hash) {
      absl::StatusOr<ShardLayout> layout =
          ShardLayout::Div(shape[0], placement->shards_size());
      if (!layout.ok()) return layout.status();
      table.layout = *layout;
    }
    for (int i = 0; i < placement->shards_size(); ++i) {
      const ShardPlacement& shard = placement->shards(i);
      if (shard.ps_task() < 0 ||
          shard.ps_task() >= static_cast<int>(clients.size())) {
        return absl::InvalidArgumentError(absl::StrCat(
            "table ", var.name, ": shard ", shard.name(), " is on ps ",
            shard.ps_task(), " of ", clients.size()));
      }
      // Workers route with the div layout; a placement made otherwise would
      // send rows to shards that do not hold them.
      if (!table.hash &&
          (table.layout->num_shards() != placement->shards_size() ||
           shard.row_offset() != table.layout->shard_offset(i) ||
           shard.rows() != table.layout->shard_rows(i))) {
        return absl::InvalidArgumentError(absl::StrCat(
            "table ", var.name, ": shard ", shard.name(), " holds rows [",
            shard.row_offset(), ", ", shard.row_offset() + shard.rows(),
            "), not the div layout's share of ", shape[0], " rows over ",
            placement->shards_size(), " shards"));
      }
      table.shard_names.push_back(shard.name());
      table.shard_ps.push_back(shard.ps_task());
    }
    out.push_back(std::move(table));
  }
  return std::unique_ptr<SparseParameters>(
      new SparseParameters(std::move(out), std::move(clients)));
}

void SparseParameters::Localize(int table, absl::Span<const int64_t> ids,
                                std::vector<int64_t>* unique,
                                std::vector<int64_t>* positions) const {
  const Table& t = tables_[table];
  LocalizeTableIds(t.hash ? 0 : t.layout->total_rows(), ids, unique, positions);
}

absl::Status SparseParameters::Route(
    absl::Span<const std::vector<int64_t>> rows, Routes* routes) const {
  if (rows.size() != tables_.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("rows of ", rows.size(), " tables given, the model has ",
                     tables_.size()));
  }
  routes->per_ps.assign(clients_.size(), {});
  routes->rows.clear();
  for (size_t t = 0; t < tables_.size(); ++t) {
    const Table& table = tables_[t];
    routes->rows.push_back(rows[t].size());
    // Every shard's request, in shard order: the index in per_ps[ps] of
    // each.
    std::vector<int> request_of;
    for (size_t s = 0; s < table.shard_names.size(); ++s) {
      std::vector<Request>& on_ps = routes->per_ps[table.shard_ps[s]];
      request_of.push_back(static_cast<int>(on_ps.size()));
      on_ps.emplace_back();
      on_ps.back().table = static_cast<int>(t);
      on_ps.back().shard = static_cast<int>(s);
    }
    for (size_t i = 0; i < rows[t].size(); ++i) {
      const int64_t id = rows[t][i];
      int shard;
      if (table.hash) {
        shard = HashShardOf(id, static_cast<int>(table.shard_names.size()));
      } else {
        absl::StatusOr<ShardRow> located = table.layout->Locate(id);
        if (!located.ok()) {
          return absl::OutOfRangeError(absl::StrCat(
              "table ", table.name, ": ", located.status().message()));
        }
        shard = located->shard;
      }
      Request& request =
          routes->per_ps[table.shard_ps[shard]][request_of[shard]];
      request.ids.push_back(id);
      request.positions.push_back(static_cast<int64_t>(i));
    }
  }
  return absl::OkStatus();
}

absl::Status SparseParameters::ForEachServer(
    Routes* routes, bool any_shard,
    const std::function<absl::Status(PsClient*, std::vector<Request>&)>& call) {
  std::vector<int> busy;
  for (size_t k = 0; k < routes->per_ps.size(); ++k) {
    for (const Request& r : routes->per_ps[k]) {
      if (any_shard || !r.ids.empty()) {
        busy.push_back(static_cast<int>(k));
        break;
      }
    }
  }
  return calls_.Run(
      busy, [&](int k) { return call(clients_[k], routes->per_ps[k]); });
}

absl::Status SparseParameters::Pull(absl::Span<const std::vector<int64_t>> rows,
                                    absl::Span<const absl::Span<float>> values,
                                    std::optional<int64_t> sync_step,
                                    Routes* routes) {
  if (values.size() != tables_.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("row buffers for ", values.size(),
                     " tables given, the model has ", tables_.size()));
  }
  for (size_t t = 0; t < tables_.size() && t < rows.size(); ++t) {
    if (values[t].size() != rows[t].size() * tables_[t].dim) {
      return absl::InvalidArgumentError(absl::StrCat(
          "table ", tables_[t].name, ": buffer of ", values[t].size(),
          " floats for ", rows[t].size(), " rows of ", tables_[t].dim));
    }
  }
  Routes own;
  if (routes == nullptr) routes = &own;
  if (absl::Status s = Route(rows, routes); !s.ok()) return s;
  absl::Status s = ForEachServer(
      routes, /*any_shard=*/false,
      [this, sync_step](PsClient* client, std::vector<Request>& requests) {
        // Every shard of this ps in one call: one round trip on the data
        // plane.
        std::vector<RowsPart> parts;
        std::vector<absl::Span<float>> out;
        parts.reserve(requests.size());
        out.reserve(requests.size());
        for (Request& r : requests) {
          if (r.ids.empty()) continue;
          const Table& table = tables_[r.table];
          r.buffer.resize(r.ids.size() * table.dim);
          parts.push_back(
              {table.shard_names[r.shard], table.dim, r.ids, table.precision});
          out.push_back(absl::MakeSpan(r.buffer));
        }
        return client->PullRows(parts, out, sync_step);
      });
  if (!s.ok()) return s;
  for (const std::vector<Request>& on_ps : routes->per_ps) {
    for (const Request& r : on_ps) {
      const int64_t dim = tables_[r.table].dim;
      float* out = values[r.table].data();
      for (size_t i = 0; i < r.ids.size(); ++i) {
        std::copy_n(r.buffer.data() + i * dim, dim, out + r.positions[i] * dim);
      }
    }
  }
  return absl::OkStatus();
}

absl::Status SparseParameters::Push(absl::Span<const std::vector<int64_t>> rows,
                                    absl::Span<const std::vector<float>> grads,
                                    const SyncPush* sync) {
  Routes routes;
  if (absl::Status s = Route(rows, &routes); !s.ok()) return s;
  return PushAlong(&routes, grads, sync);
}

absl::Status SparseParameters::PushAlong(
    Routes* routes, absl::Span<const std::vector<float>> grads,
    const SyncPush* sync) {
  if (grads.size() != tables_.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("gradients of ", grads.size(),
                     " tables given, the model has ", tables_.size()));
  }
  for (size_t t = 0; t < tables_.size(); ++t) {
    const size_t rows = t < routes->rows.size() ? routes->rows[t] : 0;
    if (grads[t].size() != rows * tables_[t].dim) {
      return absl::InvalidArgumentError(absl::StrCat(
          "table ", tables_[t].name, ": gradient of ", grads[t].size(),
          " floats for ", rows, " rows of ", tables_[t].dim));
    }
  }
  for (std::vector<Request>& on_ps : routes->per_ps) {
    for (Request& r : on_ps) {
      const int64_t dim = tables_[r.table].dim;
      r.buffer.resize(r.ids.size() * dim);
      const float* in = grads[r.table].data();
      for (size_t i = 0; i < r.ids.size(); ++i) {
        std::copy_n(in + r.positions[i] * dim, dim, r.buffer.data() + i * dim);
      }
    }
  }
  // A sync push reaches every shard of every table, one without rows too.
  const bool every_shard = sync != nullptr && sync->lockstep();
  return ForEachServer(
      routes, every_shard,
      [this, sync, every_shard](PsClient* client,
                                std::vector<Request>& requests) {
        std::vector<RowsPart> parts;
        std::vector<absl::Span<const float>> grads;
        parts.reserve(requests.size());
        grads.reserve(requests.size());
        for (const Request& r : requests) {
          if (!every_shard && r.ids.empty()) continue;
          const Table& table = tables_[r.table];
          parts.push_back({table.shard_names[r.shard], table.dim, r.ids,
                           table.gradient_precision});
          grads.push_back(r.buffer);
        }
        PushResponse response;
        return client->PushRows(parts, grads, &response, sync);
      });
}

}  // namespace tessera
