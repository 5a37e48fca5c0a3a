// Rows on the wire in the table's precision (#43 item 3), on both
// transports: an fp16/bf16 table's pull reply carries 2 bytes per value,
// the stored bits; a worker widens them exactly; gradients sent in fp16 or
// bf16 are rounded to nearest even on the worker (fp16 saturating) and
// widened by the server; a precision a table cannot serve is refused.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "common/data_plane/frame.h"
#include "common/data_plane/handshake.h"
#include "common/data_plane/socket.h"
#include "common/optimizer/row_precision.h"
#include "ps_server/wire/dense_wire.h"
#include "ps_server/wire/row_wire.h"
#include "tests/ps_server/ps_test_util.h"

namespace tessera {
namespace {

using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

constexpr int64_t kDim = 6;
constexpr int64_t kRows = 50;

ShardDef FixedDef(RowPrecision precision, const Initializer& init) {
  ShardDef def =
      ps_test::MakeShardDef("fixed", 0, {kRows, kDim}, 0, kRows, init);
  def.set_precision(precision);
  return def;
}

ShardDef HashDef(RowPrecision precision) {
  ShardDef def;
  def.set_name("grow/part_0");
  def.set_variable("grow");
  def.set_dtype(DT_FLOAT);
  def.set_hash_table(true);
  def.set_dim(kDim);
  def.set_expected_rows(100);
  def.set_precision(precision);
  Initializer* init = def.mutable_initializer();
  init->set_kind(Initializer::UNIFORM);
  init->set_minval(-0.5f);
  init->set_maxval(0.5f);
  init->set_seed(7);
  return def;
}

std::vector<uint16_t> Bits(const std::string& bytes) {
  std::vector<uint16_t> out(bytes.size() / 2);
  std::memcpy(out.data(), bytes.data(), out.size() * 2);
  return out;
}

struct Case {
  RowPrecision precision;
  bool hash;
};

std::string CaseName(const ::testing::TestParamInfo<Case>& info) {
  return RowPrecisionName(info.param.precision) +
         (info.param.hash ? "_hash" : "_fixed");
}

class NarrowPullTest : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    ASSERT_TRUE(server_.started());
    admin_ = server_.NewClient();
    def_ = GetParam().hash ? HashDef(GetParam().precision)
                           : FixedDef(GetParam().precision,
                                      ps_test::GlorotInit(kRows, kDim, 3));
    CreateShardsRequest request;
    *request.add_shards() = def_;
    *request.mutable_optimizer() = ps_test::SgdConfig(0.37f);
    CreateShardsResponse response;
    ASSERT_TRUE(admin_->CreateShards(request, &response).ok());
    ids_ = {3, 17, 3, 42, 0, 9};  // a repeat too
    // A few stochastically rounded updates, so the rows are not their
    // initial values.
    const std::vector<float> grads(ids_.size() * kDim, 0.0123f);
    PushResponse pushed;
    for (int step = 0; step < 3; ++step) {
      ASSERT_TRUE(
          admin_->PushRows(def_.name(), ids_, kDim, grads, &pushed).ok());
    }
    absl::StatusOr<std::shared_ptr<RowTable>> table =
        server_.store().FindRows(def_.name());
    ASSERT_TRUE(table.ok());
    stored_.resize(ids_.size() * kDim);
    (*table)->ReadAs(ids_, GetParam().precision, stored_.data());
  }

  // The stored bits widened: what the worker must compute with.
  std::vector<float> Widened() const {
    std::vector<float> out(stored_.size());
    WidenRow(GetParam().precision, stored_.data(), out.data(),
             static_cast<int64_t>(out.size()));
    return out;
  }

  ps_test::TestPsServer server_;
  std::unique_ptr<PsClient> admin_;
  ShardDef def_;
  std::vector<int64_t> ids_;
  std::vector<uint16_t> stored_;
};

TEST_P(NarrowPullTest, GrpcReplyCarriesTheStoredTwoByteValues) {
  std::unique_ptr<ParameterServer::Stub> stub = server_.NewStub();
  PullRowsRequest request;
  request.set_shard(def_.name());
  request.set_ids(ids_.data(), ids_.size() * sizeof(int64_t));
  request.set_precision(GetParam().precision);
  grpc::ClientContext context;
  std::unique_ptr<grpc::ClientReader<RowsChunk>> reader =
      stub->PullRows(&context, request);
  RowsChunk chunk;
  std::string values;
  while (reader->Read(&chunk)) {
    EXPECT_EQ(chunk.precision(), GetParam().precision);
    values += chunk.values();
  }
  ASSERT_TRUE(reader->Finish().ok());
  EXPECT_EQ(values.size(), ids_.size() * kDim * 2);
  EXPECT_THAT(Bits(values), ElementsAreArray(stored_));
}

