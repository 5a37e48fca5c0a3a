#include "ps_server/client/plane_channel.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace tessera {

struct PlaneChannel::Entry {
  PlaneReplyReader reader;
  bool awaited = false;
  bool abandoned = false;
  bool reading = false;  // a thread is reading it now
  bool done = false;
  absl::Status status;
};

PlaneChannel::PlaneChannel(Socket socket, bool tls)
    : socket_(std::move(socket)), tls_(tls) {}

PlaneChannel::~PlaneChannel() = default;

bool PlaneChannel::broken() const {
  absl::MutexLock lock(&mu_);
  return !broken_.ok();
}

bool PlaneChannel::MustReadBeforeWriteLocked() const {
  if (tls_) return !unread_.empty() || reading_;
  // Replies no thread waits for; one being read is finished by its reader.
  return std::any_of(unread_.begin(), unread_.end(),
                     [](const std::shared_ptr<Entry>& e) {
                       return !e->awaited && !e->reading;
                     });
}

absl::StatusOr<std::shared_ptr<PlaneChannel::Entry>> PlaneChannel::Send(
    absl::Span<const iovec> request, PlaneReplyReader&& reader, bool awaited,
    bool* sent) {
  *sent = false;
  absl::MutexLock write_lock(&write_mu_);
  mu_.Lock();
  auto turn_free = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return !reading_ || !broken_.ok();
  };
  while (broken_.ok() && MustReadBeforeWriteLocked()) {
    if (!reading_ && !unread_.empty()) {
      ReadHeadLocked();
    } else {
      mu_.Await(absl::Condition(&turn_free));
    }
  }
  // With nothing outstanding no one reads the socket, so a close by the
  // server (it restarted, or dropped an idle connection) shows here.
  if (broken_.ok() && unread_.empty() && !socket_.IdleAndOpen()) {
    BreakLocked(absl::UnavailableError(
        "the server closed the connection while it was idle"));
  }
  if (!broken_.ok()) {
    absl::Status s = broken_;
    mu_.Unlock();
    return s;
  }
  auto entry = std::make_shared<Entry>();
  entry->reader = std::move(reader);
  entry->awaited = awaited;
  // Queued before the bytes go: a reader may wait for its reply at once.
  unread_.push_back(entry);
  if (tls_) reading_ = true;  // the session takes one call at a time
  mu_.Unlock();
  *sent = true;
  const absl::Status s = socket_.WriteAll(request);
  absl::MutexLock lock(&mu_);
  if (tls_) reading_ = false;
  if (!s.ok()) {
    BreakLocked(s);
    // The caller's buffers go when this returns: as Abandon, wait out a
    // reader already inside the entry's reader. None can be today (replies
    // are read in order, and later calls wait for write_mu_), but nothing
    // else keeps it that way.
    entry->abandoned = true;
    auto free = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return !entry->reading;
    };
    mu_.Await(absl::Condition(&free));
    return s;
  }
  return entry;
}

absl::Status PlaneChannel::Wait(const std::shared_ptr<Entry>& entry) {
  absl::MutexLock lock(&mu_);
  entry->awaited = true;
  auto can_go = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return entry->done || (!reading_ && !unread_.empty());
  };
  while (!entry->done) {
    if (!reading_ && !unread_.empty()) {
      ReadHeadLocked();
    } else {
      mu_.Await(absl::Condition(&can_go));
    }
  }
  return entry->status;
}

void PlaneChannel::Abandon(const std::shared_ptr<Entry>& entry) {
  absl::MutexLock lock(&mu_);
  entry->abandoned = true;
  auto free = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return !entry->reading;
  };
  mu_.Await(absl::Condition(&free));
}

void PlaneChannel::ReadHeadLocked() {
  std::shared_ptr<Entry> head = unread_.front();
  reading_ = true;
  head->reading = true;
  const bool discard = head->abandoned;
  mu_.Unlock();
  PlaneReply reply = head->reader(socket_, discard);
  mu_.Lock();
  reading_ = false;
  head->reading = false;
  // Still the front: BreakLocked keeps the reply being read.
  unread_.pop_front();
  head->done = true;
  head->status = std::move(reply.status);
  head->reader = nullptr;
  if (!reply.in_step) BreakLocked(head->status);
}

void PlaneChannel::BreakLocked(const absl::Status& why) {
  if (broken_.ok()) {
    broken_ = absl::UnavailableError(
        absl::StrCat("the connection broke: ", why.message()));
    // Wakes a writer or reader blocked on it; their calls fail.
    socket_.Shutdown();
  }
  for (auto it = unread_.begin(); it != unread_.end();) {
    Entry& e = **it;
    if (e.reading) {
      ++it;
      continue;
    }
    e.done = true;
    e.status = broken_;
    e.reader = nullptr;
    it = unread_.erase(it);
  }
}

}  // namespace tessera
