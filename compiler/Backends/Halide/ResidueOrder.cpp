#include "Backends/Halide/ResidueOrder.h"

namespace attnc::halide {

using namespace Halide;

std::optional<ResidueOrder> ResidueOrder::forSpec(const Spec& s, Expr seqQ, Expr seqK,
                                                  Expr offset, int queryTile, int keyBlock) {
  if (s.variant == Variant::Linformer)
    return std::nullopt;
  // Whether k is the spec's one sparsity pattern (constraints may sit beside it).
  auto only = [&](MaskKind k) {
    for (MaskKind pattern : {MaskKind::Window, MaskKind::Global, MaskKind::Strided,
                             MaskKind::Dilated, MaskKind::BlockSparse, MaskKind::BigBird})
      if (s.masks.has(pattern) != (pattern == k))
        return false;
    return true;
  };
  if (only(MaskKind::Strided))
    return ResidueOrder(static_cast<int>(s.stride), seqQ, seqK, offset, queryTile, keyBlock);
  if (only(MaskKind::Dilated))
    return ResidueOrder(static_cast<int>(s.dilation), seqQ, seqK, offset, queryTile, keyBlock);
  return std::nullopt;
}

namespace {

// ceil(n / period) rounded up to a multiple of `unit`.
Expr classLength(Expr n, int period, int unit) {
  Expr members = (n + period - 1) / period;
  return (members + unit - 1) / unit * unit;
}

} // namespace

ResidueOrder::ResidueOrder(int period, Expr seqQ, Expr seqK, Expr offset, int queryTile,
                           int keyBlock)
    : period_(period), seqQ_(seqQ), seqK_(seqK),
      rowsPerClass_(classLength(seqQ, period, queryTile)),
      keysPerClass_(classLength(seqK, period, keyBlock)), offset_(std::move(offset)) {}

// Class c holds the rows whose position i + offset is c mod s: i = (c - offset) mod s + m s.
// (Halide's % by a positive number is never negative: the floor modulo.)
Expr ResidueOrder::row(Expr slot) const {
  Expr c = slot / rowsPerClass_, m = slot % rowsPerClass_;
  return (c - offset_) % period_ + m * period_;
}

Expr ResidueOrder::key(Expr slot) const {
  return slot / keysPerClass_ + (slot % keysPerClass_) * period_;
}

// Row i is the (i / s)-th of its class, since (c - offset) mod s = i mod s.
Expr ResidueOrder::slotOfRow(Expr i) const {
  return (i + offset_) % period_ * rowsPerClass_ + i / period_;
}

Expr ResidueOrder::blockLive(const ScoreRegion& slots,
                             const std::function<Expr(const ScoreRegion&)>& positionsLive) const {
  Expr sameClass = slots.firstRow / rowsPerClass_ == slots.firstKey / keysPerClass_;
  // Within one class positions rise with slots, so the ends of the slot ranges bound them.
  ScoreRegion positions{key(slots.firstKey), key(slots.lastKey), row(slots.firstRow),
                        row(slots.lastRow), slots.maxRows * period_, slots.maxKeys * period_};
  return sameClass && positions.firstRow < seqQ_ && positions.firstKey < seqK_ &&
         positionsLive(positions);
}

} // namespace attnc::halide
