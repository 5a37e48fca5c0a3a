// The dense methods' hand-made wire format at the service boundary: the
// raw server talks to generated stubs, refuses malformed bytes without
// changing anything, and PsClient moves large chunks (whose floats gRPC
// splits between receive slices) exactly. Real gRPC on a loopback port.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/rpc/grpc_channel.h"
#include "common/rpc/tensor_chunk_codec.h"
#include "grpcpp/impl/rpc_method.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/slice.h"
#include "grpcpp/support/sync_stream.h"
#include "proto/ps_service.grpc.pb.h"
#include "ps_server/client/ps_client.h"
#include "ps_server/dense_push_reactor.h"
#include "ps_server/wire/push_size.h"
#include "tests/ps_server/ps_test_util.h"

namespace tessera {
namespace {

using ps_test::ConstantInit;
using ps_test::GlorotInit;
using ps_test::InitialValues;
using ps_test::MakeShardDef;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

class DenseWireTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(server_.started());
    client_ = server_.NewClient();
    channel_ = MakeChannel(server_.address(), ChannelSecurity());
    stub_ = ParameterServer::NewStub(channel_);
  }

  void CreateShards(const std::vector<ShardDef>& defs, float learning_rate) {
    CreateShardsRequest request;
    for (const ShardDef& def : defs) *request.add_shards() = def;
    *request.mutable_optimizer() = ps_test::SgdConfig(learning_rate);
    CreateShardsResponse response;
    absl::Status status = client_->CreateShards(request, &response);
    ASSERT_TRUE(status.ok()) << status;
  }

  std::vector<float> PullOne(const ShardDef& def, int64_t* version = nullptr) {
    std::vector<float> values(ps_test::NumElements(def), -1.0f);
    std::vector<absl::Span<float>> out = {absl::MakeSpan(values)};
    std::vector<int64_t> versions;
    absl::Status status = client_->PullDense({def.name()}, out, &versions);
    EXPECT_TRUE(status.ok()) << status;
    if (version != nullptr && !versions.empty()) *version = versions[0];
    return values;
  }

  // Sends `messages` as they are on PushDense, declaring `declared` (none
  // when nullopt), and returns the call's status. With `cancel`, the client
  // cancels the call after the messages instead of ending it.
  grpc::Status PushRaw(const std::vector<std::string>& messages,
                       std::optional<PushSize> declared = PushSize{1, 12},
                       bool cancel = false) {
    grpc::internal::RpcMethod method(
        "/tessera.ParameterServer/PushDense",
        grpc::internal::RpcMethod::CLIENT_STREAMING, channel_);
    grpc::ClientContext context;
    if (declared.has_value()) DeclarePushSize(*declared, &context);
    PushResponse response;
    std::unique_ptr<grpc::ClientWriter<grpc::ByteBuffer>> writer(
        grpc::internal::ClientWriterFactory<grpc::ByteBuffer>::Create(
            channel_.get(), method, &context, &response));
    for (const std::string& m : messages) {
      grpc::Slice slice(m);
      if (!writer->Write(grpc::ByteBuffer(&slice, 1))) break;
    }
    if (cancel) {
      context.TryCancel();
    } else {
      writer->WritesDone();
    }
    return writer->Finish();
  }

  // A whole chunk of `def`'s gradient at `offset`, every float `value`.
  static std::string Chunk(const ShardDef& def, int64_t offset, int64_t bytes,
                           float value) {
    TensorChunkHeader header;
    header.name = def.name();
    header.offset = offset;
    header.total_bytes = ps_test::NumElements(def) * sizeof(float);
    std::string wire;
    AppendTensorChunkPrefix(header, bytes, &wire);
    std::vector<float> data(bytes / sizeof(float), value);
    wire.append(reinterpret_cast<const char*>(data.data()), bytes);
    return wire;
  }

  ps_test::TestPsServer server_;
  std::unique_ptr<PsClient> client_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<ParameterServer::Stub> stub_;
  // 10000 floats, ten 4 KiB chunks.
  const ShardDef big_ =
      MakeShardDef("big", 1, {3000, 5}, 1000, 2000, GlorotInit(3000, 5, 11));
  const ShardDef tiny_ = MakeShardDef("tiny", 0, {3}, 0, 3, ConstantInit(0.5f));
};

