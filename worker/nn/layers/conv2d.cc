// Conv2D on NHWC images as im2col + one GEMM with the kernel [kh * kw * c,
// filters] (Keras' [kh, kw, c, filters] read row-major).
#include "worker/nn/layers/layers.h"
#include "worker/nn/layers/window.h"

namespace tessera {
namespace {

class Conv2DLayerImpl final : public Layer {
 public:
  Conv2DLayerImpl(const LayerSpec& spec, Backend* backend)
      : p_(spec.def->conv2d()),
        window_(LayerWindow(spec.inputs[0].shape, p_.kernel_size(0),
                            p_.kernel_size(1), p_.strides(0), p_.strides(1),
                            p_.padding())),
        patch_(p_.kernel_size(0) * p_.kernel_size(1) * spec.inputs[0].shape[2]),
        kernel_(spec.params.values[0]),
        dkernel_(spec.params.grads[0]),
        bias_(spec.params.values.size() > 1 ? spec.params.values[1] : nullptr),
        dbias_(spec.params.grads.size() > 1 ? spec.params.grads[1] : nullptr),
        backend_(backend) {}

  void Forward(const StepContext& ctx, absl::Span<const float* const> inputs,
               float* output) override {
    Backend::Window2D g = window_;
    g.batch = ctx.batch;
    const int64_t rows = ctx.batch * g.out_h * g.out_w;
    Reserve(cols_, rows * patch_);
    ctx.backend->Im2Col(g, inputs[0], cols_.data());
    ctx.backend->Gemm(false, false, rows, p_.filters(), patch_, 1.0f,
                      cols_.data(), kernel_, 0.0f, output);
    if (bias_ != nullptr) {
      ctx.backend->AddBias(bias_, rows, p_.filters(), output);
    }
    ActivationForward(ctx.backend, p_.activation(), rows, p_.filters(), output);
  }

  void Backward(const StepContext& ctx, absl::Span<const float* const> inputs,
                const float* output, const float* doutput,
                absl::Span<float* const> dinputs) override {
    Backend::Window2D g = window_;
    g.batch = ctx.batch;
    const int64_t rows = ctx.batch * g.out_h * g.out_w;
    const int64_t f = p_.filters();
    const float* dz = doutput;
    if (p_.activation() != LINEAR) {
      Reserve(dz_, rows * f);
      ActivationBackward(ctx.backend, p_.activation(), rows, f, output, doutput,
                         dz_.data());
      dz = dz_.data();
    }
    ctx.backend->Gemm(true, false, patch_, f, rows, 1.0f, cols_.data(), dz,
                      0.0f, dkernel_);
    if (dbias_ != nullptr) ctx.backend->BiasGrad(dz, rows, f, dbias_);
    if (dinputs[0] != nullptr) {
      Reserve(dcols_, rows * patch_);
      ctx.backend->Gemm(false, true, rows, patch_, f, 1.0f, dz, kernel_, 0.0f,
                        dcols_.data());
      ctx.backend->Col2Im(g, dcols_.data(), dinputs[0]);
    }
  }

 private:
  void Reserve(DeviceArray<float>& a, int64_t n) {
    if (a.size() < n) a = DeviceArray<float>(backend_, n);
  }

  const Conv2DLayer p_;
  const Backend::Window2D window_;
  const int64_t patch_;
  float* const kernel_;
  float* const dkernel_;
  float* const bias_;
  float* const dbias_;
  Backend* const backend_;
  // The forward pass's patches, kept for the kernel's gradient.
  DeviceArray<float> cols_, dcols_, dz_;
};

}  // namespace

std::unique_ptr<Layer> NewConv2DLayer(const LayerSpec& spec, Backend* backend) {
  return std::make_unique<Conv2DLayerImpl>(spec, backend);
}

}  // namespace tessera
