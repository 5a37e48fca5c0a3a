#include "common/cluster/cluster_spec.h"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "common/io/bounded_file_read.h"
#include "nlohmann/json.hpp"

namespace tessera {
namespace {

using nlohmann::json;

constexpr absl::string_view kChief = "chief";
constexpr absl::string_view kEvaluator = "evaluator";
constexpr absl::string_view kJobList = "chief, worker, ps, evaluator";
constexpr absl::string_view kDefaultRpcLayer = "grpc";
// TF_CONFIG is a few hundred bytes; the cap stops a mistaken path such as
// /dev/zero from being read forever.
constexpr size_t kMaxFileBytes = 16 << 20;

bool IsKnownJob(absl::string_view job) {
  return job == "chief" || job == "worker" || job == "ps" || job == "evaluator";
}

std::string Quote(absl::string_view s) {
  return absl::StrCat("\"", absl::CHexEscape(s), "\"");
}

// Whether arrays and objects nest at most `max_depth` deep in `value` (a
// scalar nests 0 deep, [1] 1, [[1]] 2). Iterative: the input may nest as deep
// as its length allows.
bool NestsAtMost(const json& value, int max_depth) {
  std::vector<std::pair<const json*, int>> stack = {{&value, 0}};
  while (!stack.empty()) {
    const auto [node, depth] = stack.back();
    stack.pop_back();
    if (!node->is_structured()) continue;
    if (depth >= max_depth) return false;
    for (const json& child : *node) stack.emplace_back(&child, depth + 1);
  }
  return true;
}

// Renders an offending JSON value for an error message, shortened so a
// misplaced blob does not swamp the log line. dump() recurses once per
// level, so a deeply nested value (60000 '[' overflowed the stack) is
// described by its type and size instead.
std::string Describe(const json& value) {
  constexpr size_t kMaxChars = 80;
  constexpr int kMaxDumpDepth = 16;
  if (!NestsAtMost(value, kMaxDumpDepth)) {
    return absl::StrCat(value.is_array() ? "an array of " : "an object with ",
                        value.size(),
                        value.is_array() ? " element(s)" : " key(s)",
                        " nested more than ", kMaxDumpDepth, " levels deep");
  }
  std::string text = value.dump(-1, ' ', false, json::error_handler_t::replace);
  if (text.size() > kMaxChars) {
    text = absl::StrCat(text.substr(0, kMaxChars), "...");
  }
  return text;
}

absl::Status Invalid(absl::string_view source, absl::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat(source, ": ", message));
}

// Collects the parser's own description of the first syntax error; the
// no-throw json::parse only reports that parsing failed, not where.
class ParseErrorCollector final : public nlohmann::json_sax<json> {
 public:
  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override { return true; }
  bool key(string_t&) override { return true; }
  bool end_object() override { return true; }
  bool start_array(std::size_t) override { return true; }
  bool end_array() override { return true; }
  bool parse_error(std::size_t position, const std::string&,
                   const json::exception& ex) override {
    absl::string_view what = ex.what();
    // Drop the "[json.exception.parse_error.101] " tag; users need the text.
    if (size_t tag_end = what.find("] ");
        !what.empty() && what[0] == '[' && tag_end != absl::string_view::npos) {
      what.remove_prefix(tag_end + 2);
    }
    message_ = absl::StrCat(what, " (byte ", position, ")");
    return false;
  }

  const std::string& message() const { return message_; }

