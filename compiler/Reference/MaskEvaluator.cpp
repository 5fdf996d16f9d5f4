#include "Reference/MaskEvaluator.h"

#include "Reference/HeadInputs.h"
#include "Semantics/Masks.h"
#include "Semantics/Positions.h"
#include "Semantics/Random.h"

#include <algorithm>

namespace attnc {

MaskEvaluator::MaskEvaluator(const KernelTensors& t)
    : spec_(t.spec()), seqQ_(t.seqQ()), seqK_(t.seqK()),
      offset_(positions::alignmentOffset(t.spec(), t.seqQ(), t.seqK())), expressions_(t) {
  const Spec& s = spec_;
  if (s.masks.has(MaskKind::Padding))
    lengths_ = keyLengths(t);
  if (s.masks.has(MaskKind::Tensor)) {
    const DLTensor& m = t.tensor("mask");
    maskTensor_ = t.dense("mask");
    maskHeadStride_ = m.shape[1] == 1 ? 0 : seqQ_ * seqK_;
    maskBatchStride_ = m.shape[0] == 1 ? 0 : m.shape[1] * seqQ_ * seqK_;
  }
  if (s.block > 0) {
    queryBlocks_ = (seqQ_ + s.block - 1) / s.block;
    keyBlocks_ = (seqK_ + s.block - 1) / s.block;
  }
  if (s.masks.has(MaskKind::BlockSparse)) {
    const DLTensor& layout = t.tensor("block_layout");
    blockLayout_ = t.dense("block_layout");
    layoutHeadStride_ = layout.shape[0] == 1 ? 0 : queryBlocks_ * keyBlocks_;
  }
  if (s.masks.has(MaskKind::BigBird)) {
    randomBlocks_.resize(s.heads * queryBlocks_ * s.randomBlocks);
    for (int64_t h = 0; h < s.heads; ++h)
      for (int64_t qb = 0; qb < queryBlocks_; ++qb)
        for (int64_t r = 0; r < s.randomBlocks; ++r)
          randomBlocks_[(h * queryBlocks_ + qb) * s.randomBlocks + r] =
              random::bigbirdRandomBlock(*s.seed, h, qb, r, keyBlocks_);
  }
}

expr::Point MaskEvaluator::point(int64_t b, int64_t h, int64_t i, int64_t j, double score) const {
  return {b, h, h / spec_.groupSize(), i, j, i + offset_, seqQ_, seqK_, score};
}

bool MaskEvaluator::allowed(int64_t b, int64_t h, int64_t i, int64_t j) const {
  int64_t qpos = i + offset_;
  if (!constraintsPass(b, h, qpos, i, j))
    return false;
  if (spec_.maskMod.tree &&
      !expr::evaluate(*spec_.maskMod.tree, point(b, h, i, j), expressions_.environment()).truth())
    return false;
  return !spec_.masks.hasSparsityPattern() || somePatternPasses(h, qpos, i, j);
}

bool MaskEvaluator::constraintsPass(int64_t b, int64_t h, int64_t qpos, int64_t i,
                                    int64_t j) const {
  const MaskSet m = spec_.masks;
  if (m.has(MaskKind::Causal) && !masks::causal(qpos, j))
    return false;
  if (m.has(MaskKind::Padding) && j >= lengths_[b])
    return false;
  if (m.has(MaskKind::Tensor) &&
      maskTensor_[b * maskBatchStride_ + h * maskHeadStride_ + i * seqK_ + j] == 0)
    return false;
  return true;
}

bool MaskEvaluator::somePatternPasses(int64_t h, int64_t qpos, int64_t i, int64_t j) const {
  const Spec& s = spec_;
  const MaskSet m = s.masks;
  if (m.has(MaskKind::Window) && masks::window(qpos, j, s.windowLeft, s.windowRight))
    return true;
  if (m.has(MaskKind::Global) && masks::global(qpos, j, s.globalTokens))
    return true;
  if (m.has(MaskKind::Strided) && masks::strided(qpos, j, s.stride))
    return true;
  if (m.has(MaskKind::Dilated) && masks::dilated(qpos, j, s.windowLeft, s.windowRight, s.dilation))
    return true;
  if (m.has(MaskKind::BlockSparse) &&
      blockLayout_[h * layoutHeadStride_ + (i / s.block) * keyBlocks_ + j / s.block] != 0)
    return true;
  return m.has(MaskKind::BigBird) && bigbirdPasses(h, i, j);
}

bool MaskEvaluator::bigbirdPasses(int64_t h, int64_t i, int64_t j) const {
  const Spec& s = spec_;
  int64_t qb = i / s.block, kb = j / s.block;
  if (masks::bigbirdStructured(qb, kb, queryBlocks_, keyBlocks_, s.windowBlocks, s.globalBlocks))
    return true;
  const int64_t* drawn = randomBlocks_.data() + (h * queryBlocks_ + qb) * s.randomBlocks;
  return std::find(drawn, drawn + s.randomBlocks, kb) != drawn + s.randomBlocks;
}

} // namespace attnc
