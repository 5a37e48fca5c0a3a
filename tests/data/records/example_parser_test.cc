#include "data/records/example_parser.h"

#include <string>

#include "data/records/feature_hash.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/data/stream/stream_test_files.h"

namespace tessera {
namespace {

using stream_test::TestExample;
using stream_test::TestSchema;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

class ExampleParserTest : public ::testing::Test {
 protected:
  absl::Status Parse(const tf::Example& example) {
    return parser_.Parse(example.SerializeAsString(), &parsed_);
  }
  absl::Status Parse(const std::string& bytes) {
    return parser_.Parse(bytes, &parsed_);
  }
  google::protobuf::Map<std::string, tf::Feature>& Features(tf::Example* e) {
    return *e->mutable_features()->mutable_feature();
  }

  const ExampleSchema schema_ = TestSchema();
  ExampleParser parser_{schema_};
  ParsedExample parsed_;
};

TEST_F(ExampleParserTest, ReadsTheSchemasFeatures) {
  tf::Example e = TestExample(41);
  Features(&e)["unused"].mutable_bytes_list()->add_value("ignored");
  ASSERT_TRUE(Parse(e).ok());
  EXPECT_THAT(parsed_.dense, ElementsAre(41.0f, 41.5f, -41.0f));
  EXPECT_THAT(parsed_.ids, ElementsAre(41, 7));
  EXPECT_THAT(parsed_.id_ends, ElementsAre(2u));
  EXPECT_EQ(parsed_.label, 1.0f);
}

TEST_F(ExampleParserTest, IntsForDenseBytesHashedForSparseFloatLabel) {
  tf::Example e = TestExample(0);
  auto* x = Features(&e)["x"].mutable_int64_list();
  x->add_value(-3);
  x->add_value(4);
  x->add_value(1 << 20);
  auto* cat = Features(&e)["cat"].mutable_bytes_list();
  cat->add_value("red");
  Features(&e)["y"].mutable_float_list()->add_value(1.0f);
  ASSERT_TRUE(Parse(e).ok());
  EXPECT_THAT(parsed_.dense, ElementsAre(-3.0f, 4.0f, 1048576.0f));
  EXPECT_THAT(parsed_.ids, ElementsAre(HashFeatureBytes("red")));
  EXPECT_EQ(parsed_.label, 1.0f);
}

// An input of ids_in_vocab (a Keras Embedding's) refuses an id outside
// [0, vocab_size) instead of wrapping it, as Keras has no row for it.
TEST_F(ExampleParserTest, RefusesIdsOutsideABoundedVocabulary) {
  ExampleSchema bounded = TestSchema();
  bounded.sparse[0].id_bound = 8;
  ExampleParser parser(bounded);
  ParsedExample parsed;
  ASSERT_TRUE(parser.Parse(TestExample(5).SerializeAsString(), &parsed).ok());
  EXPECT_THAT(parsed.ids, ElementsAre(5, 7));
  for (int64_t id : {8, 100, -1}) {
    absl::Status s = parser.Parse(TestExample(id).SerializeAsString(), &parsed);
    EXPECT_TRUE(absl::IsInvalidArgument(s)) << id;
    EXPECT_THAT(s.message(),
                HasSubstr(absl::StrCat("id ", id,
                                       " of sparse input \"cat\" is "
                                       "outside [0, 8)")));
  }
  // Unbounded (the default), the same ids are taken, to be wrapped.
  EXPECT_TRUE(Parse(TestExample(100)).ok());
}

TEST_F(ExampleParserTest, EmptySparseListIsAnEmptyBag) {
  tf::Example e = TestExample(2);
  Features(&e)["cat"].mutable_int64_list()->clear_value();
  ASSERT_TRUE(Parse(e).ok());
  EXPECT_TRUE(parsed_.ids.empty());
  EXPECT_THAT(parsed_.id_ends, ElementsAre(0u));
}

// Writers other than protobuf's may send repeated numbers unpacked.
TEST_F(ExampleParserTest, AcceptsUnpackedLists) {
  auto entry = [](const std::string& key, const std::string& feature) {
    std::string e = "\x0a" + std::string(1, static_cast<char>(key.size())) +
                    key + "\x12" +
                    std::string(1, static_cast<char>(feature.size())) + feature;
    return "\x0a" + std::string(1, static_cast<char>(e.size())) + e;
  };
  // FloatList with three unpacked floats 1.0 (0x3f800000).
  std::string floats;
  for (int i = 0; i < 3; ++i) floats += std::string("\x0d\x00\x00\x80\x3f", 5);
  const std::string x =
      "\x12" + std::string(1, static_cast<char>(floats.size())) + floats;
  const std::string cat = std::string("\x1a\x04\x08\x05\x08\x06", 6);
  const std::string y = std::string("\x1a\x02\x08\x01", 4);
  const std::string features =
      entry("x", x) + entry("cat", cat) + entry("y", y);
  const std::string example =
      "\x0a" + std::string(1, static_cast<char>(features.size())) + features;
  ASSERT_TRUE(Parse(example).ok()) << Parse(example);
  EXPECT_THAT(parsed_.dense, ElementsAre(1.0f, 1.0f, 1.0f));
  EXPECT_THAT(parsed_.ids, ElementsAre(5, 6));
}

TEST_F(ExampleParserTest, BadDataErrors) {
  EXPECT_THAT(Parse(std::string("\x0a\x50garbage")).message(),
              HasSubstr("not a tf.train.Example"));
  EXPECT_THAT(Parse(std::string("label,x\n")).message(),
              HasSubstr("not a tf.train.Example"));

  tf::Example missing = TestExample(1);
  Features(&missing).erase("x");
  EXPECT_THAT(Parse(missing).message(), HasSubstr("missing feature \"x\""));

  tf::Example no_label = TestExample(1);
  Features(&no_label).erase("y");
  EXPECT_THAT(Parse(no_label).message(), HasSubstr("missing label feature"));

  tf::Example wrong_type = TestExample(1);
  Features(&wrong_type)["cat"].mutable_float_list()->add_value(1);
  EXPECT_THAT(Parse(wrong_type).message(), HasSubstr("is a float_list"));

  tf::Example short_x = TestExample(1);
  Features(&short_x)["x"].mutable_float_list()->mutable_value()->RemoveLast();
  const absl::Status s = Parse(short_x);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("wrong shape"));
  EXPECT_THAT(s.message(), HasSubstr("needs 3 values"));

  tf::Example hot = TestExample(1);
  Features(&hot)["cat"].mutable_int64_list()->add_value(9);
  EXPECT_THAT(Parse(hot).message(), HasSubstr("at most 2"));

  tf::Example label = TestExample(1);
  Features(&label)["y"].mutable_int64_list()->set_value(0, 2);
  EXPECT_THAT(Parse(label).message(), HasSubstr("not 0 or 1"));

  tf::Example two_labels = TestExample(1);
  Features(&two_labels)["y"].mutable_int64_list()->add_value(0);
  EXPECT_THAT(Parse(two_labels).message(), HasSubstr("holds 2 values"));

  // The parser recovers: the next good record parses.
  EXPECT_TRUE(Parse(TestExample(3)).ok());
}

TEST(FeatureHashTest, IsFixed) {
  // These values are part of every model trained on hashed strings.
  EXPECT_EQ(HashFeatureBytes(""), HashFeatureBytes(std::string()));
  EXPECT_NE(HashFeatureBytes("a"), HashFeatureBytes("b"));
  EXPECT_EQ(HashFeatureBytes("red"), HashFeatureBytes("red"));
}

}  // namespace
}  // namespace tessera
