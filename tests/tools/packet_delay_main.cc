// tessera_packet_delay: holds every packet of one NFQUEUE queue for
// --delay_us plus a uniform jitter in [-jitter_us, +jitter_us] and then
// lets it go, releasing in order of release time (so jitter reorders, as
// tc netem's does). The stand-in for `tc qdisc ... netem delay` on kernels
// without sch_netem (tests/integration/netns_fault_test.sh,
// bench/transport_netns.sh); packets reach it through a rule such as
//
//   iptables -t mangle -A POSTROUTING -o eth0 -j NFQUEUE --queue-num 0
//
// in the same network namespace (start it with `ip netns exec`). Without
// --queue-bypass on that rule and with the queue's fail-open off, packets
// are dropped, never passed undelayed, while this process is not there or
// cannot keep up: a slow or missing delay shows as loss, never as a delay
// silently smaller than the one asked for. The kernel's drop counters are
// printed at exit.
//
// Prints one line once the queue is bound ("... bound ...") and, on SIGTERM
// or SIGINT, lets every held packet go, prints what it did and exits 0:
//
//   tessera_packet_delay: queue 0: delayed 1234 packets, mean 1003.1 us
//   (min 752, max 1261); 2 let go early at exit; kernel: 0 dropped queue
//   full, 0 dropped socket full, 0 receive overruns
//
// Exit status 1 with the reason when the queue cannot be bound or a flag
// is wrong.

#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <time.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gflags/gflags.h"
#include "tests/tools/delay_schedule.h"
#include "tests/tools/nf_queue.h"

DEFINE_int32(queue_num, 0, "The NFQUEUE queue to bind (0-65535).");
DEFINE_int64(delay_us, 1000, "Mean delay of every packet, microseconds.");
DEFINE_int64(jitter_us, 250,
             "Uniform jitter: each delay is drawn from [delay - jitter, "
             "delay + jitter] (0 <= jitter <= delay).");
DEFINE_int32(max_queue, 65536,
             "Packets the kernel may hold for the queue; beyond it, drops.");
DEFINE_uint64(seed, 0, "Jitter seed; 0 draws one.");
DEFINE_int32(realtime_priority, 50,
             "SCHED_FIFO priority (1-99) of this process, so that busy "
             "processes on the same cores do not hold the releases back (as "
             "netem, in the kernel, is not held back); 0 keeps normal "
             "scheduling.");

namespace tessera {
namespace {

volatile sig_atomic_t stop_requested = 0;

void OnStopSignal(int) { stop_requested = 1; }

int64_t NowMicros() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1000000 + ts.tv_nsec / 1000;
}

absl::Status AcceptAll(NfQueue& queue, std::vector<uint32_t>* ids) {
  for (uint32_t id : *ids) {
    if (absl::Status s = queue.Accept(id); !s.ok()) return s;
  }
  ids->clear();
  return absl::OkStatus();
}

absl::Status Run() {
  if (FLAGS_queue_num < 0 || FLAGS_queue_num > 65535) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--queue_num must be in [0, 65535], got ", FLAGS_queue_num));
  }
  if (FLAGS_realtime_priority < 0 || FLAGS_realtime_priority > 99) {
    return absl::InvalidArgumentError(
        absl::StrCat("--realtime_priority must be in [0, 99], got ",
                     FLAGS_realtime_priority));
  }
  if (FLAGS_max_queue < 1) {
    return absl::InvalidArgumentError("--max_queue must be >= 1");
  }
  const uint64_t seed =
      FLAGS_seed != 0 ? FLAGS_seed : std::random_device()() | 1;
  absl::StatusOr<DelaySchedule> schedule =
      DelaySchedule::Create(FLAGS_delay_us, FLAGS_jitter_us, seed);
  if (!schedule.ok()) return schedule.status();

  // SIGTERM and SIGINT are blocked except inside ppoll, so a stop request
  // can never fall between the flag check and the wait.
  sigset_t stop_signals, wait_mask;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  sigprocmask(SIG_BLOCK, &stop_signals, &wait_mask);
  sigdelset(&wait_mask, SIGTERM);
  sigdelset(&wait_mask, SIGINT);
  struct sigaction action = {};
  action.sa_handler = OnStopSignal;
  sigaction(SIGTERM, &action, nullptr);
  sigaction(SIGINT, &action, nullptr);
  // The default 50 us timer slack would be a fifth of the jitter.
  prctl(PR_SET_TIMERSLACK, 1UL);
  // Without it, on a machine whose cores the job keeps busy, a release
  // waited for the scheduler for up to 16 ms (a 2-core VM, 5 of these
  // beside the training job), and the mean delay grew by a tenth.
  std::string scheduling = "normal scheduling";
  if (FLAGS_realtime_priority > 0) {
    struct sched_param param = {};
    param.sched_priority = FLAGS_realtime_priority;
    scheduling = sched_setscheduler(0, SCHED_FIFO, &param) == 0
                     ? absl::StrCat("SCHED_FIFO ", FLAGS_realtime_priority)
                     : absl::StrCat("normal scheduling (SCHED_FIFO ",
                                    FLAGS_realtime_priority,
                                    " refused: ", std::strerror(errno), ")");
  }

