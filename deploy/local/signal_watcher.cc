#include "deploy/local/signal_watcher.h"

#include <pthread.h>
#include <time.h>

#include "deploy/local/console.h"
#include "deploy/local/process_group.h"

namespace tessera {

SignalWatcher::SignalWatcher(int grace_period_s)
    : grace_period_s_(grace_period_s) {
  sigemptyset(&signals_);
  sigaddset(&signals_, SIGINT);
  sigaddset(&signals_, SIGTERM);
  // Under nohup the cluster must survive the terminal going away. SIGINT
  // is watched even when inherited as ignored (as for "cmd &" in a script),
  // since blocked signals are still queued and kill -INT should work.
  struct sigaction hup;
  if (sigaction(SIGHUP, nullptr, &hup) != 0 || hup.sa_handler != SIG_IGN) {
    sigaddset(&signals_, SIGHUP);
  }
  pthread_sigmask(SIG_BLOCK, &signals_, nullptr);
  thread_ = std::thread([this] { Run(); });
}

SignalWatcher::~SignalWatcher() {
  done_ = true;
  thread_.join();
}

void SignalWatcher::Run() {
  // The timeout only bounds how long the destructor waits for this thread.
  const timespec timeout = {0, 100 * 1000 * 1000};
  while (!done_) {
    siginfo_t info;
    const int sig = sigtimedwait(&signals_, &info, &timeout);
    if (sig <= 0) continue;
    int none = 0;
    first_.compare_exchange_strong(none, sig);
    const int n = ++count_;
    if (n == 1) {
      Complain(
          "\ntessera_local: caught %s; stopping all processes (send it "
          "again to skip the %ds grace period)\n",
          SignalName(sig), grace_period_s_);
    } else if (n == 2) {
      Complain("\ntessera_local: caught %s again; killing all processes\n",
               SignalName(sig));
    }
  }
}

}  // namespace tessera
