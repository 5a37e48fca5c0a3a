// bench_worker_step: forward + backward examples/s of the job files'
// models (the layer graph every worker runs) on the CPU backend and, where
// a GPU answers, the CUDA backend, per batch size (--batches).
//
// Beside each step it times the step's matrix products alone: the GEMMs a
// step issues are recorded once (shapes and transposes, batched ones
// expanded), then run back to back on device buffers of the same sizes on
// the same device in the same run (Eigen on the CPU, cuBLAS on the GPU).
// step/gemm is the step's time over that GEMM time: 1.0 would mean
// everything but the products were free. Each figure is the median of
// --rounds rounds of at least --min_seconds each. Exit status 0 unless a
// step fails, 2 for a bad job file.

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
DEFINE_string(batches, "64,1024,8192", "Batch sizes, comma-separated.");
DEFINE_double(min_seconds, 0.5, "Least time per round of a measurement.");
DEFINE_int32(rounds, 3, "Rounds per measurement; the median is shown.");
DEFINE_string(devices, "cpu,cuda",
              "Backends to time: cpu and/or cuda (cuda:0, skipped with a "
              "note when no GPU answers).");

namespace tessera {
namespace {

using Clock = std::chrono::steady_clock;

struct GemmCall {
  bool ta, tb;
  int64_t m, n, k;
};

// The CPU backend, noting every matrix product a step asks of it.
class GemmRecorder final : public CpuBackend {
 public:
  void Gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha,
            const float* a, const float* b, float beta, float* c) override {
    calls.push_back({ta, tb, m, n, k});
    CpuBackend::Gemm(ta, tb, m, n, k, alpha, a, b, beta, c);
  }
  void BatchedGemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                   float alpha, const float* a, int64_t stride_a,
                   const float* b, int64_t stride_b, float beta, float* c,
                   int64_t stride_c, int64_t batch) override {
    for (int64_t i = 0; i < batch; ++i) calls.push_back({ta, tb, m, n, k});
    CpuBackend::BatchedGemm(ta, tb, m, n, k, alpha, a, stride_a, b, stride_b,
                            beta, c, stride_c, batch);
  }
  std::vector<GemmCall> calls;
};

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

// One step on `backend`: set parameters, then TrainStep.
struct Stepper {
  std::unique_ptr<Graph> graph;
  std::vector<std::vector<float>> values, grads;
  std::vector<TableGradient> tables;
  uint64_t seed = 0;

  bool Step(const GraphBatch& batch) {
    std::vector<absl::Span<float>> g(grads.begin(), grads.end());
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
    s.values.push_back(RandomVector(NumElements(v.shape), &gen, 0.05f));
    s.grads.emplace_back(NumElements(v.shape));
  }
  std::vector<absl::Span<const float>> values(s.values.begin(), s.values.end());
  if (absl::Status st = s.graph->SetParameters(values); !st.ok()) return st;
  return s;
}

int RunDevice(const std::string& job, const ModelGraph& model, Backend* backend,
              const std::vector<int64_t>& batches) {
  absl::StatusOr<Stepper> stepper = MakeStepper(model, backend);
  GemmRecorder recorder;
  absl::StatusOr<Stepper> recording = MakeStepper(model, &recorder);
  if (!stepper.ok() || !recording.ok()) {
    std::fprintf(
        stderr, "%s: %s\n", job.c_str(),
        std::string((stepper.ok() ? recording : stepper).status().message())
            .c_str());
    return 1;
  }
  std::mt19937 gen(2);
  for (int64_t n : batches) {
    const Batch batch = MakeBatch(model, *stepper->graph, n, &gen);
    auto step = [&]() { return stepper->Step(batch.view); };
    step();  // warm-up: buffers, cuBLAS heuristics
    const double step_s = TimePerCall(step, backend);
    if (step_s < 0) {
      std::fprintf(stderr, "%s on %s: a training step failed\n", job.c_str(),
                   backend->device_name().c_str());
      return 1;
    }
    recorder.calls.clear();
    const Batch same = MakeBatch(model, *recording->graph, n, &gen);
    if (!recording->Step(same.view)) return 1;
    const std::vector<GemmCall> calls = recorder.calls;
    std::vector<DeviceArray<float>> a, b, c;
    double flops = 0;
    for (const GemmCall& g : calls) {
      a.emplace_back(backend, g.m * g.k);
      b.emplace_back(backend, g.k * g.n);
      c.emplace_back(backend, g.m * g.n);
      const std::vector<float> ha = RandomVector(g.m * g.k, &gen, 1.0f);
      const std::vector<float> hb = RandomVector(g.k * g.n, &gen, 1.0f);
      backend->CopyToDevice(ha.data(), a.back().data(), ha.size() * 4);
      backend->CopyToDevice(hb.data(), b.back().data(), hb.size() * 4);
      flops += 2.0 * g.m * g.n * g.k;
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
    const double gemm_s = TimePerCall(gemms, backend);
    std::printf("%-22s %-28s %6lld %12.0f %10.3f %10.3f %9.2f\n", job.c_str(),
                backend->device_name().c_str(), static_cast<long long>(n),
                n / step_s, step_s * 1e3, gemm_s * 1e3, step_s / gemm_s);
    std::fflush(stdout);
  }
  return 0;
}

int Main() {
  std::vector<int64_t> batches;
  for (absl::string_view part :
       absl::StrSplit(FLAGS_batches, ',', absl::SkipEmpty())) {
    int64_t b = 0;
    if (!absl::SimpleAtoi(part, &b) || b < 1) {
      std::fprintf(stderr, "--batches: \"%s\" is not a positive number\n",
                   std::string(part).c_str());
      return 2;
    }
    batches.push_back(b);
  }
  std::printf(
      "step = forward + backward + gradients to host, float32; gemm = the "
      "step's GEMMs alone (Eigen | cuBLAS)\n");
  std::printf("%-22s %-28s %6s %12s %10s %10s %9s\n", "job", "device", "batch",
              "examples/s", "ms/step", "ms/gemm", "step/gemm");
  int rc = 0;
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
        rc |= RunDevice(name, *model, &cpu, batches);
      } else if (device == "cuda") {
        absl::StatusOr<std::unique_ptr<Backend>> gpu = NewCudaBackend(0);
        if (!gpu.ok()) {
          std::printf("%-22s %-28s (skipped: %s)\n", name.c_str(), "cuda:0",
                      std::string(gpu.status().message()).c_str());
          continue;
        }
        rc |= RunDevice(name, *model, gpu->get(), batches);
      } else {
        std::fprintf(stderr, "--devices: unknown device \"%s\"\n",
                     std::string(device).c_str());
        return 2;
      }
    }
  }
  return rc;
}

}  // namespace
}  // namespace tessera

int main(int argc, char** argv) {
  gflags::SetUsageMessage(
      "bench_worker_step: the job files' training steps on CPU and GPU, "
      "beside the same GEMMs alone.");
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  return tessera::Main();
}
