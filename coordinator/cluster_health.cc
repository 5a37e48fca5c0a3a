#include "coordinator/cluster_health.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "common/rpc/backoff.h"
#include "coordinator/parallel/bounded_for_each.h"
#include "glog/logging.h"

namespace tessera {

ClusterHealth::ClusterHealth(std::vector<PsClient*> ps,
                             std::vector<WorkerTask*> workers, std::FILE* out,
                             int concurrency)
    : ps_(std::move(ps)),
      workers_(std::move(workers)),
      out_(out),
      concurrency_(concurrency) {
  absl::MutexLock lock(&mu_);
  states_.resize(ps_.size());
  for (size_t k = 0; k < ps_.size(); ++k) {
    states_[k].set_index(static_cast<int>(k));
    states_[k].set_address(ps_[k]->address());
    states_[k].set_error("not checked yet");
  }
}

ClusterHealth::~ClusterHealth() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (heartbeat_.joinable()) heartbeat_.join();
}

absl::Status ClusterHealth::WaitForCluster(absl::Duration wait) {
  const absl::Time start = absl::Now();
  const absl::Time deadline = start + wait;
  // A line every few seconds while a task does not answer (an unresolvable
  // host otherwise meant a silent minute), naming the task and why. The
  // tasks are waited for at once: one line per period, whichever task
  // prints it.
  constexpr absl::Duration kReportEvery = absl::Seconds(5);
  absl::Mutex report_mu;
  absl::Time next_report = start + kReportEvery;
  auto wait_for = [&](const std::string& who,
                      const std::function<absl::Status()>& check) {
    absl::Status s = RetryUntil(deadline, [&] {
      absl::Status answer = check();
      if (answer.ok()) return answer;
      absl::MutexLock lock(&report_mu);
      if (absl::Now() >= next_report) {
        next_report = absl::Now() + kReportEvery;
        std::fprintf(out_, "waiting for %s: %s (%.0f s of %.0f s)\n",
                     who.c_str(), std::string(answer.message()).c_str(),
                     absl::ToDoubleSeconds(absl::Now() - start),
                     absl::ToDoubleSeconds(wait));
        std::fflush(out_);
      }
      return answer;
    });
    if (s.ok()) return s;
    return absl::UnavailableError(absl::StrCat(who, " did not answer within ",
                                               absl::FormatDuration(wait), ": ",
                                               s.message()));
  };
  if (absl::Status s = BoundedForEach(
          static_cast<int>(ps_.size()), concurrency_,
          [&](int k) {
            return wait_for(absl::StrCat("parameter server ", k, " (",
                                         ps_[k]->address(), ")"),
                            [&] {
                              HealthResponse h;
                              return Check(k, &h);
                            });
          });
      !s.ok()) {
    return s;
  }
  if (absl::Status s = BoundedForEach(
          static_cast<int>(workers_.size()), concurrency_,
          [&](int w) {
            return wait_for(
                absl::StrCat("worker ", w, " (", workers_[w]->address(), ")"),
                [&] {
                  HealthResponse h;
                  return workers_[w]->Health(&h, kHealthCheckTimeoutS);
                });
          });
      !s.ok()) {
    return s;
  }
  LOG(INFO) << "cluster ready: " << ps_.size() << " parameter servers, "
            << workers_.size() << " workers";
  return absl::OkStatus();
}

void ClusterHealth::ExpectShards(std::vector<int64_t> shards) {
  expected_shards_ = std::move(shards);
}

