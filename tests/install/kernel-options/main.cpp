// Runs the two kernels of CMakeLists.txt once on small inputs and prints what each runs.
#include <halide_tuned.h>
#include <mlir_scheduled.h>

#include <cmath>
#include <cstdio>
#include <vector>

int main() {
  constexpr int64_t kTokens = 19, kDim = 16;
  std::vector<float> q(2 * kTokens * kDim, 0.5f), kv(2 * kTokens * kDim, 0.25f);
  std::vector<float> o(q.size());
  attnc::runtime::TensorView qv(q.data(), {1, 2, kTokens, kDim});
  attnc::runtime::TensorView kv2(kv.data(), {1, 2, kTokens, kDim});
  attnc::runtime::TensorView kv1(kv.data(), {1, 1, kTokens, kDim});
  attnc::runtime::TensorView ov(o.data(), {1, 2, kTokens, kDim});
  attnc::kernels::mlir_scheduled scheduled;
  scheduled(qv, kv2, kv2, ov);
  // Every value is 0.25, so every output is 0.25 whatever the weights.
  for (float x : o)
    if (std::fabs(x - 0.25f) > 1e-6f)
      return 1;
  attnc::kernels::halide_tuned tuned;
  tuned(qv, kv1, kv1, ov);
  for (float x : o)
    if (std::fabs(x - 0.25f) > 1e-6f)
      return 1;
  std::printf("mlir_scheduled runs %s\nhalide_tuned runs %s\n",
              std::string(scheduled.target()).c_str(), std::string(tuned.target()).c_str());
  return 0;
}
