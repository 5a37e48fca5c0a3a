// Descriptors on a data plane server: every connection holds one, so a
// server of many workers needs a high RLIMIT_NOFILE, and one that runs out
// must say so to the connection it cannot take instead of spinning on a
// listening socket that stays readable (a stuck server, as grpc#11679).
//
// RaiseDescriptorLimit raises this process's soft limit to its hard one.
// AcceptOrRefuse accepts a connection, and when the process has no
// descriptor left uses a spare one kept for this (SpareDescriptor) to take
// the connection anyway, tell the client RESOURCE_EXHAUSTED with the
// reason (handshake.h's refusal greeting) and close it, so the backlog
// drains and the worker sees a clear error.
//
// Thread safety: RaiseDescriptorLimit may be called from any thread; a
// SpareDescriptor belongs to one accepting thread.
#ifndef TESSERA_COMMON_DATA_PLANE_DESCRIPTOR_LIMIT_H_
#define TESSERA_COMMON_DATA_PLANE_DESCRIPTOR_LIMIT_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace tessera {

struct DescriptorLimit {
  uint64_t soft_before = 0;  // the soft limit found
  uint64_t soft = 0;         // the soft limit now
  uint64_t hard = 0;
};

// Raises the soft RLIMIT_NOFILE to the hard limit (never lowers it).
// INTERNAL naming the call when the kernel refuses.
absl::StatusOr<DescriptorLimit> RaiseDescriptorLimit();

// "RLIMIT_NOFILE 1024 -> 20000 (hard 20000): about 19,9xx connections",
// for the server's start-up log line.
std::string DescribeDescriptorLimit(const DescriptorLimit& limit);

// One descriptor held back (on /dev/null) for refusing a connection when
// the process has none left.
class SpareDescriptor {
 public:
  SpareDescriptor();
  ~SpareDescriptor();
  SpareDescriptor(const SpareDescriptor&) = delete;
  SpareDescriptor& operator=(const SpareDescriptor&) = delete;

  bool held() const { return fd_ >= 0; }
  // Closes the spare, so the next descriptor made gets its number.
  void Release();
  // Takes a spare again; false when there is still no descriptor free.
  bool Restore();

 private:
  int fd_ = -1;
};

// accept4(listen_fd, SOCK_CLOEXEC) of a connection. On EMFILE or ENFILE it
// takes one connection with `spare`, refuses it with RESOURCE_EXHAUSTED
// naming the limit, closes it and returns -1 with errno EMFILE; errno
// stays EMFILE also when no spare was held (the caller backs off: nothing
// could be drained). Any other failure: -1 with accept4's errno.
int AcceptOrRefuse(int listen_fd, SpareDescriptor* spare);

}  // namespace tessera

#endif  // TESSERA_COMMON_DATA_PLANE_DESCRIPTOR_LIMIT_H_
