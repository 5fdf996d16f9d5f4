//===- KeyRange.cpp - the keys a mask can keep, from its affine terms ------------===//
#include "attn/Transforms/KeyRange.h"

#include "attn/IR/ExpressionRegion.h"
#include "attn/Kit/Builders.h"
#include "attn/Transforms/ScoreTerms.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/IRMapping.h"

#include "llvm/ADT/DenseMap.h"

#include <cstdlib>
#include <optional>

using namespace mlir;

namespace attnc::attn {
namespace {

using P = arith::CmpIPredicate;

// kv * kv_idx + row * (qpos or q_idx) + constant + the sum of `uniform`, each term a value the
// same at every score of the domain with its sign (+1 or -1).
struct Affine {
  int64_t kv = 0, row = 0, constant = 0;
  std::optional<ExpressionArgument> rowArgument;
  SmallVector<std::pair<Value, int64_t>> uniform;
};

// Beyond this many uniform terms (a region that adds one value to itself over and over) a form
// is not read.
constexpr size_t kMaxUniformTerms = 8;

// x + sign * y, or nullopt when they follow different row coordinates or grow too long.
std::optional<Affine> combine(Affine x, const Affine& y, int64_t sign) {
  if (y.row != 0) {
    if (x.row != 0 && x.rowArgument != y.rowArgument)
      return std::nullopt;
    x.rowArgument = y.rowArgument;
  }
  x.kv += sign * y.kv;
  x.row += sign * y.row;
  x.constant += sign * y.constant;
  for (auto [value, s] : y.uniform)
    x.uniform.push_back({value, sign * s});
  if (x.uniform.size() > kMaxUniformTerms)
    return std::nullopt;
  return x;
}

// The predicate p' with (y p' x) exactly when (x p y).
P swapped(P p) {
  switch (p) {
  case P::slt: return P::sgt;
  case P::sle: return P::sge;
  case P::sgt: return P::slt;
  case P::sge: return P::sle;
  default: return p;
  }
}

class KeyRangeReader {
public:
  KeyRangeReader(ImplicitLocOpBuilder& b, ScoreOpInterface op) : b(b), op(op) {
    ValueRange sizes = op.getSizes();
    oneBatch = getConstantIntValue(sizes[0]) == 1;
    oneBatchAndHead = oneBatch && getConstantIntValue(sizes[1]) == 1;
  }

  std::pair<Value, Value> read() {
    ValueRange offsets = op.getOffsets(), sizes = op.getSizes();
    lo = offsets[3];
    hi = b.create<arith::AddIOp>(offsets[3], sizes[3]);
    if (!op.getMaskMod().empty()) {
      block = &op.getMaskMod().front();
      SmallVector<Value> terms;
      conjuncts(cast<gpu::YieldOp>(block->getTerminator()).getValues().front(), terms);
      for (Value term : terms)
        if (auto compare = term.getDefiningOp<arith::CmpIOp>();
            compare && compare->getBlock() == block && compare.getLhs().getType().isInteger(32))
          bound(compare);
    }
    // An empty range sits inside the domain, j0 <= lo <= hi <= j0 + nj (rows placed before every
    // key by a bottom-right alignment with Tq > Tk give hi below j0).
    hi = b.create<arith::MaxSIOp>(hi, offsets[3]);
    lo = b.create<arith::MinSIOp>(lo, hi);
    return {lo, hi};
  }

private:
  bool inBlock(Value v) {
    Operation* def = v.getDefiningOp();
    return def ? def->getBlock() == block : cast<BlockArgument>(v).getOwner() == block;
  }

  // The operands of v's tree of arith.andi in the region, or v itself.
  void conjuncts(Value v, SmallVector<Value>& out) {
    if (auto both = v.getDefiningOp<arith::AndIOp>(); both && inBlock(v)) {
      conjuncts(both.getLhs(), out);
      conjuncts(both.getRhs(), out);
      return;
    }
    out.push_back(v);
  }