TEST_P(NarrowPullTest, PlaneReplyCarriesTheStoredTwoByteValues) {
  absl::StatusOr<Socket> socket =
      Socket::Connect("127.0.0.1", server_.data_plane_port(), 5);
  ASSERT_TRUE(socket.ok());
  ASSERT_TRUE(OfferDataPlaneHandshake(*socket, "").ok());
  std::string table;
  AppendString16(def_.name(), &table);
  AppendInt64(kDim, &table);
  AppendInt64(static_cast<int64_t>(ids_.size()), &table);
  AppendInt64(GetParam().precision, &table);
  FrameHeader header;
  header.op = FrameOp::kPullRows;
  header.flags = kFrameRowPrecisions;
  header.count = 1;
  header.bytes = static_cast<int64_t>(table.size());
  char head[kFrameHeaderBytes];
  EncodeFrameHeader(header, head);
  const iovec parts[3] = {{head, sizeof(head)},
                          {table.data(), table.size()},
                          {ids_.data(), ids_.size() * sizeof(int64_t)}};
  ASSERT_TRUE(socket->WriteAll(parts).ok());
  FrameHeader reply;
  ASSERT_TRUE(ReadReplyHeader(*socket, FrameOp::kPullRowsReply, &reply).ok());
  const int64_t value_bytes = static_cast<int64_t>(ids_.size()) * kDim * 2;
  EXPECT_EQ(reply.bytes, kDensePartHeaderBytes + value_bytes);
  char part[kDensePartHeaderBytes];
  ASSERT_TRUE(socket->ReadFull(part, sizeof(part)).ok());
  int64_t version, bytes;
  DecodeDensePartHeader(part, &version, &bytes);
  EXPECT_EQ(version, 3);
  ASSERT_EQ(bytes, value_bytes);
  std::string values(bytes, '\0');
  ASSERT_TRUE(socket->ReadFull(values.data(), values.size()).ok());
  EXPECT_THAT(Bits(values), ElementsAreArray(stored_));
}

TEST_P(NarrowPullTest, WorkersWidenExactlyOnBothTransports) {
  for (DataPlaneKind plane : {DataPlaneKind::kGrpc, DataPlaneKind::kTcp}) {
    std::unique_ptr<PsClient> client = server_.NewClient(plane);
    std::vector<float> narrow(ids_.size() * kDim), wide(narrow.size());
    const RowsPart narrow_part{def_.name(), kDim, ids_, GetParam().precision};
    const RowsPart wide_part{def_.name(), kDim, ids_, ROW_FP32};
    const absl::Span<float> narrow_out[1] = {absl::MakeSpan(narrow)};
    const absl::Span<float> wide_out[1] = {absl::MakeSpan(wide)};
    ASSERT_TRUE(client->PullRows({&narrow_part, 1}, narrow_out).ok());
    ASSERT_TRUE(client->PullRows({&wide_part, 1}, wide_out).ok());
    EXPECT_THAT(narrow, ElementsAreArray(Widened())) << DataPlaneName(plane);
    EXPECT_THAT(wide, ElementsAreArray(Widened())) << DataPlaneName(plane);
  }
}

INSTANTIATE_TEST_SUITE_P(Precisions, NarrowPullTest,
                         ::testing::Values(Case{ROW_FP16, false},
                                           Case{ROW_FP16, true},
                                           Case{ROW_BF16, false},
                                           Case{ROW_BF16, true}),
                         CaseName);

class RowGradientTest : public ::testing::TestWithParam<DataPlaneKind> {
 protected:
  void SetUp() override {
    ASSERT_TRUE(server_.started());
    client_ = server_.NewClient(GetParam());
  }

  // A fresh fp32 table of zeros trained by SGD at rate 1: a row's value
  // after one push is minus the gradient the server received.
  void MakeTable(const std::string& variable) {
    ShardDef def = FixedDef(ROW_FP32, ps_test::ZerosInit());
    def.set_variable(variable);
    def.set_name(variable + "/part_0");
    CreateShardsRequest request;
    *request.add_shards() = def;
    *request.mutable_optimizer() = ps_test::SgdConfig(1.0f);
    CreateShardsResponse response;
    ASSERT_TRUE(client_->CreateShards(request, &response).ok());
  }

