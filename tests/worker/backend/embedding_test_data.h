#ifndef TESSERA_TESTS_WORKER_BACKEND_EMBEDDING_TEST_DATA_H_
#define TESSERA_TESTS_WORKER_BACKEND_EMBEDDING_TEST_DATA_H_

// Random embedding tables and multi-hot bags for the backends' embedding
// op tests, and host <-> device copies. (The layers built on these ops are
// tested through the layer graph, tests/worker/nn/.)

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "worker/backend/backend.h"

namespace tessera {

struct EmbeddingBagNet {
  int64_t vocab = 0, dim = 0, labels = 0;
  std::vector<float> table;   // [vocab, dim]
  std::vector<float> kernel;  // [dim, labels]
  std::vector<float> bias;    // [labels]
};

struct EmbeddingBagBatch {
  std::vector<int64_t> offsets;  // bags + 1
  std::vector<int64_t> ids;
  std::vector<float> targets;  // [bags, labels] in {0, 1}
  int64_t bags() const { return static_cast<int64_t>(offsets.size()) - 1; }
};

inline EmbeddingBagNet RandomEmbeddingBagNet(int64_t vocab, int64_t dim,
                                             int64_t labels, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> u(-0.5f, 0.5f);
  EmbeddingBagNet net{vocab, dim, labels, {}, {}, {}};
  net.table.resize(vocab * dim);
  net.kernel.resize(dim * labels);
  net.bias.resize(labels);
  for (float& x : net.table) x = u(gen);
  for (float& x : net.kernel) x = u(gen);
  for (float& x : net.bias) x = u(gen);
  return net;
}

// Bags of 0..max_ids ids (some empty, some with repeated ids).
inline EmbeddingBagBatch RandomEmbeddingBagBatch(const EmbeddingBagNet& net,
                                                 int64_t bags, int max_ids,
                                                 uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int64_t> id(0, net.vocab - 1);
  std::uniform_int_distribution<int> count(0, max_ids);
  std::bernoulli_distribution bit(0.3);
  EmbeddingBagBatch batch;
  batch.offsets.push_back(0);
  for (int64_t b = 0; b < bags; ++b) {
    const int n = count(gen);
    for (int i = 0; i < n; ++i) batch.ids.push_back(id(gen));
    batch.offsets.push_back(static_cast<int64_t>(batch.ids.size()));
    for (int64_t l = 0; l < net.labels; ++l) {
      batch.targets.push_back(bit(gen) ? 1.0f : 0.0f);
    }
  }
  return batch;
}

// Names the sum and mean instances of parameterized tests.
inline std::string CombinerName(
    const ::testing::TestParamInfo<Backend::Combiner>& info) {
  return info.param == Backend::Combiner::kSum ? "Sum" : "Mean";
}

template <typename T>
DeviceArray<T> ToDevice(Backend* backend, const std::vector<T>& host) {
  DeviceArray<T> a(backend, std::max<int64_t>(1, host.size()));
  backend->CopyToDevice(host.data(), a.data(), host.size() * sizeof(T));
  return a;
}

template <typename T>
std::vector<T> ToHost(Backend* backend, const DeviceArray<T>& a, int64_t n) {
  std::vector<T> host(n);
  backend->CopyToHost(a.data(), host.data(), n * sizeof(T));
  return host;
}

}  // namespace tessera

#endif  // TESSERA_TESTS_WORKER_BACKEND_EMBEDDING_TEST_DATA_H_
