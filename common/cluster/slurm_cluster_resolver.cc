#include "common/cluster/slurm_cluster_resolver.h"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/cluster/hostlist.h"

namespace tessera {
namespace {

using Getenv = std::function<const char*(const char*)>;

constexpr absl::string_view kJobNames = "chief, evaluator, ps, worker";
constexpr absl::string_view kUseBlockOrCyclic =
    "launch with srun --distribution=block or --distribution=cyclic";

std::string Quote(absl::string_view s) {
  return absl::StrCat("\"", absl::CHexEscape(s), "\"");
}

bool IsJobName(absl::string_view name) {
  return name == "chief" || name == "evaluator" || name == "ps" ||
         name == "worker";
}

// Parses a non-negative decimal int with nothing around it.
std::optional<int> ParseCount(absl::string_view text) {
  if (text.empty()) return std::nullopt;
  for (char c : text) {
    if (!absl::ascii_isdigit(static_cast<unsigned char>(c))) {
      return std::nullopt;
    }
  }
  int value = 0;
  if (!absl::SimpleAtoi(text, &value)) return std::nullopt;
  return value;
}

// The value of a variable that every Slurm step sets.
absl::StatusOr<std::string> Required(const Getenv& getenv, const char* name) {
  const char* value = getenv(name);
  if (value == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        name, " is not set: not running inside a Slurm step (use srun)"));
  }
  return std::string(value);
}

std::optional<std::string> Optional(const Getenv& getenv, const char* name) {
  const char* value = getenv(name);
  if (value == nullptr) return std::nullopt;
  return std::string(value);
}

// Reads `name` as a non-negative int; InvalidArgument quoting it otherwise.
absl::StatusOr<int> IntVariable(const char* name, absl::string_view value) {
  std::optional<int> parsed = ParseCount(value);
  if (!parsed.has_value()) {
    return absl::InvalidArgumentError(absl::StrCat(
        name, " is ", Quote(value), "; expected a non-negative integer"));
  }
  return *parsed;
}

absl::Status WithPrefix(absl::string_view prefix, const absl::Status& status) {
  return absl::Status(status.code(),
                      absl::StrCat(prefix, ": ", status.message()));
}

// How many consecutive ranks Slurm puts on a node in one round over the
// nodes: INT_MAX for block, 1 for cyclic, N for plane=N.
absl::StatusOr<int> RanksPerRound(const Getenv& getenv) {
  const std::string value = absl::AsciiStrToLower(
      Optional(getenv, "SLURM_DISTRIBUTION").value_or(""));
  // "block:cyclic,pack": the node level is before ':'; ",pack" and ",nopack"
  // only change how many tasks each node gets, which the counts already say.
  std::string method;
  for (absl::string_view token : absl::StrSplit(value, ',')) {
    if (token.empty() || token == "pack" || token == "nopack") continue;
    if (!method.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("SLURM_DISTRIBUTION ", Quote(value),
                       " names more than one distribution"));
    }
    method = std::string(token);
  }
  const absl::string_view node_level =
      absl::string_view(method).substr(0, method.find(':'));
  if (node_level.empty() || node_level == "*" || node_level == "block") {
    return INT_MAX;
  }
  if (node_level == "cyclic") return 1;
  absl::string_view plane = node_level;
  if (absl::ConsumePrefix(&plane, "plane") &&
      (plane.empty() || absl::ConsumePrefix(&plane, "="))) {
    std::string size_text(plane);
    const char* source = "SLURM_DISTRIBUTION";
    if (node_level == "plane") {
      source = "SLURM_DIST_PLANESIZE";
      std::optional<std::string> size = Optional(getenv, source);
      if (!size.has_value()) {
        return absl::InvalidArgumentError(
            "SLURM_DISTRIBUTION is \"plane\" but SLURM_DIST_PLANESIZE, the "
            "plane size, is not set");
      }
      size_text = *size;
    }
    std::optional<int> size = ParseCount(size_text);
    if (!size.has_value() || *size < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("plane size ", Quote(size_text), " (from ", source,
                       ") is not a positive integer"));
    }
    return *size;
  }
  if (node_level == "arbitrary") {
    return absl::FailedPreconditionError(absl::StrCat(
        "SLURM_DISTRIBUTION is \"arbitrary\": Slurm placed the ranks from a "
        "host list (srun -w/SLURM_HOSTFILE), and which rank runs where cannot "
        "be read from the step's variables; ",
        kUseBlockOrCyclic));
  }
  return absl::FailedPreconditionError(
      absl::StrCat("SLURM_DISTRIBUTION ", Quote(value),
                   " is a task distribution Tessera cannot map ranks for; ",
                   kUseBlockOrCyclic));
}

