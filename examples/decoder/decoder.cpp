// A toy decoder-only transformer (one layer, random weights) serving a batch of prompts of
// different lengths from a paged KV cache, its attention in one kernel attnc compiled ahead of
// time (CMakeLists.txt: attnc_add_kernel, kv_cache=paged ragged_q=true). Each call packs every
// sequence's new query rows one after another (cu_seqlens_q marks where each sequence's rows
// start): prompts are prefilled in chunks of at most kChunk rows, and a sequence whose prompt is
// in the cache generates one token per call, greedily, so calls mix chunked prefills, decode
// steps and, once a sequence is full, sequences with no rows. The application owns the cache, as
// inference engines do: it takes pages from a shuffled free list as sequences grow and fills the
// block table and seq_lens; each call writes the step's keys and values (k_new, v_new) into the
// pages before attending (kv_append). Every attention call is checked against an f64 attention
// over each sequence's own keys, written here. Exit 0 when every call is within 1e-4, 1
// otherwise, 2 when the kernel cannot run here.
#include <paged_attention.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <random>
#include <vector>

namespace {

constexpr int64_t kHeads = 4, kKvHeads = 2, kHeadDim = 16, kModel = 64, kVocab = 61;
constexpr int64_t kPageSize = 16, kPagesPerSequence = 4, kPagePool = 23;
constexpr int64_t kCapacity = kPageSize * kPagesPerSequence; // Tk: keys a sequence can hold
constexpr int kSteps = 14;
constexpr int64_t kChunk = 24; // the most rows of one prompt a call prefills
const std::vector<int64_t> kPromptLengths = {5, 23, 1, 40};
const int64_t kBatch = static_cast<int64_t>(kPromptLengths.size());

using Matrix = std::vector<float>; // row-major

Matrix random(size_t size, float scale, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, scale);
  Matrix m(size);
  for (float& v : m)
    v = normal(rng);
  return m;
}

// The layer's weights: token embeddings, Q/K/V projections with grouped-query heads, the output
// projection and the head that scores the vocabulary.
struct Model {
  Matrix embedding, wq, wk, wv, wo, head;
  explicit Model(std::mt19937& rng)
      : embedding(random(kVocab * kModel, 1.0f, rng)),
        wq(random(kModel * kHeads * kHeadDim, 1.0f / std::sqrt(float(kModel)), rng)),
        wk(random(kModel * kKvHeads * kHeadDim, 1.0f / std::sqrt(float(kModel)), rng)),
        wv(random(kModel * kKvHeads * kHeadDim, 1.0f / std::sqrt(float(kModel)), rng)),
        wo(random(kHeads * kHeadDim * kModel, 1.0f / std::sqrt(float(kModel)), rng)),
        head(random(kModel * kVocab, 1.0f / std::sqrt(float(kModel)), rng)) {}

  // The token's embedding plus the sinusoidal encoding of its position.
  std::vector<float> input(int token, int64_t position) const {
    std::vector<float> x(embedding.begin() + token * kModel,
                         embedding.begin() + (token + 1) * kModel);
    for (int64_t m = 0; m < kModel; ++m) {
      const double angle = position / std::pow(10000.0, double(m / 2 * 2) / kModel);
      x[m] += static_cast<float>(m % 2 == 0 ? std::sin(angle) : std::cos(angle));
    }
    return x;
  }
};

// x [kModel] · W [kModel, width].
std::vector<float> times(const std::vector<float>& x, const Matrix& w, int64_t width) {
  std::vector<float> y(width, 0.0f);
  for (int64_t i = 0; i < kModel; ++i)
    for (int64_t o = 0; o < width; ++o)
      y[o] += x[i] * w[i * width + o];
  return y;
}

// The cache as the application keeps it: pages [kPagePool, kPageSize, kKvHeads, kHeadDim] for
// keys and values, each sequence's block table row, and its length.
struct PagedCache {
  Matrix keys = Matrix(kPagePool * kPageSize * kKvHeads * kHeadDim, 0.0f);
  Matrix values = Matrix(kPagePool * kPageSize * kKvHeads * kHeadDim, 0.0f);
  std::vector<int32_t> blockTable = std::vector<int32_t>(kBatch * kPagesPerSequence, -1);
  std::vector<int32_t> lengths = std::vector<int32_t>(kBatch, 0);
  std::vector<int32_t> freePages;