 private:
  std::string message_ = "unknown parse error";
};

std::string DescribeParseError(absl::string_view text) {
  ParseErrorCollector collector;
  json::sax_parse(text.begin(), text.end(), &collector);
  return collector.message();
}

bool IsHostChar(char c) {
  return absl::ascii_isalnum(c) || c == '.' || c == '-' || c == '_';
}

// Includes '%' and letters for scoped addresses such as fe80::1%eth0.
bool IsIpv6Char(char c) {
  return absl::ascii_isalnum(c) || c == ':' || c == '.' || c == '%' ||
         c == '-' || c == '_';
}

// Returns why `address` is not host:port, or "" if it is.
std::string HostPortProblem(absl::string_view address) {
  if (address.empty()) return "it is empty";
  absl::string_view port;
  if (address.front() == '[') {
    size_t close = address.find(']');
    if (close == absl::string_view::npos) return "no closing ']'";
    absl::string_view host = address.substr(1, close - 1);
    if (host.find(':') == absl::string_view::npos ||
        !std::all_of(host.begin(), host.end(), IsIpv6Char)) {
      return "bad IPv6 address in [...]";
    }
    absl::string_view rest = address.substr(close + 1);
    if (rest.empty() || rest.front() != ':') return "no :port";
    port = rest.substr(1);
  } else {
    size_t colon = address.rfind(':');
    if (colon == absl::string_view::npos) return "no :port";
    absl::string_view host = address.substr(0, colon);
    if (host.find(':') != absl::string_view::npos) {
      return "write IPv6 addresses as [addr]:port";
    }
    if (host.empty()) return "empty host";
    if (!std::all_of(host.begin(), host.end(), IsHostChar)) {
      return "bad character in host";
    }
    port = address.substr(colon + 1);
  }
  if (port.empty() || !std::all_of(port.begin(), port.end(), [](char c) {
        return absl::ascii_isdigit(c);
      })) {
    return "port is not a number";
  }
  int value = 0;
  if (port.size() > 5 || !absl::SimpleAtoi(port, &value) || value < 1 ||
      value > 65535) {
    return absl::StrCat("port ", port, " is outside 1..65535");
  }
  return "";
}

absl::Status CheckJobName(absl::string_view source, absl::string_view job) {
  if (IsKnownJob(job)) return absl::OkStatus();
  return Invalid(source, absl::StrCat("cluster has unknown job ", Quote(job),
                                      "; expected one of ", kJobList));
}

absl::StatusOr<ClusterSpec::JobMap> ParseCluster(absl::string_view source,
                                                 const json& root) {
  auto it = root.find("cluster");
  if (it == root.end()) return Invalid(source, "cluster is missing");
  if (!it->is_object()) {
    return Invalid(source,
                   absl::StrCat("cluster is ", Describe(*it),
                                "; expected an object mapping job names to "
                                "arrays of \"host:port\""));
  }
  ClusterSpec::JobMap jobs;
  for (const auto& [job, addresses] : it->items()) {
    if (absl::Status s = CheckJobName(source, job); !s.ok()) return s;
    if (!addresses.is_array()) {
      return Invalid(source,
                     absl::StrCat("cluster.", job, " is ", Describe(addresses),
                                  "; expected an array of "
                                  "\"host:port\" strings"));
    }
    std::vector<std::string>& list = jobs[job];
    for (size_t i = 0; i < addresses.size(); ++i) {
      if (!addresses[i].is_string()) {
        return Invalid(source, absl::StrCat("cluster.", job, "[", i, "] is ",
                                            Describe(addresses[i]),
                                            "; expected a \"host:port\" "
                                            "string"));
      }
      list.push_back(addresses[i].get<std::string>());
    }
  }
  return jobs;
}

// Reads task.index; sets *given to whether it was present at all.
absl::StatusOr<int> ParseIndex(absl::string_view source, const json& task,
                               bool* given) {
  auto it = task.find("index");
  *given = it != task.end();
  if (!*given) return 0;
  const std::string bad = absl::StrCat("task.index is ", Describe(*it),
                                       "; expected a non-negative integer");
  if (it->is_number_unsigned()) {
    uint64_t value = it->get<uint64_t>();
    if (value > static_cast<uint64_t>(INT_MAX)) return Invalid(source, bad);
    return static_cast<int>(value);
  }
  // Negative integers, floats such as 1.0, strings and the rest.
  return Invalid(source, bad);
}

absl::StatusOr<TaskId> ParseTask(absl::string_view source, const json& root,
                                 const ClusterSpec::JobMap& jobs) {
  auto it = root.find("task");
  if (it == root.end()) return Invalid(source, "task is missing");
  if (!it->is_object()) {
    return Invalid(source, absl::StrCat("task is ", Describe(*it),
                                        "; expected an object with \"type\" "
                                        "and \"index\""));
  }
  TaskId task;
  auto type = it->find("type");
  if (type == it->end()) return Invalid(source, "task.type is missing");
  if (!type->is_string()) {
    return Invalid(source, absl::StrCat("task.type is ", Describe(*type),
                                        "; expected a string"));
  }
  task.type = type->get<std::string>();
  bool index_given = false;
  absl::StatusOr<int> index = ParseIndex(source, *it, &index_given);
  if (!index.ok()) return index.status();
  task.index = *index;
  auto job = jobs.find(task.type);
  if (!index_given && job != jobs.end() && job->second.size() > 1) {
    return Invalid(
        source, absl::StrCat("task.index is missing; required because "
                             "cluster.",
                             task.type, " has ", job->second.size(), " tasks"));
  }
  return task;
}

absl::StatusOr<std::string> ParseRpcLayer(absl::string_view source,
                                          const json& root) {
  auto it = root.find("rpc_layer");
  if (it == root.end()) return std::string(kDefaultRpcLayer);
  if (!it->is_string() || it->get_ref<const std::string&>().empty()) {
    return Invalid(source, absl::StrCat("rpc_layer is ", Describe(*it),
                                        "; expected a non-empty string"));
  }
  return it->get<std::string>();
}

absl::Status CheckTask(absl::string_view source,
                       const ClusterSpec::JobMap& jobs, const TaskId& task) {
  if (!IsKnownJob(task.type)) {
    return Invalid(source, absl::StrCat("task.type ", Quote(task.type),
                                        " is not one of ", kJobList));
  }
  if (task.index < 0) {
    return Invalid(source, absl::StrCat("task.index is ", task.index,
                                        "; expected a non-negative integer"));
  }
  auto job = jobs.find(task.type);
  if (job == jobs.end()) {
    // TensorFlow lets an evaluator sit outside the training cluster.
    if (task.type == kEvaluator) return absl::OkStatus();
    return Invalid(source,
                   absl::StrCat("task.type is ", Quote(task.type),
                                " but the cluster has no ", task.type, " job"));
  }
  if (static_cast<size_t>(task.index) >= job->second.size()) {
    return Invalid(
        source, absl::StrCat("task.index is ", task.index, " but cluster.",
                             task.type, " has ", job->second.size(), " tasks"));
  }
  return absl::OkStatus();
}

}  // namespace