struct Placement {
  int node = 0;   // Index into the step's node list.
  int local = 0;  // Index among the ranks on that node, in rank order.
};

// Slurm's layout: rounds over the nodes in order, each node taking up to
// `per_round` consecutive ranks while it has room.
std::vector<Placement> PlaceRanks(const std::vector<int>& tasks_per_node,
                                  int per_round, int num_tasks) {
  std::vector<Placement> placements(num_tasks);
  std::vector<int> placed(tasks_per_node.size(), 0);
  int rank = 0;
  while (rank < num_tasks) {
    for (size_t node = 0; node < tasks_per_node.size(); ++node) {
      const int take = std::min(per_round, tasks_per_node[node] - placed[node]);
      for (int i = 0; i < take; ++i) {
        placements[rank++] = {static_cast<int>(node), placed[node]++};
      }
    }
  }
  return placements;
}

std::string JobsText(const std::map<std::string, int>& jobs) {
  return absl::StrJoin(jobs, ",", absl::PairFormatter(":"));
}

// Splits CUDA_VISIBLE_DEVICES into its entries; none for Slurm's and CUDA's
// spellings of "no GPU".
absl::StatusOr<std::vector<std::string>> VisibleDevices(const Getenv& getenv) {
  const std::string raw = Optional(getenv, "CUDA_VISIBLE_DEVICES").value_or("");
  const absl::string_view value = absl::StripAsciiWhitespace(raw);
  std::vector<std::string> devices;
  if (value.empty() || value == "NoDevFiles" || value == "-1") return devices;
  for (absl::string_view entry : absl::StrSplit(value, ',')) {
    entry = absl::StripAsciiWhitespace(entry);
    if (entry.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("CUDA_VISIBLE_DEVICES ", Quote(raw),
                       " has an empty entry at index ", devices.size()));
    }
    devices.emplace_back(entry);
  }
  return devices;
}

// True when Slurm bound GPUs to each task itself, so CUDA_VISIBLE_DEVICES is
// this task's share: srun --gpus-per-task (which binds per_task by default)
// or --gpu-bind=per_task|single|map_gpu|mask_gpu show as, e.g.,
// SLURMD_TRES_BIND=gpu:per_task:2 or gpu:verbose,map_gpu:3,1. "none" and
// "closest" leave every task of a node the same list.
bool SlurmBoundGpusPerTask(const Getenv& getenv) {
  const std::string value = Optional(getenv, "SLURMD_TRES_BIND").value_or("");
  for (absl::string_view tres : absl::StrSplit(value, ';')) {
    if (!absl::ConsumePrefix(&tres, "gpu:")) continue;
    for (absl::string_view option : absl::StrSplit(tres, ',')) {
      const absl::string_view type = option.substr(0, option.find(':'));
      if (type == "per_task" || type == "single" || type == "map_gpu" ||
          type == "mask_gpu") {
        return true;
      }
    }
  }
  return false;
}

struct GpuShare {
  std::string devices;  // For CUDA_VISIBLE_DEVICES; "" for none.
  int per_task = 0;
};

