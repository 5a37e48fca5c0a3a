#include "common/data_plane/descriptor_limit.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/data_plane/handshake.h"
#include "common/data_plane/socket.h"

namespace tessera {
namespace {

uint64_t Limit(rlim_t v) {
  return v == RLIM_INFINITY ? UINT64_MAX : static_cast<uint64_t>(v);
}

std::string SoftLimitNow() {
  rlimit now{};
  if (getrlimit(RLIMIT_NOFILE, &now) != 0) return "unknown";
  return absl::StrCat(Limit(now.rlim_cur));
}

}  // namespace

absl::StatusOr<DescriptorLimit> RaiseDescriptorLimit() {
  rlimit now{};
  if (getrlimit(RLIMIT_NOFILE, &now) != 0) {
    return absl::InternalError(
        absl::StrCat("getrlimit(RLIMIT_NOFILE): ", std::strerror(errno)));
  }
  DescriptorLimit limit;
  limit.soft_before = Limit(now.rlim_cur);
  limit.hard = Limit(now.rlim_max);
  if (now.rlim_cur != now.rlim_max) {
    rlimit raised = now;
    raised.rlim_cur = now.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &raised) != 0) {
      return absl::InternalError(
          absl::StrCat("setrlimit(RLIMIT_NOFILE) to the hard limit ",
                       limit.hard, ": ", std::strerror(errno)));
    }
  }
  limit.soft = limit.hard;
  return limit;
}

std::string DescribeDescriptorLimit(const DescriptorLimit& limit) {
  return absl::StrCat("RLIMIT_NOFILE ", limit.soft_before, " -> ", limit.soft,
                      " (hard ", limit.hard, "): room for about ",
                      limit.soft > 64 ? limit.soft - 64 : 0,
                      " data plane connections");
}

SpareDescriptor::SpareDescriptor() { Restore(); }

SpareDescriptor::~SpareDescriptor() { Release(); }

void SpareDescriptor::Release() {
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
}

bool SpareDescriptor::Restore() {
  if (fd_ < 0) fd_ = open("/dev/null", O_RDONLY | O_CLOEXEC);
  return fd_ >= 0;
}

int AcceptOrRefuse(int listen_fd, SpareDescriptor* spare) {
  const int fd = accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
  if (fd >= 0 || (errno != EMFILE && errno != ENFILE)) return fd;
  const int err = errno;
  if (!spare->held()) {
    spare->Restore();
    errno = EMFILE;
    return -1;
  }
  spare->Release();
  const int refused = accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
  if (refused < 0) {
    // The kernel reports EMFILE before it looks at the backlog: with a
    // descriptor free, an empty one says EAGAIN.
    const int why = errno;
    spare->Restore();
    errno = why;
    return -1;
  }
  {
    Socket socket(refused);
    // A fresh connection's send buffer takes the refusal whole, but a
    // client that reads nothing must not hold this thread.
    socket.SetTimeout(1).IgnoreError();
    SendRefusalGreeting(
        socket,
        absl::ResourceExhaustedError(absl::StrCat(
            "data plane: the parameter server has no descriptor left for "
            "another connection (",
            err == ENFILE
                ? "the system's file table is full"
                : absl::StrCat("RLIMIT_NOFILE ", SoftLimitNow(), " reached"),
            "); raise its limit (ulimit -n) or use fewer connections")))
        .IgnoreError();
  }
  spare->Restore();
  errno = EMFILE;
  return -1;
}

}  // namespace tessera
