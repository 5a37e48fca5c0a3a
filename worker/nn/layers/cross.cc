// DCN's cross network: num_layers layers on x0, each
//   v2: x_{l+1} = x0 * (x_l W_l + b_l) + x_l (W_l = down_l up_l when low rank)
//   v1: x_{l+1} = x0 * (x_l w_l) + b_l + x_l
#include "worker/nn/layers/layers.h"

namespace tessera {
namespace {

class CrossLayerImpl final : public Layer {
 public:
  CrossLayerImpl(const LayerSpec& spec, Backend* backend)
      : v1_(spec.def->cross().version() == CrossLayer::V1),
        rank_(spec.def->cross().projection_dim()),
        layers_(spec.def->cross().num_layers()),
        d_(spec.output[0]),
        params_(spec.params),
        backend_(backend) {}

  void Forward(const StepContext& ctx, absl::Span<const float* const> inputs,
               float* output) override {
    Reserve(ctx.batch);
    Backend* be = ctx.backend;
    const int64_t b = ctx.batch, n = b * d_;
    const float* x0 = inputs[0];
    for (int l = 0; l < layers_; ++l) {
      const float* xl = l == 0 ? x0 : xs_[l].data();
      float* next = l + 1 == layers_ ? output : xs_[l + 1].data();
      if (v1_) {
        be->Gemm(false, false, b, 1, d_, 1.0f, xl, Value(l, 0), 0.0f,
                 us_[l].data());
        be->ScaleRows(b, d_, x0, us_[l].data(), 0.0f, next);
        be->AddBias(Value(l, 1), b, d_, next);
      } else {
        if (rank_ > 0) {
          be->Gemm(false, false, b, rank_, d_, 1.0f, xl, Value(l, 0), 0.0f,
                   hs_[l].data());
          be->Gemm(false, false, b, d_, rank_, 1.0f, hs_[l].data(), Value(l, 1),
                   0.0f, us_[l].data());
        } else {
          be->Gemm(false, false, b, d_, d_, 1.0f, xl, Value(l, 0), 0.0f,
                   us_[l].data());
        }
        be->AddBias(Bias(l), b, d_, us_[l].data());
        be->Mul(n, x0, us_[l].data(), 0.0f, next);
      }
      be->Axpby(n, 1.0f, xl, 1.0f, next);
    }
  }

  void Backward(const StepContext& ctx, absl::Span<const float* const> inputs,
                const float* output, const float* doutput,
                absl::Span<float* const> dinputs) override {
    Backend* be = ctx.backend;
    const int64_t b = ctx.batch, n = b * d_;
    const float* x0 = inputs[0];
    // g: the gradient of x_{l+1}; dx0 sums what x0's every use receives.
    be->CopyOnDevice(doutput, g_.data(), n * sizeof(float));
    be->Fill(n, 0.0f, dx0_.data());
    for (int l = layers_ - 1; l >= 0; --l) {
      const float* xl = l == 0 ? x0 : xs_[l].data();
      if (v1_) {
        be->BiasGrad(g_.data(), b, d_, Grad(l, 1));
        be->RowDot(b, d_, g_.data(), x0, ds_.data());
        be->ScaleRows(b, d_, g_.data(), us_[l].data(), 1.0f, dx0_.data());
        be->Gemm(true, false, d_, 1, b, 1.0f, xl, ds_.data(), 0.0f, Grad(l, 0));
        // g becomes dx_l: the residual plus the path through w_l.
        be->Gemm(false, true, b, d_, 1, 1.0f, ds_.data(), Value(l, 0), 1.0f,
                 g_.data());
      } else {
        be->Mul(n, g_.data(), x0, 0.0f, du_.data());
        be->Mul(n, g_.data(), us_[l].data(), 1.0f, dx0_.data());
        be->BiasGrad(du_.data(), b, d_, BiasGrad(l));
        if (rank_ > 0) {
          be->Gemm(true, false, rank_, d_, b, 1.0f, hs_[l].data(), du_.data(),
                   0.0f, Grad(l, 1));
          be->Gemm(false, true, b, rank_, d_, 1.0f, du_.data(), Value(l, 1),
                   0.0f, dh_.data());
          be->Gemm(true, false, d_, rank_, b, 1.0f, xl, dh_.data(), 0.0f,
                   Grad(l, 0));
          be->Gemm(false, true, b, d_, rank_, 1.0f, dh_.data(), Value(l, 0),
                   1.0f, g_.data());
        } else {
          be->Gemm(true, false, d_, d_, b, 1.0f, xl, du_.data(), 0.0f,
                   Grad(l, 0));
          be->Gemm(false, true, b, d_, d_, 1.0f, du_.data(), Value(l, 0), 1.0f,
                   g_.data());
        }
      }
    }
    if (dinputs[0] != nullptr) {
      be->CopyOnDevice(g_.data(), dinputs[0], n * sizeof(float));
      be->Axpby(n, 1.0f, dx0_.data(), 1.0f, dinputs[0]);
    }
  }

 private:
  // Variables per cross layer, in LayerVariables order.
  int per_layer() const { return !v1_ && rank_ > 0 ? 3 : 2; }
  float* Value(int l, int k) { return params_.values[l * per_layer() + k]; }
  float* Grad(int l, int k) { return params_.grads[l * per_layer() + k]; }
  float* Bias(int l) { return Value(l, per_layer() - 1); }
  float* BiasGrad(int l) { return Grad(l, per_layer() - 1); }

  void Reserve(int64_t batch) {
    if (batch <= capacity_) return;
    capacity_ = batch;
    xs_.clear();
    us_.clear();
    hs_.clear();
    for (int l = 0; l < layers_; ++l) {
      xs_.emplace_back(backend_, batch * d_);
      us_.emplace_back(backend_, batch * (v1_ ? 1 : d_));
      if (rank_ > 0) hs_.emplace_back(backend_, batch * rank_);
    }
    g_ = DeviceArray<float>(backend_, batch * d_);
    dx0_ = DeviceArray<float>(backend_, batch * d_);
    du_ = DeviceArray<float>(backend_, batch * d_);
    ds_ = DeviceArray<float>(backend_, batch);
    if (rank_ > 0) dh_ = DeviceArray<float>(backend_, batch * rank_);
  }

  const bool v1_;
  const int64_t rank_;
  const int layers_;
  const int64_t d_;
  const LayerParams params_;
  Backend* const backend_;
  int64_t capacity_ = 0;
  // Per cross layer: its input x_l (x_0 is the layer's input), u_l (the
  // v2 product plus bias, or v1's per-row scalar) and the low-rank h_l.
  std::vector<DeviceArray<float>> xs_, us_, hs_;
  DeviceArray<float> g_, dx0_, du_, ds_, dh_;
};

}  // namespace

std::unique_ptr<Layer> NewCrossLayer(const LayerSpec& spec, Backend* backend) {
  return std::make_unique<CrossLayerImpl>(spec, backend);
}

}  // namespace tessera
