#include "halide/ResidueOrder.h"

#include "Variants/Masks.h"

namespace attnc::halide {

using namespace Halide;

std::optional<ResidueOrder> ResidueOrder::forSpec(const Spec& s, Expr seqQ, Expr seqK,
                                                  Expr offset) {
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
    return ResidueOrder(static_cast<int>(s.stride), seqQ, seqK, offset);
  if (only(MaskKind::Dilated))
    return ResidueOrder(static_cast<int>(s.dilation), seqQ, seqK, offset);
  return std::nullopt;
}

ResidueOrder::ResidueOrder(int period, Expr seqQ, Expr seqK, Expr offset)
    : period_(period), rowsPerClass_((seqQ + period - 1) / period),
      keysPerClass_((seqK + period - 1) / period), offset_(std::move(offset)) {}

// Class c holds the rows whose position i + offset is c mod s: i = (c - offset) mod s + m s.
// Slots past the last class (the last tile's or block's tail) are themselves: past the end.
Expr ResidueOrder::row(Expr slot) const {
  Expr c = slot / rowsPerClass_, m = slot % rowsPerClass_;
  return select(slot < rowSlots(), masks::floorMod<Expr>(c - offset_, period_) + m * period_,
                slot);
}

Expr ResidueOrder::key(Expr slot) const {
  return select(slot < keySlots(), slot / keysPerClass_ + (slot % keysPerClass_) * period_, slot);
}

// Row i is the (i / s)-th of its class, since (c - offset) mod s = i mod s.
Expr ResidueOrder::slotOfRow(Expr i) const {
  return masks::floorMod<Expr>(i + offset_, period_) * rowsPerClass_ + i / period_;
}

Expr ResidueOrder::blockLive(const ScoreRegion& slots,
                             const std::function<Expr(const ScoreRegion&)>& positionsLive) const {
  Expr firstRowClass = slots.firstRow / rowsPerClass_, lastRowClass = slots.lastRow / rowsPerClass_;
  Expr firstKeyClass = slots.firstKey / keysPerClass_, lastKeyClass = slots.lastKey / keysPerClass_;
  Expr classesMeet = firstKeyClass <= lastRowClass && firstRowClass <= lastKeyClass;
  // Within one class positions rise with slots, so the ends of the slot ranges bound them.
  Expr oneClass = firstRowClass == lastRowClass && firstKeyClass == lastKeyClass;
  ScoreRegion positions{key(slots.firstKey), key(slots.lastKey), row(slots.firstRow),
                        row(slots.lastRow), slots.maxRows * period_, slots.maxKeys * period_};
  return classesMeet && (!oneClass || positionsLive(positions));
}

} // namespace attnc::halide
