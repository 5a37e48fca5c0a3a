#include "ps_server/shard_store.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace tessera {

absl::Status ShardStore::Create(const CreateShardsRequest& request,
                                CreateShardsResponse* response) {
  absl::StatusOr<std::unique_ptr<Optimizer>> optimizer =
      CreateOptimizer(request.optimizer());
  if (!optimizer.ok()) return optimizer.status();

  const std::string optimizer_text = request.optimizer().SerializeAsString();
  absl::MutexLock lock(&mu_);
  std::vector<Entry> created;
  absl::flat_hash_map<std::string, const ShardDef*> seen;
  int existing = 0;
  for (const ShardDef& def : request.shards()) {
    if (def.name().empty()) {
      return absl::InvalidArgumentError("CreateShards: a shard has no name");
    }
    auto [it_seen, first] = seen.emplace(def.name(), &def);
    if (!first) {
      if (it_seen->second->SerializeAsString() != def.SerializeAsString()) {
        return absl::InvalidArgumentError(
            absl::StrCat("CreateShards: shard ", def.name(),
                         " appears twice with different definitions"));
      }
      continue;  // an identical repeat is the same shard
    }
    auto it = shards_.find(def.name());
    if (it != shards_.end()) {
      if (it->second.rows->def().SerializeAsString() !=
          def.SerializeAsString()) {
        return absl::AlreadyExistsError(absl::StrCat(
            "shard ", def.name(), " exists with a different definition"));
      }
      if (it->second.optimizer != optimizer_text) {
        return absl::AlreadyExistsError(absl::StrCat(
            "shard ", def.name(), " exists with a different optimizer"));
      }
      ++existing;
      continue;
    }
    if (def.hash_table()) {
      absl::StatusOr<std::unique_ptr<HashTable>> table =
          HashTable::Create(def, optimizer->get(), options_.row_budget);
      if (!table.ok()) return table.status();
      std::shared_ptr<HashTable> shared = *std::move(table);
      created.push_back(Entry{nullptr, shared, optimizer_text, shared});
      continue;
    }
    absl::StatusOr<std::unique_ptr<Shard>> shard =
        Shard::Create(def, optimizer->get());
    if (!shard.ok()) return shard.status();
    std::shared_ptr<Shard> fixed = *std::move(shard);
    created.push_back(Entry{fixed, std::make_shared<FixedRowTable>(fixed),
                            optimizer_text, nullptr});
  }
  for (Entry& entry : created) {
    // A fixed shard cannot spill: it takes its share of the budget whole.
    if (options_.row_budget != nullptr && entry.shard != nullptr) {
      options_.row_budget->Charge(entry.shard->resident_bytes());
    }
    std::string name = entry.rows->def().name();
    shards_.emplace(std::move(name), std::move(entry));
  }
  if (!created.empty()) optimizers_.push_back(*std::move(optimizer));
  response->set_created(static_cast<int32_t>(created.size()));
  response->set_existing(existing);
  return absl::OkStatus();
}

absl::StatusOr<std::string> ShardStore::OptimizerOf(
    const std::string& name) const {
  absl::MutexLock lock(&mu_);
  auto it = shards_.find(name);
  if (it == shards_.end()) {
    return absl::NotFoundError(
        absl::StrCat("unknown variable shard \"", name, "\""));
  }
  return it->second.optimizer;
}

absl::StatusOr<std::shared_ptr<Shard>> ShardStore::Find(
    const std::string& name) const {
  absl::MutexLock lock(&mu_);
  auto it = shards_.find(name);
  if (it == shards_.end()) {
    return absl::NotFoundError(
        absl::StrCat("unknown variable shard \"", name, "\""));
  }
  if (it->second.shard == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("shard \"", name,
                     "\" is a hash table: it has rows by id (PullRows, "
                     "PushRows), not a dense value"));
  }
  return it->second.shard;
}

absl::StatusOr<std::shared_ptr<RowTable>> ShardStore::FindRows(
    const std::string& name) const {
  absl::MutexLock lock(&mu_);
  auto it = shards_.find(name);
  if (it == shards_.end()) {
    return absl::NotFoundError(
        absl::StrCat("unknown variable shard \"", name, "\""));
  }
  return it->second.rows;
}

std::vector<StoredShard> ShardStore::List() const {
  std::vector<StoredShard> list;
  {
    absl::MutexLock lock(&mu_);
    list.reserve(shards_.size());
    for (const auto& [name, entry] : shards_) {
      list.push_back(StoredShard{entry.shard, entry.table});
    }
  }
  std::sort(list.begin(), list.end(),
            [](const StoredShard& a, const StoredShard& b) {
              return a.def().name() < b.def().name();
            });
  return list;
}

int64_t ShardStore::num_shards() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int64_t>(shards_.size());
}

int64_t ShardStore::resident_bytes() const {
  int64_t total = 0;
  for (const auto& table : Tables()) total += table->resident_bytes();
  return total;
}

int64_t ShardStore::used_bytes() const {
  int64_t total = 0;
  for (const auto& table : Tables()) total += table->used_bytes();
  return total;
}

std::vector<std::shared_ptr<RowTable>> ShardStore::Tables() const {
  // Summed outside the store's lock, which every pull and push takes to
  // find its shard.
  std::vector<std::shared_ptr<RowTable>> tables;
  absl::MutexLock lock(&mu_);
  for (const auto& [name, entry] : shards_) tables.push_back(entry.rows);
  return tables;
}

}  // namespace tessera
