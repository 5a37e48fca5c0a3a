#include "coordinator/step_norm_exchange.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace tessera {

bool ClipsGlobalNormOnServers(const JobConfig& job, bool aggregates_steps) {
  if (!aggregates_steps) return false;
  if (job.optimizer().clipping().global_norm() > 0) return true;
  if (job.has_embedding_optimizer() &&
      job.embedding_optimizer().clipping().global_norm() > 0) {
    return true;
  }
  for (const auto& [table, optimizer] : job.table_optimizers()) {
    if (optimizer.clipping().global_norm() > 0) return true;
  }
  return false;
}

absl::Status StepNormExchange::Exchange(int64_t step) {
  StepNormRequest ask;
  ask.set_step(step);
  std::map<std::string, double> squared;
  for (PsClient* server : servers_) {
    StepNormResponse partial;
    if (absl::Status s = server->StepNorm(ask, &partial); !s.ok()) {
      return absl::Status(
          s.code(),
          absl::StrCat("global norm of sync step ", step, ": parameter server ",
                       server->address(), ": ", s.message()));
    }
    for (const GroupNorm& g : partial.partial()) {
      squared[g.optimizer()] += g.value();
    }
  }
  StepNormRequest set;
  set.set_step(step);
  last_norms_.clear();
  for (const auto& [optimizer, sum] : squared) {
    GroupNorm* g = set.add_norms();
    g->set_optimizer(optimizer);
    g->set_value(std::sqrt(sum));
    last_norms_[optimizer] = g->value();
  }
  if (set.norms().empty()) return absl::OkStatus();
  for (PsClient* server : servers_) {
    StepNormResponse unused;
    if (absl::Status s = server->StepNorm(set, &unused); !s.ok()) {
      return absl::Status(
          s.code(),
          absl::StrCat("global norm of sync step ", step, ": parameter server ",
                       server->address(), ": ", s.message()));
    }
  }
  return absl::OkStatus();
}

}  // namespace tessera