TEST_F(DenseWireTest, GeneratedStubPullsTheSameChunks) {
  CreateShards({big_, tiny_}, 0.1f);
  grpc::ClientContext context;
  PullRequest request;
  request.add_shards(big_.name());
  request.add_shards(tiny_.name());
  std::unique_ptr<grpc::ClientReader<TensorChunk>> reader =
      stub_->PullDense(&context, request);
  std::vector<TensorChunk> chunks;
  TensorChunk chunk;
  while (reader->Read(&chunk)) chunks.push_back(chunk);
  ASSERT_TRUE(reader->Finish().ok());
  ASSERT_EQ(chunks.size(), 11u);  // ten of big, one of tiny
  std::string big_bytes;
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(chunks[i].name(), big_.name());
    EXPECT_EQ(chunks[i].offset(), i * 4096);
    EXPECT_EQ(chunks[i].total_bytes(), 40000);
    EXPECT_EQ(chunks[i].version(), 0);
    big_bytes += chunks[i].data();
  }
  std::vector<float> big_values(10000);
  ASSERT_EQ(big_bytes.size(), 40000u);
  std::memcpy(big_values.data(), big_bytes.data(), big_bytes.size());
  EXPECT_THAT(big_values, ElementsAreArray(InitialValues(big_)));
  EXPECT_EQ(chunks[10].name(), tiny_.name());
  EXPECT_EQ(chunks[10].data().size(), 12u);
}

TEST_F(DenseWireTest, GeneratedStubPushIsApplied) {
  CreateShards({tiny_}, 1.0f);
  grpc::ClientContext context;
  DeclarePushSize({1, 12}, &context);
  PushResponse response;
  std::unique_ptr<grpc::ClientWriter<TensorChunk>> writer =
      stub_->PushDense(&context, &response);
  const float grad[3] = {1.0f, 2.0f, 3.0f};
  TensorChunk chunk;
  chunk.set_name(tiny_.name());
  chunk.set_total_bytes(12);
  chunk.set_version(0);
  // Two chunks of 4 and 8 bytes.
  chunk.set_data(std::string(reinterpret_cast<const char*>(grad), 4));
  ASSERT_TRUE(writer->Write(chunk));
  chunk.set_offset(4);
  chunk.set_data(std::string(reinterpret_cast<const char*>(grad + 1), 8));
  ASSERT_TRUE(writer->Write(chunk));
  writer->WritesDone();
  grpc::Status status = writer->Finish();
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(response.applied_size(), 1);
  EXPECT_EQ(response.applied(0).name(), tiny_.name());
  EXPECT_EQ(response.applied(0).version(), 1);
  int64_t version = 0;
  EXPECT_THAT(PullOne(tiny_, &version),
              ElementsAreArray({-0.5f, -1.5f, -2.5f}));
  EXPECT_EQ(version, 1);
}

TEST_F(DenseWireTest, MalformedChunkIsRefusedAndChangesNothing) {
  CreateShards({tiny_}, 1.0f);
  TensorChunkHeader header;
  header.name = tiny_.name();
  header.total_bytes = 12;
  std::string good;
  AppendTensorChunkPrefix(header, 12, &good);
  good.append(12, '\0');
  // A valid chunk, then one whose data field is cut short.
  grpc::Status status = PushRaw({good, good.substr(0, good.size() - 5)});
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("malformed TensorChunk"));
  EXPECT_THAT(status.error_message(), HasSubstr("field 15 (data)"));
  // A known field with the wrong wire type.
  status = PushRaw({std::string("\x12\x01x", 3)});
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("field 2 (offset)"));
  int64_t version = -1;
  EXPECT_THAT(PullOne(tiny_, &version), ElementsAreArray({0.5f, 0.5f, 0.5f}));
  EXPECT_EQ(version, 0);
}

TEST_F(DenseWireTest, PushWithoutADeclaredSizeIsRefused) {
  CreateShards({tiny_}, 1.0f);
  grpc::Status status = PushRaw({Chunk(tiny_, 0, 12, 1.0f)}, std::nullopt);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("tessera-push-parts"));
  int64_t version = -1;
  EXPECT_THAT(PullOne(tiny_, &version), ElementsAreArray({0.5f, 0.5f, 0.5f}));
  EXPECT_EQ(version, 0);
}

