#ifndef TESSERA_WORKER_BACKEND_BACKEND_H_
#define TESSERA_WORKER_BACKEND_BACKEND_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "worker/backend/host_memory.h"

namespace tessera {

// The compute a model needs, on one device. The CPU backend and the CUDA
// backend implement it and are tested against each other. Pointers passed
// to the ops are device pointers from Allocate; matrices are row-major.
//
// Ops are queued in order on the device and may return before they finish
// (the CUDA backend runs them on one stream); CopyToHost, the ops that
// return a value, and Synchronize wait for everything queued before them.
// A backend without errors of its own (the CPU) never fails; a device
// error (a launch failure, memory) is kept, later ops do nothing, and
// Synchronize returns it.
//
// Host memory from the backend's own AllocateHost (HostAllocator) is what
// the device copies best: pinned on the CUDA backend, where CopyToDevice
// from it only queues the copy (see CopyToDevice).
//
// Thread safety: a backend is used by one thread at a time, except that
// one other thread may call Upload (see Uploads below).
class Backend : public HostAllocator {
 public:
  ~Backend() override = default;

  // A human-readable name of the device, e.g. "cpu" or "cuda:0 (H100)".
  virtual std::string device_name() const = 0;

  // Whether device memory is host memory the caller may read and write
  // directly (the CPU), so a buffer can serve as both; a copy between a
  // buffer and itself is then nothing.
  virtual bool device_is_host() const { return false; }

  virtual void* AllocateBytes(int64_t bytes) = 0;
  virtual void FreeBytes(void* ptr) = 0;
  // Returns once `host` may change again: at once for ordinary memory,
  // which the CUDA backend stages; but memory from this backend's
  // AllocateHost is read by the device as the queue reaches the copy, so
  // it must not change until the next Synchronize (or CopyToHost, or an op
  // that returns a value).
  virtual void CopyToDevice(const void* host, void* device, int64_t bytes) = 0;
  virtual void CopyToHost(const void* device, void* host, int64_t bytes) = 0;
  virtual void CopyOnDevice(const void* from, void* to, int64_t bytes) = 0;

  // Waits for every queued op; returns the first device error since the
  // backend was made (and keeps returning it).
  virtual absl::Status Synchronize() { return absl::OkStatus(); }

  // The first device error so far, as Synchronize would return it, but
  // without waiting: an op still queued may fail later.
  virtual absl::Status status() const { return absl::OkStatus(); }

  // Host memory for data that travels to and from the device (pulled
  // parameters, gradients): pinned on the CUDA backend (plain memory
  // where pinning fails), plain 64-byte aligned memory here and on the
  // CPU. Safe to call after a device error.
  void* AllocateHost(int64_t bytes) override {
    return AllocatePlainHost(bytes);
  }
  void FreeHost(void* ptr) override { FreePlainHost(ptr); }

  // ---- Uploads beside the ops. One other thread (the worker's prefetching
  // thread) may copy host memory to the device with Upload while this
  // backend's thread queues ops. The CUDA backend runs those copies on a
  // stream of their own, so the copy of the next step's parameters
  // overlaps this step's kernels; the CPU copies at once. The ops' thread
  // orders the two queues: AwaitUploads makes the ops queued after it wait
  // for the uploads made before it; ReleaseUploads makes the uploads made
  // after it wait for the ops queued before it, so an upload may overwrite
  // device memory those ops read. The caller orders the two threads' calls
  // (the worker starts a prefetch after ReleaseUploads and joins it before
  // AwaitUploads).

  // Copies `bytes` of `host` to `device` and returns at once. `host` (best
  // from AllocateHost: pinned, so the copy is a DMA) must not change until
  // an op queued after the next AwaitUploads has been waited for
  // (Synchronize, CopyToHost). A failure becomes a device error at the
  // next AwaitUploads, naming the upload. Nothing is copied after a device
  // error. The default copies at once with CopyToDevice, for backends
  // whose CopyToDevice is a memcpy safe on any thread (the CPU).
  virtual void Upload(const void* host, void* device, int64_t bytes) {
    CopyToDevice(host, device, bytes);
  }
  virtual void AwaitUploads() {}
  virtual void ReleaseUploads() {}

  // The queue the ops run on, for work outside the backend that must be
  // ordered after them without the host waiting (the NCCL all-reduce of
  // gradients, benchmark timers): the CUDA backend's cudaStream_t; null on
  // the CPU, whose ops have finished when they return.
  virtual void* native_stream() const { return nullptr; }