// The GPU rule documented in the header. `max_tasks` is M, `local` is L,
// `bound` is SlurmBoundGpusPerTask().
absl::StatusOr<GpuShare> ShareGpus(const SlurmOptions& options,
                                   const std::vector<std::string>& visible,
                                   bool bound, int max_tasks, int local) {
  GpuShare share;
  // An explicit gpus_per_task=0 means no GPUs, whatever is visible.
  if (options.gpus_per_task == 0) return share;
  const int k = static_cast<int>(visible.size());
  const bool node_given = options.gpus_per_node >= 0;
  const bool task_given = options.gpus_per_task >= 0;
  const int n = node_given ? options.gpus_per_node : k;
  const int g = task_given ? options.gpus_per_task : n / max_tasks;
  const std::string facts = absl::StrCat(
      "CUDA_VISIBLE_DEVICES lists ", k, " GPU(s), gpus_per_node is ", n,
      node_given ? "" : " (from CUDA_VISIBLE_DEVICES)", ", gpus_per_task is ",
      g, task_given ? "" : " (gpus_per_node / tasks per node)",
      ", and the busiest node runs ", max_tasks, " task(s)");
  if (node_given && k > n) {
    return absl::InvalidArgumentError(absl::StrCat(
        facts,
        ": more GPUs are visible than gpus_per_node says the node has (use "
        "gpus_per_task=0 for tasks without GPUs)"));
  }
  if (bound) {
    if (task_given && k != g) {
      return absl::InvalidArgumentError(absl::StrCat(
          facts, ": Slurm bound ", k,
          " GPU(s) to this task (SLURMD_TRES_BIND), not gpus_per_task"));
    }
    share.devices = absl::StrJoin(visible, ",");
    share.per_task = k;
    return share;
  }
  bool task_view = false;
  if (node_given) {
    task_view = k > 0 && k < n;
  } else if (task_given) {
    task_view = k > 0 && k == g && static_cast<int64_t>(max_tasks) * g > k;
  } else {
    task_view = k > 0 && k < max_tasks;
  }
  if (task_view) {
    // Too short to be the node's list: Slurm bound GPUs per task.
    if ((node_given || task_given) && k != g) {
      return absl::InvalidArgumentError(absl::StrCat(
          facts,
          ": the list is neither the node's GPUs nor one task's share (with "
          "per-task binding it would list gpus_per_task entries)"));
    }
    share.devices = absl::StrJoin(visible, ",");
    share.per_task = k;
    return share;
  }
  if (static_cast<int64_t>(max_tasks) * g > n) {
    return absl::InvalidArgumentError(
        absl::StrCat(facts, ": ", max_tasks, " tasks x ", g, " GPU(s) need ",
                     static_cast<int64_t>(max_tasks) * g, " GPUs on one node"));
  }
  std::vector<std::string> mine;
  for (int i = local * g; i < (local + 1) * g; ++i) {
    mine.push_back(k > 0 ? visible[i] : absl::StrCat(i));
  }
  share.devices = absl::StrJoin(mine, ",");
  share.per_task = g;
  return share;
}

}  // namespace

absl::StatusOr<std::map<std::string, int>> ParseJobs(absl::string_view text) {
  auto bad = [text](absl::string_view problem) {
    return absl::InvalidArgumentError(
        absl::StrCat("jobs ", Quote(text), ": ", problem,
                     "; expected e.g. chief:1,ps:2,worker:4"));
  };
  if (absl::StripAsciiWhitespace(text).empty()) return bad("empty");
  std::map<std::string, int> jobs;
  int index = 0;
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    part = absl::StripAsciiWhitespace(part);
    if (part.empty()) {
      return bad(absl::StrCat("part ", index, " is empty"));
    }
    const size_t colon = part.find(':');
    if (colon == absl::string_view::npos) {
      return bad(absl::StrCat("part ", Quote(part), " is not name:count"));
    }
    const std::string name(absl::StripAsciiWhitespace(part.substr(0, colon)));
    const absl::string_view count_text =
        absl::StripAsciiWhitespace(part.substr(colon + 1));
    if (!IsJobName(name)) {
      return bad(absl::StrCat("job ", Quote(name), " in part ", Quote(part),
                              " is not one of ", kJobNames));
    }
    std::optional<int> count = ParseCount(count_text);
    if (!count.has_value()) {
      return bad(absl::StrCat("count ", Quote(count_text), " of job ", name,
                              " is not a positive integer"));
    }
    if (*count == 0) {
      return bad(absl::StrCat("job ", name,
                              " has count 0; leave the job out instead"));
    }
    if (!jobs.emplace(name, *count).second) {
      return bad(absl::StrCat("job ", name, " appears twice"));
    }
    ++index;
  }
  return jobs;
}