  explicit PagedCache(std::mt19937& rng) : freePages(kPagePool) {
    std::iota(freePages.begin(), freePages.end(), 0);
    std::shuffle(freePages.begin(), freePages.end(), rng);
  }

  // Makes room for position lengths[b] of sequence b, taking a page from the free list when the
  // position starts one; the next call writes its key and value there.
  void grow(int64_t b) {
    const int64_t position = lengths[b]++;
    int32_t& page = blockTable[b * kPagesPerSequence + position / kPageSize];
    if (page < 0) {
      page = freePages.back();
      freePages.pop_back();
    }
  }
};

// softmax(q kᵀ / √d) v in f64 for query row `q` [kHeads * kHeadDim] at `position` of a sequence
// whose keys and values so far are `keys`, `values` (a row [kKvHeads * kHeadDim] per position):
// causal, query head h reading key/value head h / (kHeads / kKvHeads). Returns the largest
// |difference| from `got` [kHeads * kHeadDim].
double checkRow(const std::vector<float>& q, const std::vector<std::vector<float>>& keys,
                const std::vector<std::vector<float>>& values, int64_t position, const float* got) {
  double worst = 0;
  const double scale = 1.0 / std::sqrt(static_cast<double>(kHeadDim));
  for (int64_t h = 0; h < kHeads; ++h) {
    const int64_t g = h / (kHeads / kKvHeads);
    std::vector<double> score(position + 1);
    for (int64_t j = 0; j <= position; ++j) {
      double s = 0;
      for (int64_t e = 0; e < kHeadDim; ++e)
        s += double(q[h * kHeadDim + e]) * keys[j][g * kHeadDim + e];
      score[j] = s * scale;
    }
    const double top = *std::max_element(score.begin(), score.end());
    double sum = 0;
    for (double& s : score)
      sum += s = std::exp(s - top);
    for (int64_t e = 0; e < kHeadDim; ++e) {
      double o = 0;
      for (int64_t j = 0; j <= position; ++j)
        o += score[j] / sum * values[j][g * kHeadDim + e];
      worst = std::max(worst, std::abs(o - got[h * kHeadDim + e]));
    }
  }
  return worst;
}