  // Tightens [lo, hi) by `compare` when it reads kv_idx p T with T affine in a row coordinate.
  void bound(arith::CmpIOp compare) {
    std::optional<Affine> x = affine(compare.getLhs()), y = affine(compare.getRhs());
    if (!x || !y)
      return;
    // x p y as (k kv_idx + R) p 0, then as kv_idx p' T.
    std::optional<Affine> d = combine(*x, *y, -1);
    if (!d || std::abs(d->kv) != 1 || std::abs(d->row) > 1)
      return;
    P p = compare.getPredicate();
    Affine t = *d;
    t.kv = 0;
    if (d->kv == 1) { // kv_idx p -R
      t.row = -t.row;
      t.constant = -t.constant;
      for (auto& term : t.uniform)
        term.second = -term.second;
    } else { // R p kv_idx
      p = swapped(p);
    }
    auto [least, greatest] = ends(t);
    Value one = b.create<arith::ConstantIndexOp>(1);
    auto below = [&](Value end) { hi = b.create<arith::MinSIOp>(hi, end); };
    auto above = [&](Value start) { lo = b.create<arith::MaxSIOp>(lo, start); };
    switch (p) {
    case P::slt: below(greatest); break;
    case P::sle: below(b.create<arith::AddIOp>(greatest, one)); break;
    case P::sgt: above(b.create<arith::AddIOp>(least, one)); break;
    case P::sge: above(least); break;
    case P::eq:
      below(b.create<arith::AddIOp>(greatest, one));
      above(least);
      break;
    default: break; // != and the unsigned comparisons bound nothing here
    }
  }

  // The least and greatest value of t over the domain's rows (index).
  std::pair<Value, Value> ends(const Affine& t) {
    // x + sign * term, x null meaning 0.
    auto plus = [&](Value x, Value term, int64_t sign) -> Value {
      if (sign > 0)
        return x ? b.create<arith::AddIOp>(x, term).getResult() : term;
      return b.create<arith::SubIOp>(x ? x : b.create<arith::ConstantIndexOp>(0), term);
    };
    Value base = t.constant != 0 ? b.create<arith::ConstantIndexOp>(t.constant) : Value();
    for (auto [value, sign] : t.uniform)
      base = plus(base, b.create<arith::IndexCastOp>(b.getIndexType(), scalar(value)), sign);
    if (t.row == 0) {
      Value value = base ? base : b.create<arith::ConstantIndexOp>(0);
      return {value, value};
    }
    // Rows i0 .. i0 + ni - 1, at key position i + off for qpos.
    ValueRange offsets = op.getOffsets(), sizes = op.getSizes();
    Value first = offsets[2];
    if (t.rowArgument == ExpressionArgument::QPos)
      first = b.create<arith::AddIOp>(first, ScoreTerms::positionOffset(b, op));
    Value last = b.create<arith::SubIOp>(b.create<arith::AddIOp>(first, sizes[2]),
                                         b.create<arith::ConstantIndexOp>(1));
    if (t.row > 0)
      return {plus(base, first, 1), plus(base, last, 1)};
    return {plus(base, last, -1), plus(base, first, -1)};
  }

  std::optional<Affine> affine(Value v) {
    if (auto it = affineForms.find(v); it != affineForms.end())
      return it->second;
    std::optional<Affine> form = readAffine(v);
    affineForms[v] = form;
    return form;
  }

  std::optional<Affine> readAffine(Value v) {
    // getConstantIntValue, not m_ConstantInt: inside libattnc_mlir.so (hidden visibility) the
    // ConstantLike trait's TypeID is this library's own, so m_ConstantInt matched no constant
    // and every bound with a constant (a window's left edge, dilated's span) was dropped.
    if (std::optional<int64_t> constant = getConstantIntValue(v))
      return Affine{0, 0, *constant, std::nullopt, {}};
    if (!inBlock(v))
      return std::nullopt;
    if (auto argument = dyn_cast<BlockArgument>(v)) {
      const auto which = static_cast<ExpressionArgument>(argument.getArgNumber());
      if (which == ExpressionArgument::KvIdx)
        return Affine{1, 0, 0, std::nullopt, {}};
      if (which == ExpressionArgument::QPos || which == ExpressionArgument::QIdx)
        return Affine{0, 1, 0, which, {}};
    }
    Operation* def = v.getDefiningOp();
    if (def && isa<arith::AddIOp, arith::SubIOp>(def)) {
      std::optional<Affine> x = affine(def->getOperand(0)), y = affine(def->getOperand(1));
      if (x && y)
        return combine(*x, *y, isa<arith::AddIOp>(def) ? 1 : -1);
    }
    if (isUniform(v))
      return Affine{0, 0, 0, std::nullopt, {{v, 1}}};
    return std::nullopt;
  }

