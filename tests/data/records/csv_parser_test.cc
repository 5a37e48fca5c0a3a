#include "data/records/csv_parser.h"

#include <string>
#include <vector>

#include "data/records/feature_hash.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/data/stream/stream_test_files.h"

namespace tessera {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// x is three columns here: a, b, c.
ExampleSchema CsvSchema() {
  ExampleSchema schema = stream_test::TestSchema();
  schema.dense[0].features = {"a", "b", "c"};
  return schema;
}

class CsvParserTest : public ::testing::Test {
 protected:
  std::unique_ptr<CsvParser> Make(const std::vector<std::string>& columns,
                                  CsvOptions options = CsvOptions()) {
    auto parser = CsvParser::Create(schema_, options, columns);
    EXPECT_TRUE(parser.ok()) << parser.status();
    return parser.ok() ? *std::move(parser) : nullptr;
  }
  const ExampleSchema schema_ = CsvSchema();
  ParsedExample parsed_;
};

TEST_F(CsvParserTest, ParsesColumnsByName) {
  auto parser = Make({"y", "c", "cat", "b", "a", "extra"});
  ASSERT_TRUE(parser->Parse("1,3.5,red|blue,2,-1e2,zzz\r", &parsed_).ok());
  EXPECT_THAT(parsed_.dense, ElementsAre(-100.0f, 2.0f, 3.5f));
  EXPECT_THAT(parsed_.ids,
              ElementsAre(HashFeatureBytes("red"), HashFeatureBytes("blue")));
  EXPECT_EQ(parsed_.label, 1.0f);
}

TEST_F(CsvParserTest, QuotesTypesAndTabs) {
  CsvOptions options;
  options.delimiter = '\t';
  options.types["cat"] = "hex";
  auto parser = Make({"y", "a", "b", "c", "cat"}, options);
  ASSERT_TRUE(parser->Parse("0\t1\t\"2\"\t3\tff|A0", &parsed_).ok());
  EXPECT_THAT(parsed_.ids, ElementsAre(255, 160));
  EXPECT_THAT(parsed_.dense, ElementsAre(1.0f, 2.0f, 3.0f));
  ASSERT_TRUE(parser->Parse("0\t1\t2\t3\t", &parsed_).ok());
  EXPECT_TRUE(parsed_.ids.empty());

  options.types["cat"] = "string";
  auto strings = Make({"y", "a", "b", "c", "cat"}, options);
  ASSERT_TRUE(strings->Parse("0\t1\t2\t3\t\"say \"\"hi\"\"\"", &parsed_).ok());
  EXPECT_THAT(parsed_.ids, ElementsAre(HashFeatureBytes("say \"hi\"")));
}

TEST_F(CsvParserTest, RefusesIdsOutsideABoundedVocabulary) {
  ExampleSchema bounded = CsvSchema();
  bounded.sparse[0].id_bound = 8;
  CsvOptions options;
  options.types["cat"] = "int";
  auto parser =
      CsvParser::Create(bounded, options, {"y", "a", "b", "c", "cat"});
  ASSERT_TRUE(parser.ok()) << parser.status();
  ASSERT_TRUE((*parser)->Parse("1,1,2,3,0|7", &parsed_).ok());
  EXPECT_THAT(parsed_.ids, ElementsAre(0, 7));
  absl::Status s = (*parser)->Parse("1,1,2,3,3|8", &parsed_);
  EXPECT_TRUE(absl::IsInvalidArgument(s));
  EXPECT_THAT(s.message(),
              HasSubstr("id 8 of sparse input \"cat\" is outside [0, 8)"));
}

TEST_F(CsvParserTest, BadRows) {
  auto parser = Make({"y", "a", "b", "c", "cat"});
  absl::Status s = parser->Parse("1,2,3", &parsed_);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("expected 5 columns, got 3"));
  EXPECT_THAT(parser->Parse("1,2,3,4,5,6", &parsed_).message(),
              HasSubstr("got more"));
  s = parser->Parse("1,2,x3,4,5", &parsed_);
  EXPECT_THAT(s.message(), HasSubstr("column 3 (\"b\"): not a finite number"));
  EXPECT_THAT(s.message(), HasSubstr("\"x3\""));
  EXPECT_THAT(parser->Parse("1,,3,4,5", &parsed_).message(),
              HasSubstr("empty value"));
  EXPECT_THAT(parser->Parse("2,1,3,4,5", &parsed_).message(),
              HasSubstr("not 0 or 1"));
  EXPECT_THAT(parser->Parse("1,1,3,4,a|b|c", &parsed_).message(),
              HasSubstr("at most 2"));
  EXPECT_THAT(parser->Parse("1,\"2,3,4,5", &parsed_).message(),
              HasSubstr("unterminated quote"));
  EXPECT_TRUE(parser->Parse("1,2,3,4,5", &parsed_).ok());
}

TEST_F(CsvParserTest, CreateErrors) {
  EXPECT_THAT(CsvParser::Create(schema_, CsvOptions(), {"y", "a", "b"})
                  .status()
                  .message(),
              HasSubstr("no column \"c\""));
  EXPECT_THAT(CsvParser::Create(schema_, CsvOptions(), {"y", "a", "a"})
                  .status()
                  .message(),
              HasSubstr("repeats"));
  CsvOptions options;
  options.types["a"] = "string";
  EXPECT_THAT(CsvParser::Create(schema_, options, {"y", "a", "b", "c", "cat"})
                  .status()
                  .message(),
              HasSubstr("cannot be of type string"));
  options.types["a"] = "double";
  EXPECT_THAT(CsvParser::Create(schema_, options, {"y", "a", "b", "c", "cat"})
                  .status()
                  .message(),
              HasSubstr("float, int, hex, string"));
}

TEST(CsvSplitHeaderTest, Splits) {
  EXPECT_THAT(*CsvParser::SplitHeader("a,\"b,c\",d\r", ','),
              ElementsAre("a", "b,c", "d"));
}

}  // namespace
}  // namespace tessera
