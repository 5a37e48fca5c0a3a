#include "common/io/safetensors.h"

#include <cstdint>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessera {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// A file as the format's own writer lays it out: length, JSON, data.
std::string File(const std::string& json, const std::string& data) {
  std::string out;
  uint64_t n = json.size();
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>(n >> (8 * i)));
  return out + json + data;
}

std::string Floats(const std::vector<float>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * 4);
}

TEST(SafetensorsTest, RoundTripsTensorsAndMetadata) {
  Safetensors file;
  file.tensors.push_back(FloatTensor("fc1.weight", {2, 3}, {1, 2, 3, 4, 5, 6}));
  file.tensors.push_back(Int64Tensor("bn.num_batches_tracked", {}, {7}));
  file.metadata["format"] = "pt";
  absl::StatusOr<std::string> bytes = SerializeSafetensors(file);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  // The header is padded to 8 bytes, so the data starts aligned.
  EXPECT_EQ((bytes->size() - 8 - 32) % 8, 0u);
  absl::StatusOr<Safetensors> back = ParseSafetensors(*bytes, "f");
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->tensors.size(), 2u);
  const SafetensorsTensor* w = back->Find("fc1.weight");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->dtype, "F32");
  EXPECT_THAT(w->shape, ElementsAre(2, 3));
  EXPECT_THAT(*SafetensorsFloats(*w), ElementsAre(1, 2, 3, 4, 5, 6));
  const SafetensorsTensor* n = back->Find("bn.num_batches_tracked");
  ASSERT_NE(n, nullptr);
  EXPECT_TRUE(n->shape.empty());
  EXPECT_EQ(n->data.size(), 8u);
  EXPECT_EQ(back->metadata.at("format"), "pt");
}

TEST(SafetensorsTest, ReadsAFileOfTheFormatsWriter) {
  // Bytes as safetensors.torch.save_file writes {"b": [3.], "a": [[1, 2]]}
  // (F64 for a): tensors in any header order, data sorted by offset.
  const std::string json =
      R"({"a":{"dtype":"F64","shape":[1,2],"data_offsets":[0,16]},)"
      R"("b":{"dtype":"F32","shape":[1],"data_offsets":[16,20]}})";
  std::vector<double> a = {1, 2};
  std::string data(reinterpret_cast<const char*>(a.data()), 16);
  data += Floats({3});
  absl::StatusOr<Safetensors> file = ParseSafetensors(File(json, data), "f");
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_THAT(*SafetensorsFloats(*file->Find("a")), ElementsAre(1, 2));
  EXPECT_THAT(*SafetensorsFloats(*file->Find("b")), ElementsAre(3));
}

TEST(SafetensorsTest, ConvertsHalfAndBfloat16) {
  SafetensorsTensor h{
      "h", "F16", {3}, std::string("\x00\x3c\x00\xc0\x01\x00", 6)};
  EXPECT_THAT(*SafetensorsFloats(h), ElementsAre(1.0f, -2.0f, 5.9604645e-8f));
  SafetensorsTensor b{"b", "BF16", {1}, std::string("\x80\x3f", 2)};
  EXPECT_THAT(*SafetensorsFloats(b), ElementsAre(1.0f));
  SafetensorsTensor i = Int64Tensor("ids", {1}, {1});
  absl::StatusOr<std::vector<float>> refused = SafetensorsFloats(i);
  EXPECT_THAT(refused.status().message(), HasSubstr("\"ids\" is I64"));
}

TEST(SafetensorsTest, TruncatedFilesSayHowManyBytesAreMissing) {
  Safetensors file;
  file.tensors.push_back(FloatTensor("w", {4}, {1, 2, 3, 4}));
  std::string bytes = *SerializeSafetensors(file);
  // Cut inside the data: the tensor's range lies outside it.
  absl::StatusOr<Safetensors> cut =
      ParseSafetensors(bytes.substr(0, bytes.size() - 3), "model.st");
  ASSERT_FALSE(cut.ok());
  EXPECT_EQ(cut.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(cut.status().message(),
              HasSubstr("model.st: tensor \"w\": data_offsets [0, 16] lie "
                        "outside the 13 bytes of data (truncated file?)"));
  // Cut inside the header.
  cut = ParseSafetensors(bytes.substr(0, 20), "model.st");
  EXPECT_THAT(cut.status().message(), HasSubstr("truncated"));
  // Shorter than the length itself.
  cut = ParseSafetensors("abc", "model.st");
  EXPECT_THAT(cut.status().message(), HasSubstr("not a safetensors file"));
}

TEST(SafetensorsTest, MalformedHeadersNameWhatIsWrong) {
  struct Case {
    std::string json, data, error;
  };
  const std::vector<Case> cases = {
      {"[1, 2]", "", "the header is not a JSON object"},
      {"{not json", "", "the header is not a JSON object"},
      {R"({"w":{"dtype":"F32","shape":[2]}})", Floats({1, 2}),
       "tensor \"w\" lacks dtype, shape or data_offsets"},
      {R"({"w":{"dtype":"Q4","shape":[2],"data_offsets":[0,8]}})",
       Floats({1, 2}), "tensor \"w\": unknown dtype \"Q4\""},
      {R"({"w":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})",
       Floats({1, 2}), "is not of sizes >= 0"},
      {R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})",
       Floats({1, 2}),
       "tensor \"w\": 8 bytes for shape [3] of F32, which "
       "needs 12"},
      {R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
       Floats({1, 2}), "tensor \"w\" starts at byte 4 of the data, not at 0"},
      {R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})",
       Floats({1, 2}), "the tensors cover 4 of the 8 bytes of data"},
      {R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
       R"("b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
       Floats({1, 2}), "a gap or an overlap"},
      {R"({"__metadata__":{"k":1}})", "", "__metadata__ \"k\" is not a string"},
      {R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0]}})", Floats({1}),
       "data_offsets [0] is not [begin, end]"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<Safetensors> file =
        ParseSafetensors(File(c.json, c.data), "x.safetensors");
    ASSERT_FALSE(file.ok()) << c.json;
    EXPECT_EQ(file.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(file.status().message(), HasSubstr("x.safetensors: "));
    EXPECT_THAT(file.status().message(), HasSubstr(c.error)) << c.json;
  }
}

TEST(SafetensorsTest, WriterRefusesWhatTheFormatCannotHold) {
  Safetensors file;
  file.tensors.push_back(FloatTensor("w", {3}, {1, 2}));
  EXPECT_THAT(SerializeSafetensors(file).status().message(),
              HasSubstr("tensor \"w\" of dtype F32 and shape [3] has 8 bytes"));
  file.tensors = {FloatTensor("w", {1}, {1}), FloatTensor("w", {1}, {2})};
  EXPECT_THAT(SerializeSafetensors(file).status().message(),
              HasSubstr("\"w\" is empty or repeated"));
}

TEST(SafetensorsTest, MissingFileNamesThePath) {
  absl::StatusOr<Safetensors> file =
      ReadSafetensorsFile("/nonexistent/w.safetensors");
  ASSERT_FALSE(file.ok());
  EXPECT_THAT(file.status().message(), HasSubstr("/nonexistent/w.safetensors"));
}

}  // namespace
}  // namespace tessera
