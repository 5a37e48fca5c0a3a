#include "common/rpc/grpc_server.h"

#include <errno.h>
#include <netdb.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <unistd.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/rpc/grpc_channel.h"
#include "glog/logging.h"
#include "grpcpp/security/server_credentials.h"

namespace tessera {
namespace {

// Whether `listen` (host:port, host "[::]" for every interface) can be
// bound now. gRPC's own failure is a dump of its internal errors with no
// cause named; a plain bind tells "in use" from "no such address".
absl::Status CheckCanListen(const std::string& listen) {
  const size_t colon = listen.rfind(':');
  std::string host = listen.substr(0, colon);
  const std::string port = listen.substr(colon + 1);
  if (port == "0") return absl::OkStatus();  // the kernel picks a free one
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  addrinfo hints = {};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  if (int rc = getaddrinfo(host.empty() ? nullptr : host.c_str(), port.c_str(),
                           &hints, &found);
      rc != 0) {
    return absl::InvalidArgumentError(absl::StrCat("cannot listen on ", listen,
                                                   ": ", gai_strerror(rc),
                                                   " (see --listen_host)"));
  }
  absl::Status status = absl::OkStatus();
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    const int fd = socket(a->ai_family, a->ai_socktype, a->ai_protocol);
    if (fd < 0) continue;
    const int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    const int rc = bind(fd, a->ai_addr, a->ai_addrlen);
    const int error = errno;
    close(fd);
    if (rc == 0) break;
    if (error == EADDRINUSE) {
      status = absl::UnavailableError(absl::StrCat(
          "cannot listen on ", listen, ": port ", port,
          " is in use by another process ('ss -ltnp sport = :", port,
          "' shows which)"));
      break;
    }
    if (error == EADDRNOTAVAIL) {
      status = absl::InvalidArgumentError(absl::StrCat(
          "cannot listen on ", listen, ": ", host,
          " is not an address of this machine (see --listen_host)"));
    }
  }
  freeaddrinfo(found);
  return status;
}

}  // namespace

std::unique_ptr<grpc::Server> StartServer(
    const std::string& address, grpc::Service* service,
    const ServerOptions& options,
    const std::function<void(grpc::ServerBuilder*)>& more, int* selected_port) {
  // By default every interface at the cluster's port: the host name in
  // the cluster spec is how others reach us, not necessarily a local
  // address (see --listen_host).
  const std::string listen = ListenAddress(address, options.listen_host);
  if (absl::Status s = CheckCanListen(listen); !s.ok()) {
    LOG(ERROR) << s.message();
    return nullptr;
  }
  grpc::ServerBuilder builder;
  ConfigureServerBuilder(&builder);
  int bound_port = 0;
  builder.AddListeningPort(listen, MakeServerCredentials(options.tls),
                           &bound_port);
  builder.RegisterService(service);
  if (more) more(&builder);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || bound_port == 0) {
    LOG(ERROR) << "cannot listen on " << listen
               << (options.tls.has_value() ? " with TLS" : "")
               << " (gRPC could not start its server; its log above says "
                  "why)";
    return nullptr;
  }
  LOG(INFO) << "serving at " << listen << " on port " << bound_port
            << (options.tls.has_value()
                    ? " over TLS, client certificates required"
                    : " in plaintext");
  if (selected_port != nullptr) *selected_port = bound_port;
  return server;
}

}  // namespace tessera
