// A toy transformer encoder layer over a padded batch of two "sentences", with its attention in
// kernels attnc compiled ahead of time (CMakeLists.txt: attnc_add_kernel). Runs
//
//   x → LayerNorm(x + W_O · attention(x W_Q, x W_K, x W_V; padding)) → y
//   y → causal grouped-query attention(y W_Q, y W_K', y W_V')
//
// and checks each kernel's output against a plain f64 attention written here: exit 0 when
// every output is within 1e-4, 1 otherwise, 2 when a kernel cannot run (ATTNC_TARGET naming a
// target it lacks, say). Needs no compiler, LLVM, Halide or Python at run
// time: the kernels are in the executable, and libattnc_runtime runs them.
#include <causal_gqa_attention.h>
#include <encoder_self_attention.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <string_view>
#include <vector>

namespace {

constexpr int64_t kBatch = 2, kTokens = 37, kHeads = 4, kKvHeads = 2, kHeadDim = 32;
constexpr int64_t kModel = kHeads * kHeadDim;

using Matrix = std::vector<float>; // row-major

Matrix random(size_t size, float scale, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, scale);
  Matrix m(size);
  for (float& v : m)
    v = normal(rng);
  return m;
}

// [rows, in] · [in, out] → [rows, out].
Matrix matmul(const Matrix& a, const Matrix& w, int64_t rows, int64_t in, int64_t out) {
  Matrix c(rows * out, 0.0f);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < in; ++i)
      for (int64_t o = 0; o < out; ++o)
        c[r * out + o] += a[r * in + i] * w[i * out + o];
  return c;
}

void addLayerNorm(Matrix& x, const Matrix& residual, int64_t rows, int64_t width) {
  for (int64_t r = 0; r < rows; ++r) {
    float* row = &x[r * width];
    double mean = 0, var = 0;
    for (int64_t c = 0; c < width; ++c)
      mean += row[c] += residual[r * width + c];
    mean /= width;
    for (int64_t c = 0; c < width; ++c)
      var += (row[c] - mean) * (row[c] - mean);
    const double inv = 1.0 / std::sqrt(var / width + 1e-5);
    for (int64_t c = 0; c < width; ++c)
      row[c] = static_cast<float>((row[c] - mean) * inv);
  }
}

// softmax(q kᵀ / √d) v in f64 over [B, T, heads, d] tensors, query head h reading key/value
// head h / (heads / kvHeads); key j is visible to query i when j < length and, if causal,
// j ≤ i. A row with no visible key is zero. Returns the largest |difference| from `got`.
double checkAttention(const Matrix& q, const Matrix& k, const Matrix& v, const Matrix& got,
                      int64_t kvHeads, const std::vector<int32_t>& lengths, bool causal) {
  double worst = 0;
  const double scale = 1.0 / std::sqrt(static_cast<double>(kHeadDim));
  for (int64_t b = 0; b < kBatch; ++b)
    for (int64_t h = 0; h < kHeads; ++h)
      for (int64_t i = 0; i < kTokens; ++i) {
        const int64_t kv = h / (kHeads / kvHeads);
        auto at = [&](const Matrix& t, int64_t heads, int64_t head, int64_t pos) {
          return &t[((b * kTokens + pos) * heads + head) * kHeadDim];
        };
        std::vector<double> score;
        std::vector<int64_t> keys;
        for (int64_t j = 0; j < kTokens; ++j) {
          if (j >= lengths[b] || (causal && j > i))
            continue;
          double s = 0;
          for (int64_t e = 0; e < kHeadDim; ++e)
            s += at(q, kHeads, h, i)[e] * at(k, kvHeads, kv, j)[e];
          score.push_back(s * scale);
          keys.push_back(j);
        }
        const double top = score.empty() ? 0 : *std::max_element(score.begin(), score.end());
        double sum = 0;
        for (double& s : score)
          sum += s = std::exp(s - top);
        for (int64_t e = 0; e < kHeadDim; ++e) {
          double o = 0;
          for (size_t n = 0; n < keys.size(); ++n)
            o += score[n] / sum * at(v, kvHeads, kv, keys[n])[e];
          worst = std::max(worst, std::abs(o - at(got, kHeads, h, i)[e]));
        }
      }
  return worst;
}

} // namespace

// x · W for a random W [kModel, heads · kHeadDim]: each token projected onto `heads` heads.
Matrix project(const Matrix& x, int64_t heads, std::mt19937& rng) {
  const float scale = 1.0f / std::sqrt(static_cast<float>(kModel));
  return matmul(x, random(kModel * heads * kHeadDim, scale, rng), kBatch * kTokens, kModel,
                heads * kHeadDim);
}

// A projection seen as the kernels' [B, T, heads, d] tensor (layout=bshd).
attnc::runtime::TensorView headsOf(Matrix& m, int64_t heads) {
  return attnc::runtime::TensorView(m.data(), {kBatch, kTokens, heads, kHeadDim});
}

void printTarget(const char* kernel, std::string_view choice) {
  std::printf("%s runs %.*s\n", kernel, static_cast<int>(choice.size()), choice.data());
}

int run() {
  std::mt19937 rng(7);
  Matrix x = random(kBatch * kTokens * kModel, 1.0f, rng);
  std::vector<int32_t> lengths = {kTokens, 23}; // the second sentence is padded after 23 tokens

  // Encoder self-attention over the padded batch.
  attnc::kernels::encoder_self_attention selfAttention;
  printTarget("encoder_self_attention", selfAttention.target_choice());
  Matrix q = project(x, kHeads, rng), k = project(x, kHeads, rng), v = project(x, kHeads, rng);
  Matrix o(q.size());
  auto qv = headsOf(q, kHeads), kv = headsOf(k, kHeads), vv = headsOf(v, kHeads);
  auto ov = headsOf(o, kHeads);
  attnc::runtime::TensorView lv(lengths.data(), {kBatch});
  selfAttention(qv, kv, vv, lv, ov); // in the order of the header's argument list
  const double selfError = checkAttention(q, k, v, o, kHeads, lengths, /*causal=*/false);

  // The rest of the layer: output projection, residual, layer norm.
  Matrix y = project(o, kHeads, rng);
  addLayerNorm(y, x, kBatch * kTokens, kModel);

  // A causal pass over the layer's output with grouped-query attention.
  attnc::kernels::causal_gqa_attention causal;
  printTarget("causal_gqa_attention", causal.target_choice());
  Matrix cq = project(y, kHeads, rng), ck = project(y, kKvHeads, rng),
         cv = project(y, kKvHeads, rng);
  Matrix co(cq.size());
  auto cqv = headsOf(cq, kHeads), ckv = headsOf(ck, kKvHeads), cvv = headsOf(cv, kKvHeads);
  auto cov = headsOf(co, kHeads);
  causal.run({.q = &cqv.tensor(), .k = &ckv.tensor(), .v = &cvv.tensor(), .o = &cov.tensor()});
  const std::vector<int32_t> unpadded = {kTokens, kTokens};
  const double causalError = checkAttention(cq, ck, cv, co, kKvHeads, unpadded, /*causal=*/true);

  const bool ok = selfError < 1e-4 && causalError < 1e-4;
  std::printf("encoder_self_attention max |error| vs f64: %.3g\n"
              "causal_gqa_attention   max |error| vs f64: %.3g\n%s\n",
              selfError, causalError, ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}

int main() {
  try {
    return run();
  } catch (const attnc::runtime::Error& e) { // a kernel that cannot run here, a bad tensor
    std::fprintf(stderr, "encoder_layer: %s\n", e.what());
    return 2;
  }
}