// A stream that ends before what the call declared (a cancelled call or a
// dropped connection ends it the same way on the server) applies nothing,
// not even the shards that did arrive whole.
TEST_F(DenseWireTest, PushCutOffBeforeItsDeclaredSizeChangesNothing) {
  CreateShards({tiny_, big_}, 1.0f);
  const PushSize both{2, 12 + 40000};
  // Cut between the two shards: the first one arrived whole.
  grpc::Status status = PushRaw({Chunk(tiny_, 0, 12, 1.0f)}, both);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(),
              HasSubstr("ended after 1 shards and 12 bytes"));
  EXPECT_THAT(status.error_message(), HasSubstr("nothing was applied"));
  // Cut inside the second shard.
  status =
      PushRaw({Chunk(tiny_, 0, 12, 1.0f), Chunk(big_, 0, 4096, 1.0f)}, both);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("ended at byte 4096 of 40000"));

  status = PushRaw({Chunk(tiny_, 0, 12, 1.0f), Chunk(big_, 0, 4096, 1.0f)},
                   both, /*cancel=*/true);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::CANCELLED);
  // The server sees the cancellation as the end of the stream, a moment
  // after the client does; give it that moment before looking.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));

  // More than declared is refused at the first byte too many.
  status = PushRaw({Chunk(tiny_, 0, 12, 1.0f), Chunk(big_, 0, 4096, 1.0f)},
                   PushSize{1, 12});
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("one more than the 1"));
  status = PushRaw({Chunk(tiny_, 0, 12, 1.0f)}, PushSize{1, 8});
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("past the 8 bytes"));

  int64_t version = -1;
  EXPECT_THAT(PullOne(tiny_, &version), ElementsAreArray({0.5f, 0.5f, 0.5f}));
  EXPECT_EQ(version, 0);
  EXPECT_THAT(PullOne(big_, &version), ElementsAreArray(InitialValues(big_)));
  EXPECT_EQ(version, 0);

  // The same shards, declared and sent whole, are applied.
  std::vector<std::string> whole = {Chunk(tiny_, 0, 12, 1.0f)};
  for (int64_t offset = 0; offset < 40000; offset += 4096) {
    whole.push_back(
        Chunk(big_, offset, std::min<int64_t>(4096, 40000 - offset), 1.0f));
  }
  status = PushRaw(whole, both);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_THAT(PullOne(tiny_, &version),
              ElementsAreArray({-0.5f, -0.5f, -0.5f}));
  EXPECT_EQ(version, 1);
}

TEST_F(DenseWireTest, MalformedPullRequestIsRefused) {
  grpc::internal::RpcMethod method("/tessera.ParameterServer/PullDense",
                                   grpc::internal::RpcMethod::SERVER_STREAMING,
                                   channel_);
  grpc::ClientContext context;
  grpc::Slice garbage(std::string("\x0a\x7f", 2));  // a name cut short
  std::unique_ptr<grpc::ClientReader<grpc::ByteBuffer>> reader(
      grpc::internal::ClientReaderFactory<grpc::ByteBuffer>::Create(
          channel_.get(), method, &context, grpc::ByteBuffer(&garbage, 1)));
  grpc::ByteBuffer message;
  EXPECT_FALSE(reader->Read(&message));
  grpc::Status status = reader->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("PullRequest"));
}

