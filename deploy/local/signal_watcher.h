// SignalWatcher takes SIGINT, SIGTERM and SIGHUP off the signal-handler
// path: they are blocked in every thread and collected by sigtimedwait() on
// a dedicated thread, so no work happens in async-signal context.
//
// Contract: construct it before any other thread starts, since threads
// inherit the signal mask and one without it would take the default action
// (dying, orphaning the launcher's children). SIGHUP is left alone when it
// is inherited as ignored (nohup), so the cluster survives the terminal
// going away.
#ifndef TESSERA_DEPLOY_LOCAL_SIGNAL_WATCHER_H_
#define TESSERA_DEPLOY_LOCAL_SIGNAL_WATCHER_H_

#include <signal.h>

#include <atomic>
#include <thread>

namespace tessera {

class SignalWatcher {
 public:
  // `grace_period_s` is only named in the message for the first signal.
  explicit SignalWatcher(int grace_period_s);
  SignalWatcher(const SignalWatcher&) = delete;
  SignalWatcher& operator=(const SignalWatcher&) = delete;
  ~SignalWatcher();

  // Number of signals caught so far, and the first of them (0 if none).
  int count() const { return count_; }
  int first() const { return first_; }

 private:
  void Run();

  const int grace_period_s_;
  sigset_t signals_;
  std::atomic<bool> done_{false};
  std::atomic<int> count_{0};
  std::atomic<int> first_{0};
  std::thread thread_;
};

}  // namespace tessera

#endif  // TESSERA_DEPLOY_LOCAL_SIGNAL_WATCHER_H_
