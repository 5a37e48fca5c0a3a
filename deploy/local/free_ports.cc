#include "deploy/local/free_ports.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>
#include <random>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

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

}  // namespace

absl::StatusOr<std::vector<int>> PickFreePorts(int n) {
  if (n < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot pick a negative number of ports: ", n));
  }
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
      absl::StatusOr<int> port = bind_one(pick(rng));
      if (!port.ok()) return port.status();
      if (*port != 0) ports.push_back(*port);  // held, so never picked twice
    }
  }
  while (static_cast<int>(ports.size()) < n) {
    absl::StatusOr<int> port = bind_one(0);
    if (!port.ok()) return port.status();
    ports.push_back(*port);
  }
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
