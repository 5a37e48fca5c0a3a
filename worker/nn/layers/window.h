#ifndef TESSERA_WORKER_NN_LAYERS_WINDOW_H_
#define TESSERA_WORKER_NN_LAYERS_WINDOW_H_

#include "common/model/layer_kinds.h"
#include "worker/backend/backend.h"

namespace tessera {

// The backend's window geometry of a Conv2D or MaxPool2D layer on an
// [h, w, c] input, with the same output size and padding rule as
// common/model's shape inference (TF's SAME and VALID).
// REQUIRES: the layer's shape was inferred, so the window fits.
inline Backend::Window2D LayerWindow(const Shape& in, int64_t kernel_h,
                                     int64_t kernel_w, int64_t stride_h,
                                     int64_t stride_w, Padding padding) {
  Backend::Window2D g;
  g.height = in[0];
  g.width = in[1];
  g.channels = in[2];
  g.kernel_h = kernel_h;
  g.kernel_w = kernel_w;
  g.stride_h = stride_h;
  g.stride_w = stride_w;
  const WindowAxis h = *WindowAlong(in[0], kernel_h, stride_h, padding);
  const WindowAxis w = *WindowAlong(in[1], kernel_w, stride_w, padding);
  g.out_h = h.out;
  g.out_w = w.out;
  g.pad_top = h.pad_before;
  g.pad_left = w.pad_before;
  return g;
}

}  // namespace tessera

#endif  // TESSERA_WORKER_NN_LAYERS_WINDOW_H_