int run() {
  std::mt19937 rng(7);
  const Model model(rng);
  PagedCache cache(rng);
  attnc::kernels::paged_attention attention;
  std::printf("paged_attention runs %.*s\n", static_cast<int>(attention.target_choice().size()),
              attention.target_choice().data());

  // Each sequence's tokens, and its keys and values as the f64 check reads them.
  std::vector<std::vector<int>> tokens(kBatch);
  for (int64_t b = 0; b < kBatch; ++b)
    for (int64_t t = 0; t < kPromptLengths[b]; ++t)
      tokens[b].push_back(static_cast<int>(rng() % kVocab));
  std::vector<std::vector<std::vector<float>>> keys(kBatch), values(kBatch);

  double worst = 0;
  std::vector<int64_t> cached(kBatch, 0); // tokens[b][0, cached[b]) are in the cache
  for (int step = 0; step < kSteps; ++step) {
    // The call's rows: each sequence's tokens not yet in the cache, at most kChunk of them.
    std::vector<int32_t> offsets = {0};
    for (int64_t b = 0; b < kBatch; ++b)
      offsets.push_back(offsets.back() +
                        static_cast<int32_t>(std::min<int64_t>(
                            static_cast<int64_t>(tokens[b].size()) - cached[b], kChunk)));
    const int64_t rows = offsets.back();
    Matrix q(rows * kHeads * kHeadDim, 0.0f), o(q.size(), 0.0f);
    Matrix newKeys(rows * kKvHeads * kHeadDim), newValues(newKeys.size());
    for (int64_t b = 0; b < kBatch; ++b)
      for (int64_t row = offsets[b]; row < offsets[b + 1]; ++row) {
        const int64_t position = cached[b] + row - offsets[b];
        const std::vector<float> x = model.input(tokens[b][position], position);
        const std::vector<float> query = times(x, model.wq, kHeads * kHeadDim);
        std::copy(query.begin(), query.end(), q.begin() + row * kHeads * kHeadDim);
        keys[b].push_back(times(x, model.wk, kKvHeads * kHeadDim));
        values[b].push_back(times(x, model.wv, kKvHeads * kHeadDim));
        std::copy(keys[b].back().begin(), keys[b].back().end(),
                  newKeys.begin() + row * kKvHeads * kHeadDim);
        std::copy(values[b].back().begin(), values[b].back().end(),
                  newValues.begin() + row * kKvHeads * kHeadDim);
        cache.grow(b);
      }

    attnc::runtime::TensorView qv(q.data(), {rows, kHeads, kHeadDim});
    attnc::runtime::TensorView ov(o.data(), {rows, kHeads, kHeadDim});
    attnc::runtime::TensorView kp(cache.keys.data(), {kPagePool, kPageSize, kKvHeads, kHeadDim});
    attnc::runtime::TensorView vp(cache.values.data(), {kPagePool, kPageSize, kKvHeads, kHeadDim});
    attnc::runtime::TensorView kn(newKeys.data(), {rows, kKvHeads, kHeadDim});
    attnc::runtime::TensorView vn(newValues.data(), {rows, kKvHeads, kHeadDim});
    attnc::runtime::TensorView lengths(cache.lengths.data(), {kBatch});
    attnc::runtime::TensorView starts(offsets.data(), {kBatch + 1});
    attnc::runtime::TensorView table(cache.blockTable.data(), {kBatch, kPagesPerSequence});
    attention(qv, kp, vp, kn, vn, lengths, starts, table, ov);

    for (int64_t b = 0; b < kBatch; ++b) {
      for (int64_t row = offsets[b]; row < offsets[b + 1]; ++row) {
        const int64_t position = cached[b] + row - offsets[b];
        const std::vector<float> x = model.input(tokens[b][position], position);
        worst = std::max(worst, checkRow(times(x, model.wq, kHeads * kHeadDim), keys[b],
                                         values[b], position, &o[row * kHeads * kHeadDim]));
      }
      cached[b] += offsets[b + 1] - offsets[b];
      // Once its prompt is in, a sequence that got rows generates the next token: the last
      // row's attention output projected, plus the residual, scored against the vocabulary.
      if (offsets[b + 1] == offsets[b] || cached[b] < static_cast<int64_t>(tokens[b].size()) ||
          cached[b] == kCapacity)
        continue;
      const float* last = &o[(offsets[b + 1] - 1) * kHeads * kHeadDim];
      std::vector<float> hidden = model.input(tokens[b].back(), cached[b] - 1);
      for (int64_t m = 0; m < kModel; ++m)
        for (int64_t c = 0; c < kHeads * kHeadDim; ++c)
          hidden[m] += last[c] * model.wo[c * kModel + m];
      int best = 0;
      double bestLogit = -INFINITY;
      for (int token = 0; token < kVocab; ++token) {
        double logit = 0;
        for (int64_t m = 0; m < kModel; ++m)
          logit += hidden[m] * model.head[m * kVocab + token];
        if (logit > bestLogit) {
          bestLogit = logit;
          best = token;
        }
      }
      tokens[b].push_back(best);
    }
  }

  for (int64_t b = 0; b < kBatch; ++b) {
    std::printf("sequence %lld (prompt %lld):", static_cast<long long>(b),
                static_cast<long long>(kPromptLengths[b]));
    for (size_t t = kPromptLengths[b]; t < tokens[b].size(); ++t)
      std::printf(" %d", tokens[b][t]);
    std::printf("\n");
  }
  const bool ok = worst < 1e-4;
  std::printf("%d calls, paged_attention max |error| vs f64: %.3g\n%s\n", kSteps, worst,
              ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}

} // namespace

int main() {
  try {
    return run();
  } catch (const attnc::runtime::Error& e) { // a kernel that cannot run here, a bad tensor
    std::fprintf(stderr, "decoder: %s\n", e.what());
    return 2;
  }
}