  // Whether v is the same at every score of the domain: it reads no coordinate of a row or key
  // and no score, b only when the domain is one batch entry (a decode task of a GQA group's
  // heads keeps `kv_idx < seq_lens[b]`), h and g only when it is also one head.
  bool isUniform(Value v) {
    if (!inBlock(v))
      return true; // constants hoisted out of the region
    if (auto it = uniformity.find(v); it != uniformity.end())
      return it->second;
    bool uniform = false;
    if (auto argument = dyn_cast<BlockArgument>(v)) {
      switch (static_cast<ExpressionArgument>(argument.getArgNumber())) {
      case ExpressionArgument::B: uniform = oneBatch; break;
      case ExpressionArgument::H:
      case ExpressionArgument::G: uniform = oneBatchAndHead; break;
      case ExpressionArgument::SeqQ:
      case ExpressionArgument::SeqK: uniform = true; break;
      default: break;
      }
    } else {
      Operation* def = v.getDefiningOp();
      uniform = def->getNumRegions() == 0 && isPure(def) &&
                llvm::all_of(def->getOperands(), [&](Value x) { return isUniform(x); });
    }
    uniformity[v] = uniform;
    return uniform;
  }

  // A uniform value of the region computed once, at the builder's point: its ops cloned with
  // the arguments bound to this domain's batch, head, kv head and lengths, and aux reads made
  // loads at clamped indices (as the kernel's reads are).
  Value scalar(Value v) {
    if (!inBlock(v))
      return v;
    if (Value known = scalars.lookupOrNull(v))
      return known;
    auto i32 = [&](Value index) { return b.create<arith::IndexCastOp>(b.getI32Type(), index); };
    Value result;
    if (auto argument = dyn_cast<BlockArgument>(v)) {
      ValueRange offsets = op.getOffsets();
      switch (static_cast<ExpressionArgument>(argument.getArgNumber())) {
      case ExpressionArgument::B: result = i32(offsets[0]); break;
      case ExpressionArgument::H: result = i32(offsets[1]); break;
      case ExpressionArgument::G: result = i32(ScoreTerms::kvHeadOf(b, op, offsets[1])); break;
      case ExpressionArgument::SeqQ: result = i32(op.getSeqQ()); break;
      default: result = i32(b.create<memref::DimOp>(op.getKey(), 2)); break; // Tk
      }
    } else if (auto load = v.getDefiningOp<AuxLoadOp>()) {
      Value tensor = op.getAux()[load.getAux()];
      SmallVector<Value> at;
      for (auto [d, index] : llvm::enumerate(load.getIndices())) {
        Value last = b.create<arith::SubIOp>(b.create<memref::DimOp>(tensor, d),
                                             b.create<arith::ConstantIndexOp>(1));
        at.push_back(clampIndex(b, scalar(index), last));
      }
      result = b.create<memref::LoadOp>(tensor, at);
    } else {
      Operation* def = v.getDefiningOp();
      for (Value operand : def->getOperands())
        scalar(operand);
      Operation* copy = b.clone(*def, scalars);
      result = copy->getResult(cast<OpResult>(v).getResultNumber());
    }
    scalars.map(v, result);
    return result;
  }

  ImplicitLocOpBuilder& b;
  ScoreOpInterface op;
  bool oneBatch, oneBatchAndHead;
  Block* block = nullptr; // mask_mod's
  Value lo, hi;
  IRMapping scalars;
  DenseMap<Value, std::optional<Affine>> affineForms;
  DenseMap<Value, bool> uniformity;
};

} // namespace

std::pair<Value, Value> keptKeyRange(ImplicitLocOpBuilder& b, ScoreOpInterface op) {
  return KeyRangeReader(b, op).read();
}

} // namespace attnc::attn