namespace {

// The step's variables, parsed and checked against each other.
struct SlurmStep {
  int rank = 0;
  int num_tasks = 0;
  std::string nodelist;    // SLURM_STEP_NODELIST as given
  std::string tasks_text;  // SLURM_STEP_TASKS_PER_NODE as given
  std::vector<std::string> nodes;
  std::vector<int> tasks_per_node;
};

absl::StatusOr<SlurmStep> ReadSlurmStep(
    const std::function<const char*(const char*)>& getenv) {
  // SLURM_PROCID first: it is the variable that says "inside Slurm".
  absl::StatusOr<std::string> procid = Required(getenv, "SLURM_PROCID");
  if (!procid.ok()) return procid.status();
  absl::StatusOr<std::string> nodelist =
      Required(getenv, "SLURM_STEP_NODELIST");
  if (!nodelist.ok()) return nodelist.status();
  absl::StatusOr<std::string> tasks_text =
      Required(getenv, "SLURM_STEP_TASKS_PER_NODE");
  if (!tasks_text.ok()) return tasks_text.status();
  absl::StatusOr<std::string> num_tasks_text =
      Required(getenv, "SLURM_STEP_NUM_TASKS");
  if (!num_tasks_text.ok()) return num_tasks_text.status();

  absl::StatusOr<int> rank = IntVariable("SLURM_PROCID", *procid);
  if (!rank.ok()) return rank.status();
  absl::StatusOr<int> num_tasks =
      IntVariable("SLURM_STEP_NUM_TASKS", *num_tasks_text);
  if (!num_tasks.ok()) return num_tasks.status();
  // Bounded before anything is sized by it: one placement and one address
  // are made per task, and 2000000000 asked for 16 GB.
  if (*num_tasks > kMaxExpandedHosts) {
    return absl::InvalidArgumentError(
        absl::StrCat("SLURM_STEP_NUM_TASKS is ", *num_tasks, "; at most ",
                     kMaxExpandedHosts, " tasks are supported in one step"));
  }
  absl::StatusOr<std::vector<std::string>> nodes = ExpandHostlist(*nodelist);
  if (!nodes.ok()) return WithPrefix("SLURM_STEP_NODELIST", nodes.status());
  absl::StatusOr<std::vector<int>> tasks_per_node =
      ExpandTasksPerNode(*tasks_text);
  if (!tasks_per_node.ok()) {
    return WithPrefix("SLURM_STEP_TASKS_PER_NODE", tasks_per_node.status());
  }

  // The step's variables must agree with each other.
  if (nodes->size() != tasks_per_node->size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "SLURM_STEP_NODELIST ", Quote(*nodelist), " names ", nodes->size(),
        " node(s) but SLURM_STEP_TASKS_PER_NODE ", Quote(*tasks_text),
        " gives counts for ", tasks_per_node->size()));
  }
  std::set<std::string> seen;
  for (const std::string& node : *nodes) {
    if (!seen.insert(absl::AsciiStrToLower(node)).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("SLURM_STEP_NODELIST ", Quote(*nodelist), " names node ",
                       Quote(node), " twice"));
    }
  }
  int64_t sum = 0;
  for (int count : *tasks_per_node) sum += count;
  if (sum != *num_tasks) {
    return absl::InvalidArgumentError(absl::StrCat(
        "SLURM_STEP_TASKS_PER_NODE ", Quote(*tasks_text), " adds up to ", sum,
        " tasks but SLURM_STEP_NUM_TASKS is ", *num_tasks));
  }
  if (*rank >= *num_tasks) {
    return absl::InvalidArgumentError(
        absl::StrCat("SLURM_PROCID is ", *rank, " but the step has only ",
                     *num_tasks, " tasks (SLURM_STEP_NUM_TASKS)"));
  }
  return SlurmStep{*rank,
                   *num_tasks,
                   *std::move(nodelist),
                   *std::move(tasks_text),
                   *std::move(nodes),
                   *std::move(tasks_per_node)};
}

// The jobs the step's tasks are split into; TF's default is one worker
// per task.
absl::StatusOr<std::map<std::string, int>> JobsOfStep(
    const std::map<std::string, int>& asked, int num_tasks) {
  std::map<std::string, int> jobs = asked;
  if (jobs.empty()) jobs["worker"] = num_tasks;
  int64_t wanted = 0;
  for (const auto& [name, count] : jobs) {
    if (count < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("jobs ", JobsText(jobs), ": job ", name, " has ", count,
                       " tasks; every job needs at least 1"));
    }
    wanted += count;
  }
  if (wanted != num_tasks) {
    return absl::InvalidArgumentError(absl::StrCat(
        "jobs ", JobsText(jobs), " add up to ", wanted,
        " tasks but the Slurm step has ", num_tasks,
        " (SLURM_STEP_NUM_TASKS); start as many tasks as the jobs name "
        "(srun -n ",
        wanted, ")"));
  }
  return jobs;
}

// No node may run more tasks than it has ports.
absl::Status CheckPortRange(int port_base, int max_tasks) {
  if (port_base < 1 ||
      static_cast<int64_t>(port_base) + max_tasks - 1 > 65535) {
    return absl::InvalidArgumentError(absl::StrCat(
        "port_base is ", port_base, "; with up to ", max_tasks,
        " task(s) on one node the ports run to ",
        static_cast<int64_t>(port_base) + max_tasks - 1, ", outside 1..65535"));
  }
  return absl::OkStatus();
}