  ps_test::TestPsServer server_;
  std::unique_ptr<PsClient> client_;
};

TEST_P(RowGradientTest, NarrowGradientsAreRoundedToNearest) {
  // Values between two fp16 (and bf16) neighbours, beyond fp16's range,
  // below its smallest subnormal, and exact ones.
  const std::vector<float> row = {1.0f / 3, -0.1f, 70000.0f,
                                  -1e30f,   1e-9f, 0.5f};
  const std::vector<int64_t> ids = {4, 11};
  std::vector<float> grads = row;
  for (float x : row) grads.push_back(-2.0f * x);
  for (RowPrecision precision : {ROW_FP16, ROW_BF16}) {
    const std::string variable = "g_" + RowPrecisionName(precision);
    MakeTable(variable);
    const std::string shard = variable + "/part_0";
    const RowsPart part{shard, kDim, ids, precision};
    const absl::Span<const float> in[1] = {grads};
    PushResponse response;
    ASSERT_TRUE(client_->PushRows({&part, 1}, in, &response).ok());

    std::vector<uint16_t> rounded(grads.size());
    NarrowRowNearest(precision, grads.data(), rounded.data(),
                     static_cast<int64_t>(grads.size()));
    std::vector<float> expected(grads.size());
    WidenRow(precision, rounded.data(), expected.data(),
             static_cast<int64_t>(expected.size()));
    for (float& x : expected) x = -x;
    std::vector<float> got(grads.size());
    ASSERT_TRUE(client_->PullRows(shard, ids, kDim, absl::MakeSpan(got)).ok());
    EXPECT_THAT(got, ElementsAreArray(expected)) << RowPrecisionName(precision);
    if (precision == ROW_FP16) {
      EXPECT_EQ(got[0], -0.333251953125f);  // 1/3 to nearest: 0x3555
      EXPECT_EQ(got[2], -65504.0f);         // saturated, not infinite
      EXPECT_EQ(got[3], 65504.0f);
      EXPECT_EQ(got[4], 0.0f);  // below fp16's subnormals
    } else {
      EXPECT_EQ(got[0], -0.333984375f);  // 1/3 to nearest bf16: 0x3EAB
      EXPECT_EQ(got[2], -70144.0f);
    }
    EXPECT_EQ(got[5], -0.5f);
  }
}

TEST_P(RowGradientTest, NonFiniteNarrowGradientIsRefused) {
  MakeTable("nan");
  const std::vector<int64_t> ids = {1};
  std::vector<float> grads(kDim, 0.25f);
  grads[2] = std::numeric_limits<float>::infinity();
  for (RowPrecision precision : {ROW_FP16, ROW_BF16}) {
    const RowsPart part{"nan/part_0", kDim, ids, precision};
    const absl::Span<const float> in[1] = {grads};
    PushResponse response;
    absl::Status s = client_->PushRows({&part, 1}, in, &response);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument)
        << RowPrecisionName(precision) << ": " << s;
    EXPECT_THAT(s.message(), HasSubstr("non-finite gradient"));
  }
  std::vector<float> got(kDim);
  ASSERT_TRUE(
      client_->PullRows("nan/part_0", ids, kDim, absl::MakeSpan(got)).ok());
  EXPECT_THAT(got, ElementsAreArray(std::vector<float>(kDim, 0.0f)));
}

TEST_P(RowGradientTest, PullInAPrecisionTheTableDoesNotStoreIsRefused) {
  MakeTable("wide");
  const std::vector<int64_t> ids = {1, 2};
  std::vector<float> out(ids.size() * kDim);
  const RowsPart part{"wide/part_0", kDim, ids, ROW_BF16};
  const absl::Span<float> dst[1] = {absl::MakeSpan(out)};
  absl::Status s = client_->PullRows({&part, 1}, dst);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(s.message(), HasSubstr("stores its rows in fp32"));
}

INSTANTIATE_TEST_SUITE_P(Transports, RowGradientTest,
                         ::testing::Values(DataPlaneKind::kGrpc,
                                           DataPlaneKind::kTcp),
                         [](const auto& info) {
                           return std::string(DataPlaneName(info.param));
                         });

}  // namespace
}  // namespace tessera
