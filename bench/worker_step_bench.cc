// bench_worker_step: training steps of the job files' models (the layer
// graph every worker runs) on the CPU backend and, where a GPU answers,
// the CUDA backend, per batch size (--batches on the GPU, --cpu_batches on
// the CPU, whose large batches take minutes on a small machine).
//
// A step is what a worker does between its pull and its push: the pulled
// parameters (in the backend's host memory, pinned on the GPU, as the
// worker keeps them) to the device, forward and backward, the gradients
// back to the host. Each row gives examples/s and the step's time split
// into copies to the device, compute and copies to the host, measured with
// CUDA events on the backend's stream (the host clock on the CPU) at every
// change of part (bench/profiling_backend.h). Beside it the step's matrix
// products alone: the GEMMs a step issues (shapes and transposes, batched
// ones expanded) run back to back on buffers of the same sizes on the same
// device (Eigen on the CPU, cuBLAS on the GPU). step/gemm is the step's
// time over that GEMM time: 1.0 would mean everything but the products was
// free. The target, checkable only on a GPU: the MLP and DLRM steps at
// batch 8192 within 1.5x of their GEMMs. Each time is the median of
// --rounds rounds of at least --min_seconds each. Exit status 0 unless a
// step fails, 2 for a bad job file or flag.

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/types/span.h"
#include "bench/profiling_backend.h"
#include "common/job_file.h"
#include "common/model/model_graph.h"
#include "common/model/model_presets.h"
#include "gflags/gflags.h"
#include "worker/backend/backend.h"
#include "worker/backend/cpu/cpu_backend.h"
#include "worker/backend/cuda/cuda_backend.h"
#include "worker/nn/graph.h"

DEFINE_string(job_files,
              "deploy/jobs/mlp_fashion_mnist.textproto,"
              "deploy/jobs/cnn_fashion_mnist.textproto,"
              "deploy/jobs/dlrm.textproto,deploy/jobs/dcn_v2.textproto,"
              "deploy/jobs/deepfm.textproto,deploy/jobs/wide_deep.textproto",
              "Job files whose models to time, comma-separated.");
DEFINE_string(batches, "1024,8192,65536",
              "Batch sizes on the GPU, comma-separated.");
DEFINE_string(cpu_batches, "64,1024",
              "Batch sizes on the CPU, comma-separated.");
DEFINE_double(min_seconds, 0.5, "Least time per round of a measurement.");
DEFINE_int32(rounds, 3, "Rounds per measurement; the median is shown.");
DEFINE_int32(split_steps, 5, "Steps whose parts are timed, averaged, per row.");
DEFINE_string(devices, "cpu,cuda",
              "Backends to time: cpu and/or cuda (cuda:0, skipped with the "
              "reason when no GPU answers).");