  // C[m,n] = alpha * op(A) * op(B) + beta * C, where op(A) is [m,k] and
  // op(B) is [k,n]; op transposes when the flag is set.
  virtual void Gemm(bool transpose_a, bool transpose_b, int64_t m, int64_t n,
                    int64_t k, float alpha, const float* a, const float* b,
                    float beta, float* c) = 0;

  // x[r, c] += bias[c] for a [rows, cols] matrix.
  virtual void AddBias(const float* bias, int64_t rows, int64_t cols,
                       float* x) = 0;

  // dbias[c] = sum over r of dy[r, c].
  virtual void BiasGrad(const float* dy, int64_t rows, int64_t cols,
                        float* dbias) = 0;

  // In place: x = max(x, 0).
  virtual void Relu(int64_t n, float* x) = 0;

  // In place: dy = 0 where the ReLU's output y was 0.
  virtual void ReluGrad(const float* y, int64_t n, float* dy) = 0;

  // In place: inverted dropout, x = keep ? x / (1 - rate) : 0, where keep
  // for element i is CounterUniform(seed, i) >= rate. The same call on the
  // gradient is the backward pass, so no mask is stored.
  virtual void Dropout(uint64_t seed, float rate, int64_t n, float* x) = 0;

  // Softmax cross-entropy of [rows, classes] logits against labels in
  // [0, classes). Returns the summed loss over rows; counts rows whose
  // arg-max equals the label in *correct (if not null); writes the
  // gradient of the mean loss into dlogits (if not null).
  virtual double SoftmaxCrossEntropy(const float* logits, const int32_t* labels,
                                     int64_t rows, int64_t classes,
                                     float* dlogits, int64_t* correct) = 0;

  // Sigmoid cross-entropy of [rows, cols] logits z against targets t in
  // [0, 1] (multi-label): per element max(z, 0) - z * t + log1p(exp(-|z|)).
  // Returns the sum over all elements; writes the gradient of that sum
  // divided by rows, (sigmoid(z) - t) / rows, into dlogits (if not null).
  virtual double SigmoidCrossEntropy(const float* logits, const float* targets,
                                     int64_t rows, int64_t cols,
                                     float* dlogits) = 0;

  // Embedding bags, CSR style: bag b holds ids[offsets[b] .. offsets[b+1]),
  // offsets has bags + 1 entries starting at 0, every id is a row of
  // `table` ([*, dim]). out[b * stride + c] (c < dim, stride >= dim) is
  // the sum (or the mean) of its rows, in id order; an empty bag gives
  // zeros. A stride above dim writes one field's column of an [n, dim]
  // per-example output, leaving the other fields' columns alone.
  enum class Combiner { kSum, kMean };
  virtual void EmbeddingBagForward(const float* table, int64_t dim,
                                   const int64_t* offsets, const int64_t* ids,
                                   int64_t bags, Combiner combiner, float* out,
                                   int64_t stride) = 0;

  // The backward pass of EmbeddingBagForward, one row per id occurrence:
  // drows[j, :] = dout[b * stride + :dim] (sum) or that / |bag b| (mean),
  // where occurrence j (offsets[b] <= j < offsets[b+1]) is in bag b. drows
  // has offsets[bags] rows; ReduceSparseGrad turns it into a sparse
  // gradient.
  virtual void EmbeddingBagBackward(const float* dout, int64_t dim,
                                    const int64_t* offsets, int64_t bags,
                                    Combiner combiner, float* drows,
                                    int64_t stride) = 0;

  // Deduplicates a sparse gradient: n ids with one row of `dim` each
  // become the distinct ids in ascending order (unique_ids) and, per
  // distinct id, the sum of its rows taken in their original order
  // (summed_rows). Both outputs need room for n entries; returns how many
  // distinct ids there are.
  virtual int64_t ReduceSparseGrad(const int64_t* ids, const float* rows,
                                   int64_t n, int64_t dim, int64_t* unique_ids,
                                   float* summed_rows) = 0;

  // ---- Ops of the layer library (worker/nn). Unless a comment says
  // otherwise an output may not alias an input, and every op writes its
  // outputs (it never adds to them) except where a `beta` says so; a beta
  // of 0 never reads the output, so it may hold anything (even NaN).

  // x[i] = value for i < n.
  virtual void Fill(int64_t n, float value, float* x) = 0;

  // y = alpha * x + beta * y, elementwise over n floats; beta 0 never
  // reads y.
  virtual void Axpby(int64_t n, float alpha, const float* x, float beta,
                     float* y) = 0;