  NfQueueOptions options;
  options.queue_num = static_cast<uint16_t>(FLAGS_queue_num);
  options.max_len = static_cast<uint32_t>(FLAGS_max_queue);
  options.fail_open = false;  // see the file comment
  absl::StatusOr<std::unique_ptr<NfQueue>> bound = NfQueue::Bind(options);
  if (!bound.ok()) return bound.status();
  NfQueue& queue = **bound;
  std::printf(
      "tessera_packet_delay: queue %d bound: delay %lld us, jitter +-%lld "
      "us (uniform), seed %llu, %s\n",
      FLAGS_queue_num, static_cast<long long>(FLAGS_delay_us),
      static_cast<long long>(FLAGS_jitter_us),
      static_cast<unsigned long long>(seed), scheduling.c_str());
  std::fflush(stdout);

  auto hold = [&](uint32_t id) { schedule->Add(id, NowMicros()); };
  // A release here comes 50-150 us after its time on average, and up to
  // 15 ms on a 2-core VM whose cores the job keeps busy, even at SCHED_FIFO
  // (a kernel without preemption finishes the busy process's system call
  // first, and each verdict re-injects its packet into the stack in this
  // thread). That would add a tenth to a 1 ms delay. So releases aim ahead
  // of the drawn times by `lead_us`, a running mean of how late they came
  // when aimed at the drawn times: the mean delay stays the one asked for
  // (the jitter's spread then carries the scheduling noise too), without
  // spinning on the CPU. It never aims before a packet's arrival.
  const int64_t max_lead_us = FLAGS_delay_us - FLAGS_jitter_us;
  double lead_us = 0;
  absl::Status status;
  while (!stop_requested && status.ok()) {
    // One at a time, each timed just before its verdict: a verdict
    // re-injects its packet into the stack in this thread, which takes a
    // while with many due at once.
    uint32_t id = 0;
    while (status.ok()) {
      const std::optional<int64_t> late =
          schedule->PopOne(NowMicros(), std::llround(lead_us), &id);
      if (!late.has_value()) break;
      // late + lead_us is how late it would have gone unaimed.
      lead_us = std::clamp<double>(lead_us + *late / 64.0, 0, max_lead_us);
      status = queue.Accept(id);
    }
    if (!status.ok()) break;
    struct timespec timeout;
    struct timespec* wait = nullptr;  // nothing held: until a packet comes
    if (std::optional<int64_t> next = schedule->NextRelease()) {
      const int64_t us =
          std::max<int64_t>(0, *next - std::llround(lead_us) - NowMicros());
      timeout.tv_sec = us / 1000000;
      timeout.tv_nsec = (us % 1000000) * 1000;
      wait = &timeout;
    }
    struct pollfd fd = {queue.fd(), POLLIN, 0};
    const int ready = ppoll(&fd, 1, wait, &wait_mask);
    if (ready < 0 && errno != EINTR) {
      status =
          absl::InternalError(absl::StrCat("ppoll: ", std::strerror(errno)));
    } else if (ready > 0) {
      status = queue.ReadPending(hold);
    }
  }
  // Nothing held is dropped on the way out.
  std::vector<uint32_t> held;
  schedule->ReleaseAll(&held);
  if (absl::Status s = AcceptAll(queue, &held); status.ok()) status = s;

  const DelayStats& stats = schedule->stats();
  absl::StatusOr<NfQueueCounters> counters = queue.KernelCounters();
  const std::string kernel =
      counters.ok()
          ? absl::StrCat(counters->queue_dropped, " dropped queue full, ",
                         counters->user_dropped, " dropped socket full")
          : std::string(counters.status().message());
  std::printf(
      "tessera_packet_delay: queue %d: delayed %lld packets, mean %.1f us "
      "(min %lld, max %lld); %lld let go early at exit; kernel: %s, %lld "
      "receive overruns\n",
      FLAGS_queue_num, static_cast<long long>(stats.packets), stats.mean_us(),
      static_cast<long long>(stats.min_us),
      static_cast<long long>(stats.max_us),
      static_cast<long long>(stats.released_early), kernel.c_str(),
      static_cast<long long>(queue.overruns()));
  std::fflush(stdout);
  return status;
}

}  // namespace
}  // namespace tessera

int main(int argc, char** argv) {
  gflags::SetUsageMessage(
      "tessera_packet_delay --queue_num=N [--delay_us=1000 --jitter_us=250]: "
      "delays the packets of an NFQUEUE queue (netem's delay without "
      "netem).");
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  absl::Status status = tessera::Run();
  if (!status.ok()) {
    std::fprintf(stderr, "tessera_packet_delay: error: %s\n",
                 status.ToString().c_str());
    return 1;
  }
  return 0;
}
