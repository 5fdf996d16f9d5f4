#include "UnfusedBaseline.h"

#include "Reference/Array4.h"

#include <algorithm>
#include <atomic>
#include <cblas.h>
#include <cmath>
#include <limits>
#include <thread>

namespace attnc::tools {
namespace {

// A head-major [B, heads, T, d] copy of a q/k/v tensor, as f32.
std::vector<float> headMajorF32(const Spec& spec, const HostTensor& t) {
  const auto& shape = t.shape();
  Array4 a(shape[0], shape[1], shape[2], shape[3]);
  a.data = t.values();
  if (spec.layout == Layout::Bshd)
    a = a.swapMiddle();
  return std::vector<float>(a.data.begin(), a.data.end());
}

} // namespace

std::optional<std::string> UnfusedBaseline::unsupported(const Spec& s) {
  if (s.variant != Variant::Sdpa)
    return "the unfused baseline covers variant=sdpa only";
  MaskSet covered;
  covered.add(MaskKind::Causal);
  covered.add(MaskKind::Padding);
  if ((s.masks.bits & ~covered.bits) != 0 || s.alibi || s.bias || s.softcap > 0 || s.rope ||
      s.dropout > 0)
    return "the unfused baseline covers no mask, causal and padding, without modifiers";
  return std::nullopt;
}

UnfusedBaseline::UnfusedBaseline(const Call& call)
    : spec_(call.spec), batch_(call.sizes[SizeSymbol::Batch]), seqQ_(call.sizes[SizeSymbol::SeqQ]),
      seqK_(call.sizes[SizeSymbol::SeqK]) {
  q_ = headMajorF32(spec_, call.tensor("q"));
  k_ = headMajorF32(spec_, call.tensor("k"));
  v_ = headMajorF32(spec_, call.tensor("v"));
  if (spec_.masks.has(MaskKind::Padding))
    for (double length : call.tensor("lengths").values())
      lengths_.push_back(std::clamp<int64_t>(static_cast<int64_t>(length), 0, seqK_));
  o_.assign(batch_ * spec_.heads * seqQ_ * spec_.dV, 0.0f);
}

void UnfusedBaseline::run(int threads) {
  // Heads run in parallel on our threads, each GEMM on one OpenBLAS thread: OpenBLAS's own
  // workers spin after each call and would steal cores from the interleaved kernel runs.
  openblas_set_num_threads(1);
  const Spec& s = spec_;
  const int64_t H = s.heads, dk = s.dK, dv = s.dV;
  const int64_t offset = s.causalAlign == CausalAlign::BottomRight ? seqK_ - seqQ_ : 0;
  const int64_t workers = std::max<int64_t>(1, std::min<int64_t>(threads, batch_ * H));
  scores_.resize(workers * seqQ_ * seqK_);
  std::atomic<int64_t> next{0};
  auto work = [&](int64_t worker) {
    float* scores = &scores_[worker * seqQ_ * seqK_];
    for (int64_t bh = next++; bh < batch_ * H; bh = next++) {
      const int64_t b = bh / H, h = bh % H, g = h / s.groupSize();
      const float* q = &q_[((b * H + h) * seqQ_) * dk];
      const float* k = &k_[((b * s.kvHeads + g) * seqK_) * dk];
      const float* v = &v_[((b * s.kvHeads + g) * seqK_) * dv];
      float* o = &o_[((b * H + h) * seqQ_) * dv];
      // S = scale Q K^T
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(seqQ_),
                  static_cast<int>(seqK_), static_cast<int>(dk), static_cast<float>(s.scale), q,
                  static_cast<int>(dk), k, static_cast<int>(dk), 0.0f, scores,
                  static_cast<int>(seqK_));
      // Masks, then P = softmax(S) row by row (a fully masked row stays 0).
      const int64_t valid = s.masks.has(MaskKind::Padding) ? lengths_[b] : seqK_;
      for (int64_t i = 0; i < seqQ_; ++i) {
        float* row = &scores[i * seqK_];
        int64_t end = valid;
        if (s.masks.has(MaskKind::Causal))
          end = std::clamp<int64_t>(i + offset + 1, 0, valid);
        float m = -std::numeric_limits<float>::infinity(), sum = 0;
        for (int64_t j = 0; j < end; ++j)
          m = std::max(m, row[j]);
        for (int64_t j = 0; j < end; ++j)
          sum += row[j] = std::exp(row[j] - m);
        for (int64_t j = 0; j < seqK_; ++j)
          row[j] = j < end ? row[j] / sum : 0.0f;
      }
      // O = P V
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(seqQ_),
                  static_cast<int>(dv), static_cast<int>(seqK_), 1.0f, scores,
                  static_cast<int>(seqK_), v, static_cast<int>(dv), 0.0f, o, static_cast<int>(dv));
    }
  };
  std::vector<std::thread> helpers;
  for (int64_t w = 1; w < workers; ++w)
    helpers.emplace_back(work, w);
  work(0);
  for (std::thread& t : helpers)
    t.join();
}

} // namespace attnc::tools
