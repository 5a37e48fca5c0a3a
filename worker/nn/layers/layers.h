#ifndef TESSERA_WORKER_NN_LAYERS_LAYERS_H_
#define TESSERA_WORKER_NN_LAYERS_LAYERS_H_

#include <memory>

#include "worker/nn/layer.h"

namespace tessera {

// One factory per layer file; CreateLayer (layer_factory.cc) picks by kind.
// REQUIRES: the spec's shapes were inferred by common/model for its kind.
std::unique_ptr<Layer> NewDenseLayer(const LayerSpec& spec, Backend* backend);
std::unique_ptr<Layer> NewActivationLayer(const LayerSpec& spec,
                                          Backend* backend);
std::unique_ptr<Layer> NewDropoutLayer(const LayerSpec& spec);
// Flatten and Reshape: the same bytes under another shape.
std::unique_ptr<Layer> NewReshapeLayer(const LayerSpec& spec);
std::unique_ptr<Layer> NewConv2DLayer(const LayerSpec& spec, Backend* backend);
std::unique_ptr<Layer> NewMaxPool2DLayer(const LayerSpec& spec,
                                         Backend* backend);
std::unique_ptr<Layer> NewConcatLayer(const LayerSpec& spec);
// Add (multiply false) and Multiply.
std::unique_ptr<Layer> NewElementwiseLayer(const LayerSpec& spec,
                                           bool multiply);
std::unique_ptr<Layer> NewFmOrder2Layer(const LayerSpec& spec,
                                        Backend* backend);
std::unique_ptr<Layer> NewDotInteractionLayer(const LayerSpec& spec,
                                              Backend* backend);
std::unique_ptr<Layer> NewCrossLayer(const LayerSpec& spec, Backend* backend);
std::unique_ptr<Layer> NewBatchNormLayer(const LayerSpec& spec,
                                         Backend* backend);
std::unique_ptr<Layer> NewLayerNormLayer(const LayerSpec& spec,
                                         Backend* backend);

// Applies `activation` to n values in place (forward), or turns dy into
// dx in place given the forward output y (backward). Softmax runs over
// rows of `cols`.
void ActivationForward(Backend* backend, Activation activation, int64_t rows,
                       int64_t cols, float* x);
void ActivationBackward(Backend* backend, Activation activation, int64_t rows,
                        int64_t cols, const float* y, const float* dy,
                        float* dx);

}  // namespace tessera

#endif  // TESSERA_WORKER_NN_LAYERS_LAYERS_H_