  // out = a * b + beta * out, elementwise over n floats; beta 0 never
  // reads out, and then out may alias a or b.
  virtual void Mul(int64_t n, const float* a, const float* b, float beta,
                   float* out) = 0;

  // Elementwise activations other than ReLU's in-place pair above.
  enum class Unary { kRelu, kSigmoid, kTanh };
  // y = f(x); y may alias x.
  virtual void UnaryForward(Unary kind, int64_t n, const float* x,
                            float* y) = 0;
  // dx = dy * f'(x), with f' written through the forward output y (relu:
  // y > 0; sigmoid: y (1 - y); tanh: 1 - y^2); dx may alias dy.
  virtual void UnaryBackward(Unary kind, int64_t n, const float* y,
                             const float* dy, float* dx) = 0;

  // Softmax of each row of a [rows, cols] matrix (max subtracted first);
  // y may alias x.
  virtual void SoftmaxForward(int64_t rows, int64_t cols, const float* x,
                              float* y) = 0;
  // dx[r, c] = y[r, c] * (dy[r, c] - sum over c' of dy[r, c'] y[r, c']);
  // dx may alias dy.
  virtual void SoftmaxBackward(int64_t rows, int64_t cols, const float* y,
                               const float* dy, float* dx) = 0;

  // Keras' mean squared error of [rows, cols] predictions: per row the
  // mean over cols of (pred - target)^2. Returns the sum of those over the
  // rows; writes the gradient of their mean over rows, 2 (pred - target) /
  // (rows * cols), into dpred (if not null).
  virtual double MeanSquaredError(const float* pred, const float* target,
                                  int64_t rows, int64_t cols, float* dpred) = 0;

  // dst[r * dst_stride + c] = src[r * src_stride + c] + beta * (the same
  // element of dst) for r < rows, c < cols: copies a block of columns
  // between matrices of different widths (Concat and its backward).
  virtual void Copy2D(int64_t rows, int64_t cols, const float* src,
                      int64_t src_stride, float* dst, int64_t dst_stride,
                      float beta) = 0;

  // Gemm for i < batch: C_i = alpha * op(A_i) * op(B_i) + beta * C_i with
  // A_i = a + i * stride_a (likewise B_i, C_i), all row-major as Gemm.
  virtual void BatchedGemm(bool transpose_a, bool transpose_b, int64_t m,
                           int64_t n, int64_t k, float alpha, const float* a,
                           int64_t stride_a, const float* b, int64_t stride_b,
                           float beta, float* c, int64_t stride_c,
                           int64_t batch) = 0;

  // y[r, j] = x[r, index[j]] for a [rows, in_cols] x and j < n; index is a
  // device array of n values in [0, in_cols).
  virtual void GatherColumns(int64_t rows, int64_t in_cols, const float* x,
                             int64_t n, const int32_t* index, float* y) = 0;
  // The backward of GatherColumns: dx = 0, then dx[r, index[j]] += dy[r,
  // j]; dx is [rows, out_cols].
  virtual void ScatterColumns(int64_t rows, int64_t n, const float* dy,
                              const int32_t* index, int64_t out_cols,
                              float* dx) = 0;

  // y[r, c] = x[r, c] * s[r] + beta * y[r, c] for a [rows, cols] x.
  virtual void ScaleRows(int64_t rows, int64_t cols, const float* x,
                         const float* s, float beta, float* y) = 0;
  // out[r] = sum over c of a[r, c] * b[r, c].
  virtual void RowDot(int64_t rows, int64_t cols, const float* a,
                      const float* b, float* out) = 0;

