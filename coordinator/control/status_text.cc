#include "coordinator/control/status_text.h"

#include <algorithm>
#include <cstdint>
#include <string>

#include "absl/strings/str_format.h"
#include "absl/time/time.h"

namespace tessera {
namespace {

// "14:03:07.215" (UTC) of a Unix time in ms.
std::string TimeOfDay(int64_t unix_ms) {
  return absl::FormatTime("%H:%M:%E3S", absl::FromUnixMillis(unix_ms),
                          absl::UTCTimeZone());
}

// The job's two lines: progress, then extra steps, recoveries and the last
// checkpoint.
std::string JobLines(const JobStatus& s) {
  const std::string loss = s.steps_done() > 0
                               ? absl::StrFormat("%.4f", s.last_loss())
                               : std::string("none yet");
  // A regression's test figure is its loss (MSE): it has no accuracy.
  const std::string accuracy =
      s.evaluations() > 0
          ? absl::StrFormat("%.4f", s.regression() ? s.last_test_loss()
                                                   : s.last_test_accuracy())
          : std::string("none yet (no evaluation)");
  // Lockstep modes count both: checkpoints (ckpt-N) count worker steps.
  const std::string global =
      s.lockstep()
          ? absl::StrFormat(" (%d global steps)", s.global_steps_done())
          : std::string();
  // The rate of the latest update (0: no step yet, or an older
  // coordinator), and the tables' own one when they have one.
  std::string rate;
  if (s.learning_rate() > 0) {
    rate = absl::StrFormat("; learning rate %.4g", s.learning_rate());
    if (s.embedding_learning_rate() > 0) {
      absl::StrAppendFormat(&rate, " (tables %.4g)",
                            s.embedding_learning_rate());
    }
  }
  std::string text = absl::StrFormat(
      "state %s; epoch %d of %d; %d %s done%s, %d scheduled, %d re-run; %d "
      "examples; last loss %s; last test %s %s%s\n",
      s.state(), s.epoch(), s.epochs(), s.steps_done(),
      s.lockstep() ? "worker steps" : "steps", global, s.steps_scheduled(),
      s.steps_rerun(), s.examples_done(), loss,
      s.regression() ? "loss (MSE)" : "accuracy", accuracy, rate);
  absl::StrAppendFormat(
      &text,
      "extra steps asked for %d; parameter-server recoveries %d; last "
      "checkpoint %s\n",
      s.extra_steps_requested(), s.ps_recoveries(),
      s.last_checkpoint().empty() ? "none" : s.last_checkpoint());
  return text;
}

// One line per worker and per parameter server.
void AppendTaskLines(const JobStatus& s, std::string* out) {
  for (const WorkerState& w : s.workers()) {
    // The membership state, since when (elastic jobs); older coordinators
    // send none.
    std::string state = w.down() ? "  DOWN" : "";
    if (!w.state().empty()) {
      state = absl::StrFormat("  %s since %s", w.state(),
                              TimeOfDay(w.state_since_ms()));
    }
    absl::StrAppendFormat(out, "  worker %d %-21s %8d steps %8.1f steps/s%s\n",
                          w.index(), w.address(), w.steps_done(),
                          w.steps_per_second(), state);
  }
  for (const ServerState& p : s.servers()) {
    if (!p.up()) {
      absl::StrAppendFormat(out, "  ps %d     %-21s DOWN: %s\n", p.index(),
                            p.address(), p.error());
      continue;
    }
    absl::StrAppendFormat(
        out,
        "  ps %d     %-21s %8d shards %10.1f MB used of %.1f MB allocated  "
        "%d pulls %d pushes (%.0f calls/s)  up %.0f s\n",
        p.index(), p.address(), p.num_shards(), p.used_bytes() / 1e6,
        p.resident_bytes() / 1e6, p.pulls_served(), p.pushes_served(),
        p.calls_per_second(), p.uptime_ms() / 1e3);
  }
}

// The tables' costs, then the membership's changes (elastic jobs).
void AppendTableAndMembershipLines(const JobStatus& s, std::string* out) {
  // What each table costs the servers (planned: a growing table at its
  // expected rows); the ps lines above are what they hold now.
  for (const TableMemory& t : s.tables()) {
    std::string servers;
    for (int p = 0; p < t.bytes_per_server_size(); ++p) {
      absl::StrAppendFormat(&servers, "%s%.1f", p == 0 ? "" : " ",
                            t.bytes_per_server(p) / 1e6);
    }
    absl::StrAppendFormat(
        out, "  table %-16s %s %s, %d slot float%s/row, %d B/row%s%s\n",
        t.name(), t.precision(), t.optimizer(), t.slot_floats_per_row(),
        t.slot_floats_per_row() == 1 ? "" : "s", t.bytes_per_row(),
        t.growing() ? ", growing" : "",
        servers.empty() ? "" : ", MB per ps: " + servers);
  }
  if (!s.membership().empty()) {
    absl::StrAppendFormat(out, "membership (at least %d worker%s):\n",
                          std::max(1, s.min_workers()),
                          std::max(1, s.min_workers()) == 1 ? "" : "s");
    for (const MembershipChange& c : s.membership()) {
      absl::StrAppendFormat(out, "  %s worker %d %-21s %-8s %s\n",
                            TimeOfDay(c.time_ms()), c.worker(), c.address(),
                            c.state(), c.note());
    }
  }
}

}  // namespace

std::string FormatJobStatus(const JobStatus& s) {
  std::string text = JobLines(s);
  AppendTaskLines(s, &text);
  AppendTableAndMembershipLines(s, &text);
  return text;
}

}  // namespace tessera
