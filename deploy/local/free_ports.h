// PickFreePorts finds TCP ports on 127.0.0.1 for a local cluster.
//
// Contract: returns `n` distinct, non-zero ports that were free a moment ago.
// All n sockets are bound at the same time, so no port is handed out twice;
// they are closed before returning (never listened on, so nothing lingers in
// TIME_WAIT). The ports are drawn at random from [kFirstPickedPort, the
// start of the kernel's ephemeral range), where no connect() or bind(0)
// takes ports, and from the ephemeral range only when there is too little
// room below it. A port handed out is reserved for 60 s against the other
// PickFreePorts calls of this user on this machine (a file under the
// temporary folder, under flock), so launchers starting side by side never
// get the same port. Another process binding explicitly may still take a
// port before the caller binds it; callers that care must retry on
// "address in use".

#ifndef TESSERA_DEPLOY_LOCAL_FREE_PORTS_H_
#define TESSERA_DEPLOY_LOCAL_FREE_PORTS_H_

#include <vector>

#include "absl/status/statusor.h"

namespace tessera {

inline constexpr int kFirstPickedPort = 10000;

absl::StatusOr<std::vector<int>> PickFreePorts(int n);

// The kernel's ephemeral port range, inclusive
// (/proc/sys/net/ipv4/ip_local_port_range; Linux's default without it).
struct PortRange {
  int first = 0, last = 0;
};
PortRange EphemeralPortRange();

}  // namespace tessera

#endif  // TESSERA_DEPLOY_LOCAL_FREE_PORTS_H_