// PsClient with chunks of 1 MiB and of 4 MiB minus 4 bytes: each arrives
// in many receive slices whose borders (after HTTP/2 frame headers) split
// floats; values and NaN positions must come out exact.
TEST_F(DenseWireTest, LargeChunksArriveExactly) {
  constexpr int64_t kElements = (5 << 20) / 4 + 3;  // 5 MiB + 12 bytes
  const ShardDef shard =
      MakeShardDef("large", 0, {kElements}, 0, kElements, ConstantInit(1.0f));
  CreateShards({shard}, 1.0f);
  std::vector<float> grad(kElements);
  for (int64_t i = 0; i < kElements; ++i) grad[i] = (i % 1000) * 0.001f;
  int pushes = 0;
  for (int64_t chunk_bytes : {int64_t{1} << 20, (int64_t{4} << 20) - 4}) {
    SCOPED_TRACE(chunk_bytes);
    PsClientOptions options;
    options.chunk_bytes = chunk_bytes;
    PsClient client(server_.address(), 0, channel_, options);
    std::vector<absl::Span<const float>> grads = {absl::MakeConstSpan(grad)};
    // NaN and infinity at the start, the end and in between of chunks.
    for (int64_t bad_at : {int64_t{0}, chunk_bytes / 4 - 1, chunk_bytes / 4,
                           int64_t{777777}, kElements - 1}) {
      std::vector<float> poisoned = grad;
      poisoned[bad_at] = bad_at % 2 == 0
                             ? std::numeric_limits<float>::quiet_NaN()
                             : std::numeric_limits<float>::infinity();
      PushResponse response;
      absl::Status status = client.PushDense(
          {shard.name()}, {absl::MakeConstSpan(poisoned)}, {}, &response);
      EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
      EXPECT_THAT(status.message(),
                  HasSubstr(absl::StrCat("element ", bad_at, " is")));
    }
    PushResponse response;
    absl::Status status =
        client.PushDense({shard.name()}, grads, {}, &response);
    ASSERT_TRUE(status.ok()) << status;
    ++pushes;
    ASSERT_EQ(response.applied_size(), 1);
    EXPECT_EQ(response.applied(0).version(), pushes);
  }
  int64_t version = 0;
  std::vector<float> values = PullOne(shard, &version);
  EXPECT_EQ(version, 2);
  std::vector<float> expected(kElements);
  for (int64_t i = 0; i < kElements; ++i) {
    expected[i] = (1.0f - grad[i]) - grad[i];
  }
  EXPECT_THAT(values, ElementsAreArray(expected));
}

// A chunk size that is not a whole number of floats is rounded down to one.
TEST_F(DenseWireTest, OddChunkSizeStillSendsWholeFloats) {
  CreateShards({big_}, 1.0f);
  PsClientOptions options;
  options.chunk_bytes = 4099;
  PsClient client(server_.address(), 0, channel_, options);
  std::vector<float> grad(10000, 0.25f);
  PushResponse response;
  absl::Status status = client.PushDense(
      {big_.name()}, {absl::MakeConstSpan(grad)}, {}, &response);
  ASSERT_TRUE(status.ok()) << status;
  std::vector<float> expected = InitialValues(big_);
  for (float& v : expected) v -= 0.25f;
  EXPECT_THAT(PullOne(big_), ElementsAreArray(expected));
}

// The copy and check of one chunk's data as the server does it, with the
// data in pieces split inside floats.
TEST(CopyChunkAndCheckFiniteTest, FloatsSplitBetweenPieces) {
  std::vector<float> src(100);
  for (int i = 0; i < 100; ++i) src[i] = i * 0.5f;
  const char* bytes = reinterpret_cast<const char*>(src.data());
  for (int bad : {-1, 0, 1, 50, 99}) {
    SCOPED_TRACE(bad);
    std::vector<float> data = src;
    if (bad >= 0) data[bad] = std::numeric_limits<float>::quiet_NaN();
    bytes = reinterpret_cast<const char*>(data.data());
    // Pieces of 1, 2, 3, ... bytes: most borders fall inside a float.
    TensorChunkView chunk;
    size_t at = 0;
    for (size_t len = 1; at < 400; ++len) {
      const size_t n = std::min<size_t>(len, 400 - at);
      chunk.data.emplace_back(bytes + at, n);
      at += n;
    }
    chunk.data_bytes = 400;
    std::vector<float> dst(100, -1.0f);
    absl::Status status =
        internal::CopyChunkAndCheckFinite(chunk, dst.data(), "s/part_0", 1000);
    if (bad < 0) {
      ASSERT_TRUE(status.ok()) << status;
      EXPECT_THAT(dst, ElementsAreArray(src));
    } else {
      EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
      EXPECT_THAT(status.message(),
                  HasSubstr(absl::StrCat("element ", 1000 + bad, " is nan")));
      EXPECT_THAT(status.message(), HasSubstr("s/part_0"));
    }
  }
}

}  // namespace
}  // namespace tessera
