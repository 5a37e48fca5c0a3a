#include "tools/local_train/local_trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>
#include <random>

#include "absl/strings/str_cat.h"
#include "common/binary_metrics.h"
#include "common/checkpoint/checkpoint_dir.h"
#include "common/counter_rng.h"
#include "common/model/model_graph.h"
#include "common/model/model_presets.h"
#include "common/model/model_support.h"
#include "common/model/variable_optimizer.h"
#include "common/model_spec.h"
#include "data/criteo/ctr_dataset.h"
#include "worker/data/batch_view.h"

namespace tessera {
namespace {

// Test examples evaluated per forward pass, so activations stay small.
constexpr int64_t kEvaluateSlice = 1024;

}  // namespace

absl::StatusOr<std::unique_ptr<LocalTrainer>> LocalTrainer::Create(
    const JobConfig& job, Backend* backend) {
  std::unique_ptr<LocalTrainer> t(new LocalTrainer());
  t->job_ = job;
  absl::StatusOr<ModelDef> model = JobModel(job);
  if (!model.ok()) return model.status();
  t->model_ = *std::move(model);
  absl::StatusOr<ModelGraph> described =
      BuildModelGraph(t->model_, job.schedule().seed());
  if (!described.ok()) return described.status();
  if (absl::Status s = CheckDataFits(t->model_, job.data().format()); !s.ok()) {
    return s;
  }
  absl::StatusOr<std::unique_ptr<Graph>> graph =
      Graph::Create(*described, backend);
  if (!graph.ok()) return graph.status();
  t->graph_ = *std::move(graph);
  for (bool train : {true, false}) {
    absl::StatusOr<int64_t> n = CountExamples(job.data(), train);
    if (!n.ok()) return n.status();
    absl::StatusOr<std::unique_ptr<ExampleSet>> set =
        LoadExamples(job.data(), t->model_, train, 0, *n);
    if (!set.ok()) return set.status();
    (train ? t->train_ : t->test_) = *std::move(set);
  }
  // Each variable gets the optimizer the coordinator would give it, and
  // its clipping (a moving statistic's rule has none).
  std::vector<const OptimizerConfig*> dense_optimizers, table_optimizers;
  std::vector<std::string> dense_names, table_names;
  for (const VariableDef& v : described->variables) {
    const OptimizerConfig& optimizer = VariableOptimizer(t->job_, v);
    absl::StatusOr<int> added = t->shards_.Add(v, optimizer);
    if (!added.ok()) return added.status();
    (v.sparse ? table_optimizers : dense_optimizers)
        .push_back(v.update_rule.has_value() ? nullptr : &optimizer);
    (v.sparse ? table_names : dense_names).push_back(v.name);
    if (v.sparse) {
      t->tables_.push_back(*added);
      t->vocab_.push_back(v.shape[0]);
    } else {
      t->dense_.push_back(*added);
      t->values_.emplace_back(NumElements(v.shape));
      t->grads_.emplace_back(NumElements(v.shape));
    }
  }
  dense_optimizers.insert(dense_optimizers.end(), table_optimizers.begin(),
                          table_optimizers.end());
  dense_names.insert(dense_names.end(), table_names.begin(), table_names.end());
  absl::StatusOr<GradientClipPlan> plan =
      GradientClipPlan::Create(dense_optimizers, dense_names);
  if (!plan.ok()) return plan.status();
  t->clip_plan_ = *std::move(plan);
  const size_t tables = t->tables_.size();
  t->unique_.resize(tables);
  t->positions_.resize(tables);
  t->rows_.resize(tables);
  return t;
}

absl::Status LocalTrainer::Pull(const HostBatch& batch) {
  for (size_t v = 0; v < dense_.size(); ++v) {
    shards_.ReadValues(dense_[v], absl::MakeSpan(values_[v]));
  }
  for (size_t t = 0; t < tables_.size(); ++t) {
    CollectTableIds(*graph_, batch, static_cast<int>(t), &ids_);
    LocalizeTableIds(vocab_[t], ids_, &unique_[t], &positions_[t]);
    if (absl::Status s = shards_.CheckIds(tables_[t], unique_[t]); !s.ok()) {
      return s;
    }
    rows_[t].resize(unique_[t].size() * shards_.row_elements(tables_[t]));
    shards_.ReadRows(tables_[t], unique_[t], rows_[t].data());
  }
  std::vector<absl::Span<const float>> values(values_.begin(), values_.end());
  return graph_->SetParameters(values);
}

absl::StatusOr<GraphResult> LocalTrainer::TrainBatch(const HostBatch& batch) {
  absl::StatusOr<GraphResult> r =
      Step(batch, DeriveSeed(job_.schedule().seed(), step_));
  if (r.ok()) {
    ++step_;
    last_step_loss_ = r->loss_sum / std::max<int64_t>(1, batch.size);
  }
  return r;
}

absl::Status LocalTrainer::WarmStart(const std::string& root) {
  absl::StatusOr<ValidCheckpoint> checkpoint =
      CheckpointDir(root).LatestValid();
  if (!checkpoint.ok()) {
    return absl::Status(checkpoint.status().code(),
                        absl::StrCat("checkpoint root ", root, ": ",
                                     checkpoint.status().message()));
  }
  if (absl::Status s = shards_.Restore(checkpoint->manifest, checkpoint->path);
      !s.ok()) {
    return absl::Status(s.code(), absl::StrCat("checkpoint ", checkpoint->path,
                                               ": ", s.message()));
  }
  return absl::OkStatus();
}

absl::StatusOr<GraphResult> LocalTrainer::Step(const HostBatch& batch,
                                               uint64_t seed) {
  if (absl::Status s = Pull(batch); !s.ok()) return s;
  std::vector<absl::Span<float>> grads(grads_.begin(), grads_.end());
  absl::StatusOr<GraphResult> result = graph_->TrainStep(
      ViewOf(batch, rows_, positions_), seed, grads, &table_grads_);
  if (!result.ok()) return result.status();
  // Clipped as a worker clips its step's gradients before the push.
  if (clip_plan_.any()) {
    clip_spans_.clear();
    for (std::vector<float>& g : grads_)
      clip_spans_.push_back(absl::MakeSpan(g));
    for (TableGradient& g : table_grads_) {
      clip_spans_.push_back(absl::MakeSpan(g.values));
    }
    clip_plan_.Clip(clip_spans_);
  }
  // A parameter server refuses a non-finite gradient; so does this.
  for (size_t v = 0; v < grads_.size(); ++v) {
    for (float g : grads_[v]) {
      if (!std::isfinite(g)) {
        return absl::InvalidArgumentError(
            absl::StrCat("step ", step_, ": the gradient of ",
                         graph_->dense_variables()[v].name,
                         " is not finite; nothing was applied"));
      }
    }
  }
  for (size_t v = 0; v < dense_.size(); ++v) {
    shards_.ApplyGradient(dense_[v], grads_[v]);
  }
  for (size_t t = 0; t < tables_.size(); ++t) {
    const TableGradient& g = table_grads_[t];
    push_ids_.resize(g.rows.size());
    for (size_t k = 0; k < g.rows.size(); ++k) {
      push_ids_[k] = unique_[t][g.rows[k]];
    }
    shards_.ApplyRows(tables_[t], push_ids_, g.values);
  }
  return result;
}

absl::Status LocalTrainer::Evaluate(LocalEpoch* epoch) {
  const bool binary =
      model_.label().kind() == LabelDef::BINARY && graph_->output_size() == 1;
  std::vector<float> predictions, probabilities, labels;
  std::vector<int64_t> indices;
  double loss = 0;
  int64_t correct = 0;
  for (int64_t at = 0; at < test_->size(); at += kEvaluateSlice) {
    const int64_t n = std::min(kEvaluateSlice, test_->size() - at);
    indices.resize(n);
    std::iota(indices.begin(), indices.end(), at);
    if (absl::Status s = test_->Gather(indices, &batch_); !s.ok()) return s;
    if (absl::Status s = Pull(batch_); !s.ok()) return s;
    absl::StatusOr<GraphResult> r = graph_->Evaluate(
        ViewOf(batch_, rows_, positions_), binary ? &predictions : nullptr);
    if (!r.ok()) return r.status();
    loss += r->loss_sum;
    correct += r->correct;
    if (binary) {
      probabilities.insert(probabilities.end(), predictions.begin(),
                           predictions.end());
      labels.insert(labels.end(), batch_.labels.begin(), batch_.labels.end());
    }
  }
  const int64_t n = std::max<int64_t>(1, test_->size());
  epoch->test_loss = loss / n;
  epoch->test_accuracy = static_cast<double>(correct) / n;
  if (binary && !probabilities.empty()) {
    absl::StatusOr<double> auc = RocAuc(probabilities, labels);
    if (auc.ok()) epoch->auc = *auc;
    absl::StatusOr<double> log_loss = LogLoss(probabilities, labels);
    if (log_loss.ok()) epoch->log_loss = *log_loss;
  }
  return absl::OkStatus();
}

std::vector<int64_t> LocalTrainer::Order(int epoch) const {
  std::vector<int64_t> order(train_->size());
  std::iota(order.begin(), order.end(), 0);
  std::mt19937_64 rng(DeriveSeed(job_.schedule().seed(), epoch));
  std::shuffle(order.begin(), order.end(), rng);
  return order;
}

absl::StatusOr<std::vector<double>> LocalTrainer::TrainSteps(int64_t steps) {
  const std::vector<int64_t> order = Order(1);
  const int64_t batch = std::max(1, job_.schedule().batch_size());
  std::vector<double> losses;
  for (int64_t at = 0;
       at < train_->size() && static_cast<int64_t>(losses.size()) < steps;
       at += batch) {
    const int64_t n = std::min(batch, train_->size() - at);
    if (absl::Status s =
            train_->Gather(absl::MakeConstSpan(order.data() + at, n), &batch_);
        !s.ok()) {
      return s;
    }
    absl::StatusOr<GraphResult> r =
        Step(batch_, DeriveSeed(job_.schedule().seed(), step_));
    if (!r.ok()) return r.status();
    ++step_;
    losses.push_back(r->loss_sum / n);
  }
  return losses;
}

std::vector<std::pair<std::string, std::vector<float>>>
LocalTrainer::DenseValues() const {
  std::vector<std::pair<std::string, std::vector<float>>> out;
  for (size_t v = 0; v < dense_.size(); ++v) {
    std::vector<float> values(shards_.num_elements(dense_[v]));
    shards_.ReadValues(dense_[v], absl::MakeSpan(values));
    out.emplace_back(graph_->dense_variables()[v].name, std::move(values));
  }
  return out;
}

absl::StatusOr<LocalEpoch> LocalTrainer::RunEpoch(
    int epoch, const std::function<void(int64_t, double)>& progress) {
  const auto start = std::chrono::steady_clock::now();
  const uint64_t seed = job_.schedule().seed();
  const std::vector<int64_t> order = Order(epoch);
  const int64_t batch = std::max(1, job_.schedule().batch_size());
  LocalEpoch out;
  out.epoch = epoch;
  double loss = 0;
  int64_t correct = 0;
  for (int64_t at = 0; at < train_->size(); at += batch) {
    const int64_t n = std::min(batch, train_->size() - at);
    if (absl::Status s =
            train_->Gather(absl::MakeConstSpan(order.data() + at, n), &batch_);
        !s.ok()) {
      return s;
    }
    absl::StatusOr<GraphResult> r = Step(batch_, DeriveSeed(seed, step_));
    if (!r.ok()) return r.status();
    ++step_;
    last_step_loss_ = r->loss_sum / n;
    loss += r->loss_sum;
    correct += r->correct;
    out.examples += n;
    if (progress) progress(out.examples, loss / out.examples);
  }
  out.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  const int64_t seen = std::max<int64_t>(1, out.examples);
  out.train_loss = loss / seen;
  out.train_accuracy = static_cast<double>(correct) / seen;
  if (absl::Status s = Evaluate(&out); !s.ok()) return s;
  return out;
}

absl::StatusOr<std::string> LocalTrainer::SaveCheckpoint(
    const std::string& root, int epoch) {
  return shards_.SaveCheckpoint(job_, root, step_, epoch + 1);
}

}  // namespace tessera