ClusterSpec::ClusterSpec(JobMap jobs, TaskId task, std::string rpc_layer)
    : jobs_(std::move(jobs)),
      task_(std::move(task)),
      rpc_layer_(std::move(rpc_layer)) {}

absl::StatusOr<ClusterSpec> ClusterSpec::Build(absl::string_view source,
                                               JobMap jobs, TaskId task,
                                               std::string rpc_layer) {
  // Lower-cased address -> where it was first seen, to report both places.
  std::map<std::string, std::string> seen;
  for (const auto& [job, addresses] : jobs) {
    if (absl::Status s = CheckJobName(source, job); !s.ok()) return s;
    if (addresses.empty()) {
      return Invalid(source, absl::StrCat("cluster.", job, " is empty"));
    }
    if ((job == kChief || job == kEvaluator) && addresses.size() > 1) {
      return Invalid(source,
                     absl::StrCat("cluster.", job, " has ", addresses.size(),
                                  " tasks; at most 1 is allowed"));
    }
    for (size_t i = 0; i < addresses.size(); ++i) {
      const std::string path = absl::StrCat("cluster.", job, "[", i, "]");
      std::string problem = HostPortProblem(addresses[i]);
      if (!problem.empty()) {
        return Invalid(source,
                       absl::StrCat(path, " ", Quote(addresses[i]),
                                    " is not host:port (", problem, ")"));
      }
      auto [it, inserted] =
          seen.emplace(absl::AsciiStrToLower(addresses[i]), path);
      if (!inserted) {
        return Invalid(source, absl::StrCat(path, " ", Quote(addresses[i]),
                                            " duplicates ", it->second));
      }
    }
  }
  if (absl::Status s = CheckTask(source, jobs, task); !s.ok()) return s;
  return ClusterSpec(std::move(jobs), std::move(task), std::move(rpc_layer));
}

absl::StatusOr<ClusterSpec> ClusterSpec::Parse(absl::string_view text,
                                               absl::string_view source) {
  json root = json::parse(text.begin(), text.end(), /*cb=*/nullptr,
                          /*allow_exceptions=*/false);
  if (root.is_discarded()) {
    return Invalid(source,
                   absl::StrCat("not valid JSON: ", DescribeParseError(text)));
  }
  if (!root.is_object()) {
    return Invalid(source, absl::StrCat("top level is ", Describe(root),
                                        "; expected a JSON object"));
  }
  absl::StatusOr<JobMap> jobs = ParseCluster(source, root);
  if (!jobs.ok()) return jobs.status();
  absl::StatusOr<TaskId> task = ParseTask(source, root, *jobs);
  if (!task.ok()) return task.status();
  absl::StatusOr<std::string> rpc_layer = ParseRpcLayer(source, root);
  if (!rpc_layer.ok()) return rpc_layer.status();
  return Build(source, *std::move(jobs), *std::move(task),
               *std::move(rpc_layer));
}

