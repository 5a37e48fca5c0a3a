#ifndef TESSERA_TESTS_PS_SERVER_PS_TEST_UTIL_H_
#define TESSERA_TESTS_PS_SERVER_PS_TEST_UTIL_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "common/data_plane/data_plane_kind.h"
#include "common/initializer.h"
#include "common/rpc/grpc_channel.h"
#include "common/rpc/rpc_auth.h"
#include "common/rpc/tls_files.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "proto/job.pb.h"
#include "proto/ps_service.pb.h"
#include "ps_server/client/ps_client.h"
#include "ps_server/data_plane/dense_plane_server.h"
#include "ps_server/ps_service.h"
#include "ps_server/shard_store.h"
#include "tests/common/optimizer/optimizer_configs.h"

namespace tessera {
namespace ps_test {

// The chunk size of both sides in the service tests: small, so that a shard
// of a few thousand floats travels as several chunks.
inline constexpr int64_t kTestChunkBytes = 4096;

inline Initializer ZerosInit() {
  Initializer init;
  init.set_kind(Initializer::ZEROS);
  return init;
}

inline Initializer ConstantInit(float value) {
  Initializer init;
  init.set_kind(Initializer::CONSTANT);
  init.set_value(value);
  return init;
}

// Uniform in [-limit, limit], seeded.
inline Initializer UniformInit(uint64_t seed, float limit) {
  Initializer init;
  init.set_kind(Initializer::UNIFORM);
  init.set_minval(-limit);
  init.set_maxval(limit);
  init.set_seed(seed);
  return init;
}

inline Initializer GlorotInit(int64_t fan_in, int64_t fan_out, uint64_t seed) {
  Initializer init;
  init.set_kind(Initializer::GLOROT_UNIFORM);
  init.set_fan_in(fan_in);
  init.set_fan_out(fan_out);
  init.set_seed(seed);
  return init;
}

// Shard `index` of `variable`, holding rows [row_offset, row_offset + rows)
// of a variable of shape `variable_dims`. An empty `variable_dims` makes a
// rank-0 (scalar) shard and ignores row_offset and rows.
inline ShardDef MakeShardDef(const std::string& variable, int index,
                             const std::vector<int64_t>& variable_dims,
                             int64_t row_offset, int64_t rows,
                             const Initializer& init) {
  ShardDef def;
  def.set_name(absl::StrCat(variable, "/part_", index));
  def.set_variable(variable);
  def.set_index(index);
  def.set_dtype(DT_FLOAT);
  *def.mutable_initializer() = init;
  for (int64_t d : variable_dims) def.mutable_variable_shape()->add_dims(d);
  if (!variable_dims.empty()) {
    def.set_row_offset(row_offset);
    def.mutable_shape()->add_dims(rows);
    for (size_t i = 1; i < variable_dims.size(); ++i) {
      def.mutable_shape()->add_dims(variable_dims[i]);
    }
  }
  return def;
}

inline int64_t NumElements(const ShardDef& def) {
  int64_t n = 1;
  for (int64_t d : def.shape().dims()) n *= d;
  return n;
}

inline int64_t RowElements(const ShardDef& def) {
  int64_t n = 1;
  for (int i = 1; i < def.shape().dims_size(); ++i) n *= def.shape().dims(i);
  return n;
}

// The values a freshly created shard must hold: its slice of the whole
// variable's initial values.
inline std::vector<float> InitialValues(const ShardDef& def) {
  std::vector<float> values(NumElements(def));
  FillInitialValues(def.initializer(), def.row_offset() * RowElements(def),
                    absl::MakeSpan(values));
  return values;
}

using optimizer_test::AdamConfig;
using optimizer_test::MomentumConfig;
using optimizer_test::SgdConfig;

// A ParameterServerService on a real gRPC server on a loopback port chosen
// by the kernel, with its TCP data plane beside it on another, and
// PsClients talking to it over either.
class TestPsServer {
 public:
  // `auth` (default: none) is the token calls must carry; with
  // `plane_tls` the data plane runs TLS (gRPC stays plaintext).
  explicit TestPsServer(RpcAuth auth = RpcAuth(),
                        std::optional<TlsFiles> plane_tls = std::nullopt)
      : service_(&core_, ServiceOptions(auth)) {
    DensePlaneServerOptions plane;
    plane.host = "127.0.0.1";
    plane.job_token = auth.token();
    plane.timeout_s = 60;
    plane.tls = std::move(plane_tls);
    absl::StatusOr<std::unique_ptr<DensePlaneServer>> started =
        DensePlaneServer::Start(&core_, plane);
    if (started.ok()) plane_ = *std::move(started);
    grpc::ServerBuilder builder;
    ConfigureServerBuilder(&builder);
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                             &port_);
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
    address_ = absl::StrCat("127.0.0.1:", port_);
  }

  ~TestPsServer() {
    plane_.reset();
    if (server_ != nullptr) {
      server_->Shutdown(std::chrono::system_clock::now() +
                        std::chrono::seconds(5));
    }
  }

  bool started() const {
    return server_ != nullptr && port_ > 0 && plane_ != nullptr;
  }
  int data_plane_port() const { return plane_ ? plane_->port() : 0; }
  int64_t data_plane_connections() const {
    return plane_ ? plane_->connections_accepted() : 0;
  }
  const std::string& address() const { return address_; }
  ShardStore& store() { return store_; }
  ParameterServerService& service() { return service_; }
  PsCore& core() { return core_; }

  // A stub whose channel attaches no token of its own.
  std::unique_ptr<ParameterServer::Stub> NewStub() const {
    return ParameterServer::NewStub(
        grpc::CreateChannel(address_, grpc::InsecureChannelCredentials()));
  }

  // A client whose dense calls travel on `plane`, proving `token` there
  // (and carrying it on the gRPC channel).
  std::unique_ptr<PsClient> NewClient(
      DataPlaneKind plane = DataPlaneKind::kGrpc,
      const std::string& token = "") const {
    PsClientOptions options;
    options.chunk_bytes = kTestChunkBytes;
    options.timeout_s = 60;
    options.data_plane = plane;
    options.job_token = token;
    ChannelSecurity security;
    security.job_token = token;
    return std::make_unique<PsClient>(address_, 0,
                                      MakeChannel(address_, security), options);
  }

  // A client on the data plane with TLS `tls` (the server's certificate
  // must name `tls_name`, empty: 127.0.0.1), proving `token`.
  std::unique_ptr<PsClient> NewTlsClient(const std::string& token,
                                         std::optional<TlsFiles> tls,
                                         const std::string& tls_name = "",
                                         double timeout_s = 60) const {
    PsClientOptions options;
    options.chunk_bytes = kTestChunkBytes;
    options.timeout_s = timeout_s;
    options.data_plane = DataPlaneKind::kTcp;
    options.job_token = token;
    options.tls = std::move(tls);
    options.tls_target_name_override = tls_name;
    ChannelSecurity security;
    security.job_token = token;
    return std::make_unique<PsClient>(address_, 0,
                                      MakeChannel(address_, security), options);
  }

 private:
  static PsServiceOptions ServiceOptions(RpcAuth auth) {
    PsServiceOptions options;
    options.chunk_bytes = kTestChunkBytes;
    options.auth = std::move(auth);
    return options;
  }

  ShardStore store_;
  PsCore core_{&store_};
  ParameterServerService service_;
  int port_ = 0;
  std::string address_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<DensePlaneServer> plane_;
};

}  // namespace ps_test
}  // namespace tessera

#endif  // TESSERA_TESTS_PS_SERVER_PS_TEST_UTIL_H_
