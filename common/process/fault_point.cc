#include "common/process/fault_point.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "glog/logging.h"

namespace tessera {
namespace {

struct FaultPoints {
  std::string folder;
  std::string process;
  absl::Mutex mu;
  // Passes of each point while its file was there.
  absl::flat_hash_map<std::string, int64_t> passes ABSL_GUARDED_BY(mu);
};

// Set once before any thread reads it (EnableFaultPoints runs in main),
// then only read; the flag publishes it.
FaultPoints* points = nullptr;
std::atomic<bool> enabled{false};

}  // namespace

void EnableFaultPoints(std::string folder, std::string process) {
  if (folder.empty()) return;
  points = new FaultPoints;
  points->folder = std::move(folder);
  points->process = std::move(process);
  enabled.store(true, std::memory_order_release);
  LOG(INFO) << "fault points on: " << points->folder << "/" << points->process
            << ".<point>";
}

void FaultPoint(absl::string_view name) {
  if (!enabled.load(std::memory_order_acquire)) return;
  const std::string path =
      absl::StrCat(points->folder, "/", points->process, ".", name);
  std::string action;
  int64_t skip = 0;
  {
    std::ifstream file(path);
    if (!(file >> action)) return;  // no file (or an empty one, being laid)
    file >> skip;
  }
  if (skip > 0) {
    absl::MutexLock lock(&points->mu);
    if (points->passes[name]++ < skip) return;
  }
  // The rename is the claim: of threads passing at once, one wins.
  const std::string hit = path + ".hit";
  if (std::rename(path.c_str(), hit.c_str()) != 0) return;
  // Written, so that the .hit file's time is the moment of the hit (a
  // rename keeps the time the test laid the file).
  std::ofstream(hit, std::ios::app) << "hit by pid " << ::getpid() << "\n";
  LOG(WARNING) << "fault point " << points->process << "." << name << ": "
               << (action.empty() ? "hit" : action);
  google::FlushLogFiles(google::GLOG_INFO);
  if (action == "kill") {
    ::kill(::getpid(), SIGKILL);
  } else if (action == "stop") {
    ::kill(::getpid(), SIGSTOP);
  }
}

}  // namespace tessera