  // The geometry of a 2-D window op on NHWC tensors: the input is [batch,
  // height, width, channels], the window kernel_h x kernel_w moves by the
  // strides, the input is padded by pad_top / pad_left (and whatever the
  // output size needs at the bottom and right), the output is [batch,
  // out_h, out_w, *].
  struct Window2D {
    int64_t batch = 0, height = 0, width = 0, channels = 0;
    int64_t kernel_h = 0, kernel_w = 0, stride_h = 1, stride_w = 1;
    int64_t pad_top = 0, pad_left = 0, out_h = 0, out_w = 0;
  };
  // cols[(n, oh, ow), (i, j, c)] = x[n, oh * stride_h + i - pad_top, ow *
  // stride_w + j - pad_left, c], 0 where that is outside the input: a
  // [batch * out_h * out_w, kernel_h * kernel_w * channels] matrix whose
  // columns follow Keras' kernel layout [kernel_h, kernel_w, channels, *].
  virtual void Im2Col(const Window2D& g, const float* x, float* cols) = 0;
  // The backward of Im2Col: dx = the sum of every patch entry's gradient
  // at the input element it was copied from (padding dropped).
  virtual void Col2Im(const Window2D& g, const float* cols, float* dx) = 0;
  // Max pooling (out channels = channels); a padded position never wins,
  // and a window that lies wholly in the padding gives 0 with argmax -1.
  // argmax[o] is the flat index into x of output o's maximum (the first
  // one in window order), for the backward.
  virtual void MaxPoolForward(const Window2D& g, const float* x, float* y,
                              int64_t* argmax) = 0;
  // dx = 0, then dx[argmax[o]] += dy[o].
  virtual void MaxPoolBackward(const Window2D& g, const float* dy,
                               const int64_t* argmax, float* dx) = 0;

  // Per column c of a [rows, cols] x: mean[c] and the population variance
  // var[c] (divided by rows, as Keras' BatchNormalization in training).
  virtual void ColumnMoments(int64_t rows, int64_t cols, const float* x,
                             float* mean, float* var) = 0;
  // y[r, c] = (x[r, c] - mean[c]) / sqrt(var[c] + epsilon) * gamma[c] +
  // beta[c].
  virtual void BatchNormForward(int64_t rows, int64_t cols, const float* x,
                                const float* mean, const float* var,
                                const float* gamma, const float* beta,
                                float epsilon, float* y) = 0;
  // The training-mode backward of BatchNormForward where mean and var are
  // ColumnMoments(x): dx (through the moments too), dgamma and dbeta.
  virtual void BatchNormBackward(int64_t rows, int64_t cols, const float* x,
                                 const float* mean, const float* var,
                                 const float* gamma, float epsilon,
                                 const float* dy, float* dx, float* dgamma,
                                 float* dbeta) = 0;
  // Per row r of a [rows, cols] x: y[r, c] = (x[r, c] - mean[r]) * rstd[r]
  // * gamma[c] + beta[c], rstd[r] = 1 / sqrt(population var[r] + epsilon);
  // writes mean and rstd ([rows] each) for the backward. REQUIRES: cols >=
  // 1.
  virtual void LayerNormForward(int64_t rows, int64_t cols, const float* x,
                                const float* gamma, const float* beta,
                                float epsilon, float* y, float* mean,
                                float* rstd) = 0;
  // The backward of LayerNormForward: dx, dgamma and dbeta.
  virtual void LayerNormBackward(int64_t rows, int64_t cols, const float* x,
                                 const float* mean, const float* rstd,
                                 const float* gamma, const float* dy, float* dx,
                                 float* dgamma, float* dbeta) = 0;

  // The factorization machine's second-order term of x [batch, fields,
  // dim]: y[b, k] = 0.5 * ((sum over f of x[b, f, k])^2 - sum over f of
  // x[b, f, k]^2).
  virtual void FmOrder2Forward(int64_t batch, int64_t fields, int64_t dim,
                               const float* x, float* y) = 0;
  // dx[b, f, k] = dy[b, k] * (sum over f' of x[b, f', k] - x[b, f, k]).
  virtual void FmOrder2Backward(int64_t batch, int64_t fields, int64_t dim,
                                const float* x, const float* dy, float* dx) = 0;
};

// Owns `count` elements of T on a backend's device.
template <typename T>
class DeviceArray {
 public:
  DeviceArray() = default;
  DeviceArray(Backend* backend, int64_t count)
      : backend_(backend),
        count_(count),
        data_(static_cast<T*>(backend->AllocateBytes(count * sizeof(T)))) {}
  ~DeviceArray() { Reset(); }
  DeviceArray(DeviceArray&& other) noexcept { *this = std::move(other); }
  DeviceArray& operator=(DeviceArray&& other) noexcept {
    Reset();
    backend_ = other.backend_;
    count_ = other.count_;
    data_ = other.data_;
    other.data_ = nullptr;
    other.count_ = 0;
    return *this;
  }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;

  T* data() const { return data_; }
  int64_t size() const { return count_; }

 private:
  void Reset() {
    if (data_ != nullptr) backend_->FreeBytes(data_);
    data_ = nullptr;
  }

  Backend* backend_ = nullptr;
  int64_t count_ = 0;
  T* data_ = nullptr;
};

}  // namespace tessera

#endif  // TESSERA_WORKER_BACKEND_BACKEND_H_