absl::StatusOr<ClusterSpec> ClusterSpec::FromTfConfigJson(
    std::string_view json) {
  return Parse(absl::string_view(json.data(), json.size()), "TF_CONFIG");
}

absl::StatusOr<ClusterSpec> ClusterSpec::FromEnvironment() {
  const char* value = std::getenv("TF_CONFIG");
  if (value == nullptr) {
    return absl::NotFoundError("TF_CONFIG environment variable is not set");
  }
  if (absl::StripAsciiWhitespace(value).empty()) {
    return absl::NotFoundError("TF_CONFIG environment variable is empty");
  }
  return Parse(value, "TF_CONFIG");
}

absl::StatusOr<ClusterSpec> ClusterSpec::FromFile(const std::string& path) {
  const std::string what = absl::StrCat("TF_CONFIG file ", Quote(path));
  absl::StatusOr<std::string> text = ReadBoundedFile(path, kMaxFileBytes, what);
  if (!text.ok()) return text.status();
  return Parse(*text, what);
}

absl::StatusOr<ClusterSpec> ClusterSpec::FromParts(
    std::map<std::string, std::vector<std::string>> jobs, TaskId task) {
  JobMap job_map(std::make_move_iterator(jobs.begin()),
                 std::make_move_iterator(jobs.end()));
  return Build("cluster spec", std::move(job_map), std::move(task),
               std::string(kDefaultRpcLayer));
}

const std::vector<std::string>& ClusterSpec::tasks(std::string_view job) const {
  static const auto* const kNoTasks = new std::vector<std::string>();
  auto it = jobs_.find(job);
  return it == jobs_.end() ? *kNoTasks : it->second;
}

int ClusterSpec::num_tasks(std::string_view job) const {
  return static_cast<int>(tasks(job).size());
}

absl::StatusOr<std::string> ClusterSpec::address(std::string_view job,
                                                 int index) const {
  const std::vector<std::string>& list = tasks(job);
  if (index < 0 || static_cast<size_t>(index) >= list.size()) {
    return absl::OutOfRangeError(
        absl::StrCat("no task ", index, " in job ",
                     Quote(absl::string_view(job.data(), job.size())),
                     ": it has ", list.size(), " tasks"));
  }
  return list[index];
}

std::string ClusterSpec::own_address() const {
  absl::StatusOr<std::string> own = address(task_.type, task_.index);
  return own.ok() ? *std::move(own) : std::string();
}

std::string ClusterSpec::ToTfConfigJson() const {
  json root = json::object();
  json& cluster = root["cluster"] = json::object();
  for (const auto& [job, addresses] : jobs_) cluster[job] = addresses;
  json& task = root["task"] = json::object();
  task["type"] = task_.type;
  task["index"] = task_.index;
  root["rpc_layer"] = rpc_layer_;
  return root.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string ClusterSpec::DebugString() const {
  std::string out = absl::StrCat("task=", task_.type, ":", task_.index,
                                 " rpc_layer=", rpc_layer_);
  for (const auto& [job, addresses] : jobs_) {
    absl::StrAppend(&out, " ", job, "=[", absl::StrJoin(addresses, ","), "]");
  }
  return out;
}

absl::Status ClusterSpec::ValidateForParameterServerTraining() const {
  auto missing = [](absl::string_view what) {
    return absl::InvalidArgumentError(
        absl::StrCat("parameter-server training needs ", what));
  };
  if (num_tasks("chief") != 1) {
    return missing(
        "exactly one chief task (the coordinator); cluster.chief "
        "is missing");
  }
  if (num_tasks("worker") < 1) {
    return missing("at least one worker task; cluster.worker is missing");
  }
  if (num_tasks("ps") < 1) {
    return missing("at least one ps task; cluster.ps is missing");
  }
  return absl::OkStatus();
}

}  // namespace tessera