// SLURM_NODEID and SLURM_LOCALID, where Slurm sets them, must be where the
// layout computed puts this rank: otherwise every address would be wrong.
absl::Status CheckReportedPlacement(
    const std::function<const char*(const char*)>& getenv,
    const SlurmStep& step, const Placement& own) {
  for (const auto& [name, actual] :
       {std::pair<const char*, int>{"SLURM_NODEID", own.node},
        std::pair<const char*, int>{"SLURM_LOCALID", own.local}}) {
    std::optional<std::string> value = Optional(getenv, name);
    if (!value.has_value()) continue;
    absl::StatusOr<int> reported = IntVariable(name, *value);
    if (!reported.ok()) return reported.status();
    if (*reported != actual) {
      return absl::FailedPreconditionError(absl::StrCat(
          name, " is ", *reported, " but the layout computed for rank ",
          step.rank, " from SLURM_DISTRIBUTION ",
          Quote(Optional(getenv, "SLURM_DISTRIBUTION").value_or("")),
          " (unset means block), SLURM_STEP_NODELIST ", Quote(step.nodelist),
          " and SLURM_STEP_TASKS_PER_NODE ", Quote(step.tasks_text),
          " puts it on node ", own.node, " (", step.nodes[own.node],
          ") as local task ", own.local,
          "; Slurm placed the tasks in a way Tessera cannot map; ",
          kUseBlockOrCyclic));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<SlurmResolution> ResolveSlurmCluster(
    const SlurmOptions& options,
    const std::function<const char*(const char*)>& getenv) {
  absl::StatusOr<SlurmStep> step = ReadSlurmStep(getenv);
  if (!step.ok()) return step.status();
  absl::StatusOr<std::map<std::string, int>> jobs =
      JobsOfStep(options.jobs, step->num_tasks);
  if (!jobs.ok()) return jobs.status();
  // Checked before placing ranks.
  const int max_tasks = *std::max_element(step->tasks_per_node.begin(),
                                          step->tasks_per_node.end());
  if (absl::Status s = CheckPortRange(options.port_base, max_tasks); !s.ok()) {
    return s;
  }

  // Where Slurm put each rank.
  absl::StatusOr<int> per_round = RanksPerRound(getenv);
  if (!per_round.ok()) return per_round.status();
  const std::vector<Placement> placements =
      PlaceRanks(step->tasks_per_node, *per_round, step->num_tasks);
  const Placement& own = placements[step->rank];
  if (absl::Status s = CheckReportedPlacement(getenv, *step, own); !s.ok()) {
    return s;
  }

  // Jobs take ranks in name order (std::map: chief < evaluator < ps <
  // worker), as TF's sorted(jobs).
  std::map<std::string, std::vector<std::string>> cluster;
  TaskId task;
  int first = 0;
  for (const auto& [name, count] : *jobs) {
    std::vector<std::string>& addresses = cluster[name];
    for (int r = first; r < first + count; ++r) {
      const Placement& p = placements[r];
      addresses.push_back(
          absl::StrCat(step->nodes[p.node], ":", options.port_base + p.local));
    }
    if (step->rank >= first && step->rank < first + count) {
      task = TaskId{name, step->rank - first};
    }
    first += count;
  }

  absl::StatusOr<std::vector<std::string>> visible = VisibleDevices(getenv);
  if (!visible.ok()) return visible.status();
  absl::StatusOr<GpuShare> gpus = ShareGpus(
      options, *visible, SlurmBoundGpusPerTask(getenv), max_tasks, own.local);
  if (!gpus.ok()) return gpus.status();

  absl::StatusOr<ClusterSpec> spec =
      ClusterSpec::FromParts(std::move(cluster), std::move(task));
  if (!spec.ok()) {
    return WithPrefix(absl::StrCat("Slurm cluster from jobs ", JobsText(*jobs)),
                      spec.status());
  }
  const bool told = getenv("CUDA_VISIBLE_DEVICES") != nullptr ||
                    options.gpus_per_node >= 0 || options.gpus_per_task == 0;
  return SlurmResolution{*std::move(spec), std::move(gpus->devices),
                         gpus->per_task, gpus->per_task > 0 || told};
}

}  // namespace tessera
