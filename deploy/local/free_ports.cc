#include "deploy/local/free_ports.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <system_error>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace tessera {
namespace {

// Closes the sockets on every return path.
class SocketSet {
 public:
  SocketSet() = default;
  SocketSet(const SocketSet&) = delete;
  SocketSet& operator=(const SocketSet&) = delete;
  ~SocketSet() {
    for (int fd : fds_) close(fd);
  }
  void Add(int fd) { fds_.push_back(fd); }

 private:
  std::vector<int> fds_;
};

absl::Status ErrnoError(const char* what) {
  return absl::InternalError(absl::StrCat(what, ": ", strerror(errno)));
}

// How long a handed-out port stays reserved for its picker: enough for
// its processes to start and bind it.
constexpr int64_t kReservedSeconds = 60;

// The ports every PickFreePorts of this user on this machine handed out in
// the last kReservedSeconds, in a file under the temporary folder, held
// under an exclusive flock while a pick runs. Two launchers starting at
// once (tests run side by side) would otherwise both find a port free in
// the moment between one's pick and its process's bind. Best effort: a
// file that cannot be opened or locked reserves nothing.
class PortReservations {
 public:
  PortReservations() {
    // A $TMPDIR that is no folder reserves nothing (the throwing overload
    // would end the launcher).
    std::error_code error;
    const std::filesystem::path tmp =
        std::filesystem::temp_directory_path(error);
    if (error) return;
    const std::string path =
        (tmp / absl::StrCat("tessera-picked-ports-", getuid())).string();
    fd_ = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd_ >= 0 && flock(fd_, LOCK_EX) != 0) {
      close(fd_);
      fd_ = -1;
    }
    if (fd_ < 0) return;
    const int64_t now = absl::ToUnixSeconds(absl::Now());
    std::string text;
    char buffer[4096];
    ssize_t got = 0;
    while ((got = pread(fd_, buffer, sizeof(buffer), text.size())) > 0) {
      text.append(buffer, static_cast<size_t>(got));
    }
    for (absl::string_view line : absl::StrSplit(text, '\n')) {
      std::pair<absl::string_view, absl::string_view> fields =
          absl::StrSplit(line, ' ');
      int port = 0;
      int64_t when = 0;
      if (absl::SimpleAtoi(fields.first, &port) &&
          absl::SimpleAtoi(fields.second, &when) &&
          now - when < kReservedSeconds) {
        reserved_[port] = when;
      }
    }
  }
  PortReservations(const PortReservations&) = delete;
  PortReservations& operator=(const PortReservations&) = delete;
  // Writes the reservations back, with `picked` added, and unlocks.
  ~PortReservations() {
    if (fd_ < 0) return;
    std::string text;
    for (const auto& [port, when] : reserved_) {
      absl::StrAppend(&text, port, " ", when, "\n");
    }
    if (ftruncate(fd_, 0) == 0) {
      pwrite(fd_, text.data(), text.size(), 0);
    }
    close(fd_);  // and the lock with it
  }

  bool reserved(int port) const { return reserved_.contains(port); }
  void Reserve(int port) { reserved_[port] = absl::ToUnixSeconds(absl::Now()); }

 private:
  int fd_ = -1;
  absl::flat_hash_map<int, int64_t> reserved_;
};

}  // namespace

absl::StatusOr<std::vector<int>> PickFreePorts(int n) {
  if (n < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot pick a negative number of ports: ", n));
  }
  PortReservations reservations;
  SocketSet sockets;
  std::vector<int> ports;
  ports.reserve(n);
  // Binds a new socket to 127.0.0.1:port (0: the kernel picks) and returns
  // the port it got, or 0 when that port is taken.
  auto bind_one = [&](int port) -> absl::StatusOr<int> {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return ErrnoError("socket");
    sockets.Add(fd);
    sockaddr_in addr;
    memset(&addr, 0, sizeof(addr));
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(static_cast<uint16_t>(port));
    if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
      if (port != 0 && (errno == EADDRINUSE || errno == EACCES)) return 0;
      return ErrnoError(port == 0 ? "bind 127.0.0.1:0" : "bind 127.0.0.1");
    }
    socklen_t len = sizeof(addr);
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      return ErrnoError("getsockname");
    }
    return static_cast<int>(ntohs(addr.sin_port));
  };
  // Below the ephemeral range first: the kernel hands ports from that range
  // to every connect() and bind(0) on the machine (gRPC clients, tests
  // beside this one), any of which could take a port picked there before
  // the cluster member binds it. Below it, only explicit binds compete.
  const PortRange ephemeral = EphemeralPortRange();
  const int low = kFirstPickedPort;
  const int high = ephemeral.first - 1;
  if (high - low + 1 >= 4 * n) {
    std::mt19937 rng(std::random_device{}());
    std::uniform_int_distribution<int> pick(low, high);
    for (int tries = 0;
         static_cast<int>(ports.size()) < n && tries < 20 * n + 100; ++tries) {
      const int candidate = pick(rng);
      if (reservations.reserved(candidate)) continue;  // another picker's
      absl::StatusOr<int> port = bind_one(candidate);
      if (!port.ok()) return port.status();
      if (*port != 0) ports.push_back(*port);  // held, so never picked twice
    }
  }
  while (static_cast<int>(ports.size()) < n) {
    absl::StatusOr<int> port = bind_one(0);
    if (!port.ok()) return port.status();
    ports.push_back(*port);
  }
  for (int port : ports) reservations.Reserve(port);
  return ports;
}

PortRange EphemeralPortRange() {
  PortRange range{32768, 60999};  // Linux's default
  std::ifstream file("/proc/sys/net/ipv4/ip_local_port_range");
  int first = 0, last = 0;
  if (file >> first >> last && 0 < first && first <= last && last < 65536) {
    range = {first, last};
  }
  return range;
}

}  // namespace tessera