namespace tessera {
namespace {

using Clock = std::chrono::steady_clock;

// The target of the GPU rows (see the top of the file).
constexpr int64_t kTargetBatch = 8192;
constexpr double kTargetRatio = 1.5;
bool HasTarget(const std::string& job) {
  return job == "mlp_fashion_mnist" || job == "dlrm";
}

// Median seconds per call of `f` over rounds of at least min_seconds.
template <typename F>
double TimePerCall(F f, Backend* backend) {
  std::vector<double> per_call;
  for (int r = 0; r < std::max(1, FLAGS_rounds); ++r) {
    int64_t calls = 0;
    const Clock::time_point start = Clock::now();
    double elapsed = 0;
    do {
      if (!f()) return -1;
      ++calls;
      if (!backend->Synchronize().ok()) return -1;
      elapsed = std::chrono::duration<double>(Clock::now() - start).count();
    } while (elapsed < FLAGS_min_seconds || calls < 2);
    per_call.push_back(elapsed / calls);
  }
  std::sort(per_call.begin(), per_call.end());
  return per_call[per_call.size() / 2];
}

std::vector<float> RandomVector(int64_t n, std::mt19937* gen, float scale) {
  std::uniform_real_distribution<float> dist(-scale, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(*gen);
  return v;
}

// A random batch of any model's inputs: one id per bag, each id its own
// table row.
struct Batch {
  std::vector<std::vector<float>> dense, rows;
  std::vector<std::vector<int64_t>> offsets, positions;
  std::vector<int32_t> classes;
  std::vector<float> labels;
  GraphBatch view;
};

Batch MakeBatch(const ModelGraph& model, const Graph& graph, int64_t n,
                std::mt19937* gen) {
  Batch b;
  for (const InputDef& in : model.resolved.inputs()) {
    if (in.has_sparse()) {
      b.offsets.emplace_back(n + 1);
      for (int64_t i = 0; i <= n; ++i) b.offsets.back()[i] = i;
      continue;
    }
    b.dense.push_back(RandomVector(
        n * NumElements(model.tensors.at(in.name()).shape), gen, 1.0f));
  }
  for (size_t t = 0; t < graph.tables().size(); ++t) {
    const int64_t ids = n * graph.table_reads(t).size();
    b.rows.push_back(
        RandomVector(ids * graph.tables()[t].shape[1], gen, 0.05f));
    b.positions.emplace_back(ids);
    for (int64_t j = 0; j < ids; ++j) b.positions.back()[j] = j;
  }
  const int classes = std::max(1, model.resolved.label().num_classes());
  for (int64_t i = 0; i < n; ++i) {
    b.classes.push_back(static_cast<int32_t>(i % classes));
    b.labels.push_back(static_cast<float>(i % 2));
  }
  b.view.size = n;
  for (const auto& v : b.dense) b.view.dense.push_back(v);
  for (const auto& v : b.offsets) b.view.sparse_offsets.push_back(v);
  for (const auto& v : b.rows) b.view.table_rows.push_back(v);
  for (const auto& v : b.positions) b.view.table_positions.push_back(v);
  b.view.class_labels = b.classes;
  b.view.labels = b.labels;
  return b;
}

// A worker's step on one backend: the parameters to the device, then
// TrainStep. Values and gradients live in the backend's host memory, as
// the worker's pulled parameters do (worker/params).
struct Stepper {
  std::unique_ptr<Graph> graph;
  std::vector<HostArray<float>> values, grads;
  std::vector<TableGradient> tables;
  uint64_t seed = 0;

  bool Step(const GraphBatch& batch) {
    std::vector<absl::Span<const float>> v;
    for (const auto& a : values) v.emplace_back(a.data(), a.size());
    if (!graph->SetParameters(v).ok()) return false;
    std::vector<absl::Span<float>> g;
    for (auto& a : grads) g.emplace_back(a.data(), a.size());
    return graph->TrainStep(batch, ++seed, g, &tables).ok();
  }
};

absl::StatusOr<Stepper> MakeStepper(const ModelGraph& model, Backend* backend) {
  Stepper s;
  absl::StatusOr<std::unique_ptr<Graph>> graph = Graph::Create(model, backend);
  if (!graph.ok()) return graph.status();
  s.graph = *std::move(graph);
  std::mt19937 gen(1);
  for (const VariableDef& v : s.graph->dense_variables()) {
    const int64_t n = NumElements(v.shape);
    const std::vector<float> init = RandomVector(n, &gen, 0.05f);
    s.values.emplace_back(backend, n);
    std::copy(init.begin(), init.end(), s.values.back().begin());
    s.grads.emplace_back(backend, n);
  }
  return s;
}

struct Row {
  double step_s = 0, gemm_s = 0;
  double parts_s[ProfilingBackend::kNumParts] = {0, 0, 0};
};

void PrintRow(const std::string& job, const std::string& device, int64_t n,
              const Row& r) {
  std::printf("%-18s %-8s %6lld %11.0f %9.3f %8.3f %8.3f %8.3f %9.3f %9.2f\n",
              job.c_str(), device.c_str(), static_cast<long long>(n),
              n / r.step_s, r.step_s * 1e3, r.parts_s[0] * 1e3,
              r.parts_s[1] * 1e3, r.parts_s[2] * 1e3, r.gemm_s * 1e3,
              r.step_s / r.gemm_s);
  std::fflush(stdout);
}

// The step's GEMMs (as `profiler` noted them) alone, on `backend`.
double TimeGemms(const std::vector<GemmCall>& calls, Backend* backend,
                 std::mt19937* gen) {
  std::vector<DeviceArray<float>> a, b, c;
  for (const GemmCall& g : calls) {
    a.emplace_back(backend, g.m * g.k);
    b.emplace_back(backend, g.k * g.n);
    c.emplace_back(backend, g.m * g.n);
    const std::vector<float> ha = RandomVector(g.m * g.k, gen, 1.0f);
    const std::vector<float> hb = RandomVector(g.k * g.n, gen, 1.0f);
    backend->CopyToDevice(ha.data(), a.back().data(), ha.size() * 4);
    backend->CopyToDevice(hb.data(), b.back().data(), hb.size() * 4);
  }
  auto gemms = [&]() {
    for (size_t i = 0; i < calls.size(); ++i) {
      const GemmCall& g = calls[i];
      backend->Gemm(g.ta, g.tb, g.m, g.n, g.k, 1.0f, a[i].data(), b[i].data(),
                    0.0f, c[i].data());
    }
    return true;
  };
  gemms();
  return TimePerCall(gemms, backend);
}

// Rows of one job on one backend; appends the targeted GPU rows' ratios.
int RunDevice(const std::string& job, const ModelGraph& model, Backend* backend,
              const std::string& device, const std::vector<int64_t>& batches,
              std::vector<std::string>* targets) {
  ProfilingBackend profiler(backend);
  absl::StatusOr<Stepper> stepper = MakeStepper(model, &profiler);
  if (!stepper.ok()) {
    std::fprintf(stderr, "%s: %s\n", job.c_str(),
                 std::string(stepper.status().message()).c_str());
    return 1;
  }
  std::mt19937 gen(2);
  for (int64_t n : batches) {
    const Batch batch = MakeBatch(model, *stepper->graph, n, &gen);
    auto step = [&]() { return stepper->Step(batch.view); };
    Row row;
    // Warm-up (buffers, cuBLAS heuristics) that notes the GEMMs.
    profiler.ClearGemms();
    profiler.Start();
    const bool warm = step();
    double ignored[ProfilingBackend::kNumParts] = {0, 0, 0};
    if (!warm || !profiler.Stop(ignored)) {
      std::fprintf(stderr, "%s on %s: a training step failed\n", job.c_str(),
                   backend->device_name().c_str());
      return 1;
    }
    const std::vector<GemmCall> calls = profiler.gemms();
    row.step_s = TimePerCall(step, backend);
    const int split = std::max(1, FLAGS_split_steps);
    for (int i = 0; i < split && row.step_s >= 0; ++i) {
      profiler.Start();
      if (!step() || !profiler.Stop(row.parts_s)) row.step_s = -1;
    }
    if (row.step_s < 0) {
      std::fprintf(stderr, "%s on %s: a training step failed\n", job.c_str(),
                   backend->device_name().c_str());
      return 1;
    }
    for (double& p : row.parts_s) p /= split;
    row.gemm_s = TimeGemms(calls, backend, &gen);
    if (row.gemm_s < 0) return 1;
    PrintRow(job, device, n, row);
    if (device != "cpu" && n == kTargetBatch && HasTarget(job)) {
      const double ratio = row.step_s / row.gemm_s;
      char line[200];
      std::snprintf(line, sizeof(line),
                    "%s on %s at batch %lld: step/gemm %.2f, target <= %.1f: "
                    "%s",
                    job.c_str(), backend->device_name().c_str(),
                    static_cast<long long>(n), ratio, kTargetRatio,
                    ratio <= kTargetRatio ? "met" : "MISSED");
      targets->push_back(line);
    }
  }
  return 0;
}

bool ParseBatches(const std::string& flag, const char* name,
                  std::vector<int64_t>* out) {
  for (absl::string_view part : absl::StrSplit(flag, ',', absl::SkipEmpty())) {
    int64_t b = 0;
    if (!absl::SimpleAtoi(part, &b) || b < 1) {
      std::fprintf(stderr, "--%s: \"%s\" is not a positive number\n", name,
                   std::string(part).c_str());
      return false;
    }
    out->push_back(b);
  }
  return true;
}

int Main() {
  std::vector<int64_t> batches, cpu_batches;
  if (!ParseBatches(FLAGS_batches, "batches", &batches) ||
      !ParseBatches(FLAGS_cpu_batches, "cpu_batches", &cpu_batches)) {
    return 2;
  }
  std::printf(
      "step = parameters to the device + forward + backward + gradients to "
      "the host, float32; in / compute / out = its parts (CUDA events on the "
      "stream; host clock on the CPU); gemm = the step's GEMMs alone (Eigen "
      "| cuBLAS)\n");
  std::printf("%-18s %-8s %6s %11s %9s %8s %8s %8s %9s %9s\n", "job", "device",
              "batch", "examples/s", "ms/step", "ms in", "ms comp", "ms out",
              "ms/gemm", "step/gemm");
  int rc = 0;
  std::vector<std::string> targets;
  std::string no_gpu;
  for (absl::string_view path :
       absl::StrSplit(FLAGS_job_files, ',', absl::SkipEmpty())) {
    absl::StatusOr<JobConfig> job = ReadJobFile(std::string(path));
    if (!job.ok()) {
      std::fprintf(stderr, "%s\n", std::string(job.status().message()).c_str());
      return 2;
    }
    absl::StatusOr<ModelDef> def = JobModel(*job);
    absl::StatusOr<ModelGraph> model =
        def.ok() ? BuildModelGraph(*def, job->schedule().seed())
                 : absl::StatusOr<ModelGraph>(def.status());
    if (!model.ok()) {
      std::fprintf(stderr, "%s: %s\n", std::string(path).c_str(),
                   std::string(model.status().message()).c_str());
      return 2;
    }
    std::string name(path.substr(path.rfind('/') + 1));
    name = name.substr(0, name.find('.'));
    for (absl::string_view device :
         absl::StrSplit(FLAGS_devices, ',', absl::SkipEmpty())) {
      if (device == "cpu") {
        CpuBackend cpu;
        rc |= RunDevice(name, *model, &cpu, "cpu", cpu_batches, &targets);
      } else if (device == "cuda") {
        absl::StatusOr<std::unique_ptr<Backend>> gpu = NewCudaBackend(0);
        if (!gpu.ok()) {
          no_gpu = std::string(gpu.status().message());
          std::printf("%-18s %-8s (skipped: %s)\n", name.c_str(), "cuda:0",
                      no_gpu.c_str());
          continue;
        }
        std::printf("# %s\n", (*gpu)->device_name().c_str());
        rc |= RunDevice(name, *model, gpu->get(), "cuda:0", batches, &targets);
      } else {
        std::fprintf(stderr, "--devices: unknown device \"%s\"\n",
                     std::string(device).c_str());
        return 2;
      }
    }
  }
  for (const std::string& t : targets) std::printf("target: %s\n", t.c_str());
  if (targets.empty()) {
    std::printf(
        "target (MLP and DLRM steps at batch %lld within %.1fx of their "
        "GEMMs on the GPU): not checked%s%s\n",
        static_cast<long long>(kTargetBatch), kTargetRatio,
        no_gpu.empty() ? "" : ": skipped: ", no_gpu.c_str());
  }
  return rc;
}

}  // namespace
}  // namespace tessera

int main(int argc, char** argv) {
  gflags::SetUsageMessage(
      "bench_worker_step: the job files' training steps on CPU and GPU, "
      "split into copies and compute, beside the same GEMMs alone.");
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  return tessera::Main();
}