absl::Status ClusterHealth::Check(size_t k, HealthResponse* health) {
  absl::Status s = ps_[k]->Health(health, kHealthCheckTimeoutS);
  ServerState state;
  state.set_index(static_cast<int>(k));
  state.set_address(ps_[k]->address());
  state.set_up(s.ok());
  if (!s.ok()) {
    state.set_error(std::string(s.message()));
  } else {
    state.set_num_shards(health->num_shards());
    state.set_resident_bytes(health->resident_bytes());
    state.set_used_bytes(health->used_bytes());
    state.set_uptime_ms(health->uptime_ms());
    state.set_pulls_served(health->pulls_served());
    state.set_pushes_served(health->pushes_served());
    state.set_calls_per_second(
        (health->pulls_served() + health->pushes_served()) /
        std::max(1e-3, health->uptime_ms() / 1e3));
  }
  absl::MutexLock lock(&mu_);
  states_[k] = std::move(state);
  return s;
}

std::vector<std::string> ClusterHealth::FailedServers() {
  std::vector<std::string> why(ps_.size());
  BoundedForEach(static_cast<int>(ps_.size()), concurrency_, [&](int k) {
    HealthResponse health;
    absl::Status s = Check(k, &health);
    if (!s.ok()) {
      why[k] = absl::StrCat("ps ", k, " (", ps_[k]->address(),
                            ") does not answer: ", s.message());
    } else if (static_cast<size_t>(k) < expected_shards_.size() &&
               health.num_shards() < expected_shards_[k]) {
      why[k] = absl::StrCat("ps ", k, " (", ps_[k]->address(), ") holds ",
                            health.num_shards(), " of its ",
                            expected_shards_[k], " shards (it restarted)");
    }
    return absl::OkStatus();  // every server is asked
  }).IgnoreError();
  std::vector<std::string> failed;
  for (std::string& w : why) {
    if (!w.empty()) failed.push_back(std::move(w));
  }
  return failed;
}

absl::Status ClusterHealth::WaitForServers(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  return BoundedForEach(static_cast<int>(ps_.size()), concurrency_, [&](int k) {
    absl::Status s = RetryUntil(deadline, [&] {
      HealthResponse h;
      return Check(k, &h);
    });
    if (s.ok()) return s;
    return absl::UnavailableError(
        absl::StrCat("parameter server ", k, " (", ps_[k]->address(),
                     ") did not come back within ",
                     absl::FormatDuration(timeout), ": ", s.message()));
  });
}

void ClusterHealth::StartHeartbeat(
    absl::Duration interval, std::function<void(absl::Status)> on_failure) {
  if (interval <= absl::ZeroDuration() || heartbeat_.joinable()) return;
  heartbeat_ = std::thread(
      [this, interval, on_failure] { HeartbeatLoop(interval, on_failure); });
}

void ClusterHealth::Pause(bool paused) {
  absl::MutexLock lock(&mu_);
  paused_ = paused;
}

void ClusterHealth::HeartbeatLoop(
    absl::Duration interval, std::function<void(absl::Status)> on_failure) {
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      auto stopping = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stopping_;
      };
      if (mu_.AwaitWithTimeout(absl::Condition(&stopping), interval)) return;
      if (paused_) continue;
    }
    std::vector<std::string> failed = FailedServers();
    if (failed.empty() || on_failure == nullptr) continue;
    // Under the lock, so that a recovery that pauses the heartbeat after
    // this check cannot miss the failure this call reports.
    absl::MutexLock lock(&mu_);
    if (paused_ || stopping_) continue;
    const std::string why = absl::StrJoin(failed, "; ");
    heartbeat_failed_ = true;
    LOG(WARNING) << "heartbeat: " << why;
    on_failure(absl::UnavailableError(absl::StrCat("heartbeat: ", why)));
  }
}

bool ClusterHealth::heartbeat_failed() const {
  absl::MutexLock lock(&mu_);
  return heartbeat_failed_;
}

bool ClusterHealth::TakeHeartbeatFailure() {
  absl::MutexLock lock(&mu_);
  const bool failed = heartbeat_failed_;
  heartbeat_failed_ = false;
  return failed;
}

std::vector<ServerState> ClusterHealth::ServerStates() const {
  absl::MutexLock lock(&mu_);
  return states_;
}

}  // namespace tessera
