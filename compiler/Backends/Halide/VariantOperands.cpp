#include "Backends/Halide/VariantOperands.h"

#include <cmath>

namespace attnc::halide {
namespace {

using namespace Halide;

int dim(int64_t n) {
  return static_cast<int>(n);
}

// x^T as a table: (c, r) of x(r, c, head), so that a product over r reads rows of c
// contiguously (additive's W1 and W2 are stored [head, d_attn, d], the reduction innermost).
Func transposed(const ImageParam& x, const char* name) {
  Var r("r"), c("c"), head("head");
  Func t(name);
  t(c, r, head) = cast<float>(x(r, c, head));
  return t;
}

// mha's sinusoidal encoding PE(pos, m): sin(pos w_m) for even m and cos(pos w_m) for odd m,
// w_m = 10000^(-(m - m % 2) / d_model), evaluated in f64 as the reference does, then f32.
Func sinusoidalTable(const Spec& s) {
  Buffer<double> frequency(dim(s.dModel), "pe_frequency");
  for (int m = 0; m < s.dModel; ++m)
    frequency(m) = std::pow(10000.0, -static_cast<double>(m - m % 2) / static_cast<double>(s.dModel));
  Var m("m"), pos("pos");
  Expr angle = cast<double>(pos) * frequency(m);
  Func table("sinusoid");
  table(m, pos) = cast<float>(select(m % 2 == 0, sin(angle), cos(angle)));
  return table;
}

} // namespace

Projection makeProjection(const std::string& name, Expr extent,
                          const std::function<Expr(Expr, Expr, Expr, Expr, Expr)>& term) {
  Projection p;
  p.r = RDom(0, std::move(extent), name + "_r");
  p.acc = Func(name);
  p.acc(p.e, p.t, p.x, p.b) = 0.0f;
  p.acc(p.e, p.t, p.x, p.b) += term(p.e, p.t, p.x, p.b, p.r.x);
  return p;
}

VariantOperands defineOperands(const Spec& s, const ScoreTerms& terms) {
  VariantOperands ops;
  const ImageParam &q = terms.q(), &k = terms.k(), &v = terms.v();
  const Expr seqQ = terms.seqQ(), seqK = terms.seqK(), keys = terms.keys();
  const int group = dim(s.groupSize()), heads = dim(s.heads), kvHeads = heads / group;
  Var e("e"), i("i"), j("j"), h("h"), b("b");
  ops.scoreDim = dim(s.variant == Variant::Additive ? s.dAttn : s.dK);
  ops.queryIn = Func("query_in");
  ops.keyIn = Func("key_in");
  ops.valueIn = Func("value_in");

  // A product over r whose output element e, position t and head are clamped to [0, eLimit),
  // [0, tLimit) and [0, headLimit) before any read. Halide bounds a read under a select by the
  // select's condition, so without the head's clamp `where(h > 5, score, 0.5)` at 2 heads asked
  // for the weights' heads [6, 1], which their input check refused.
  auto project = [&](const char* name, Expr extent, int eLimit, Expr tLimit, int headLimit,
                     const std::function<Expr(Expr, Expr, Expr, Expr, Expr)>& term) {
    return makeProjection(name, std::move(extent), [&](Expr x, Expr t, Expr head, Expr batch,
                                                       Expr r) {
      return term(min(x, eLimit - 1), min(t, tLimit - 1), clamp(head, 0, headLimit - 1), batch,
                  r);
    });
  };

  // Query and key operands before RoPE, and values.
  std::function<Expr(Expr, Expr, Expr, Expr)> query, key, value;
  switch (s.variant) {
  case Variant::Sdpa:
  case Variant::Bilinear:
  case Variant::Additive:
  case Variant::Linformer:
    query = [&](Expr x, Expr row, Expr head, Expr batch) {
      return cast<float>(terms.load(q, x, min(row, seqQ - 1), head, batch));
    };
    key = [&, group](Expr x, Expr t, Expr head, Expr batch) {
      return cast<float>(terms.load(k, x, min(t, seqK - 1), head / group, batch));
    };
    value = [&, group](Expr x, Expr t, Expr head, Expr batch) {
      return cast<float>(terms.load(v, x, min(t, seqK - 1), head / group, batch));
    };
    break;
  case Variant::Mha: {
    // x W for each head: the query product per query tile, keys and values once per call.
    Func pe;
    if (s.pe == PositionalEncoding::Sinusoidal) {
      pe = sinusoidalTable(s);
      ops.tables.push_back(pe);
    }
    auto input = [&, pe](const ImageParam& x, Expr m, Expr t, Expr batch, Expr position) {
      Expr value = cast<float>(terms.load(x, m, t, 0, batch));
      return pe.defined() ? value + pe(m, position) : value;
    };
    const ImageParam &wq = terms.param("w_q"), &wk = terms.param("w_k"), &wv = terms.param("w_v");
    const int dk = dim(s.dK), dv = dim(s.dV), dModel = dim(s.dModel);
    Projection qp = project("query_projected", dModel, dk, seqQ, heads,
                            [&](Expr x, Expr t, Expr head, Expr batch, Expr m) {
                              return input(q, m, t, batch, terms.position(t)) *
                                     cast<float>(wq(head * dk + x, m));
                            });
    Projection kp = project("key_projected", dModel, dk, seqK, kvHeads,
                            [&](Expr x, Expr t, Expr g, Expr batch, Expr m) {
                              return input(k, m, t, batch, t) * cast<float>(wk(g * dk + x, m));
                            });
    Projection vp = project("value_projected", dModel, dv, seqK, kvHeads,
                            [&](Expr x, Expr t, Expr g, Expr batch, Expr m) {
                              return input(v, m, t, batch, t) * cast<float>(wv(g * dv + x, m));
                            });
    ops.perQueryTile.push_back(qp);
    ops.perCall.push_back(kp);
    ops.perCall.push_back(vp);
    query = [qp](Expr x, Expr row, Expr head, Expr batch) { return qp.acc(x, row, head, batch); };
    key = [kp, group](Expr x, Expr t, Expr head, Expr batch) {
      return kp.acc(x, t, head / group, batch);
    };
    value = [vp, group](Expr x, Expr t, Expr head, Expr batch) {
      return vp.acc(x, t, head / group, batch);
    };
    break;
  }
  case Variant::Linear: throw UsageError("defineOperands: linear attention has no softmax operands");
  }

  // RoPE rotates queries and keys at their positions; keys once per call, except a KV cache's,
  // which it holds rotated already.
  if (s.rope) {
    query = [&terms, query](Expr x, Expr row, Expr head, Expr batch) {
      return terms.rotated([&](Expr y) { return query(y, row, head, batch); }, x,
                           terms.queryPosition(row, batch));
    };
  }
  if (s.rope && !s.cached()) {
    Func rotatedKeys("key");
    Var d("d"), t("t"), g("g");
    rotatedKeys(d, t, g, b) =
        terms.rotated([&](Expr y) { return key(y, t, g * group, b); }, d, t);
    ops.rotatedKeys = rotatedKeys;
    key = [rotatedKeys, group](Expr x, Expr t, Expr head, Expr batch) {
      return rotatedKeys(x, t, head / group, batch);
    };
  }

  switch (s.variant) {
  case Variant::Bilinear: {
    // (q^T W)_e = sum_d q_d W[h, d, e], per query tile.
    const ImageParam& w = terms.param("w");
    Projection qw = project("query_times_w", dim(s.dQ), dim(s.dK), seqQ, heads,
                            [&](Expr x, Expr t, Expr head, Expr batch, Expr d) {
                              return query(d, t, head, batch) * cast<float>(w(x, d, head));
                            });
    ops.perQueryTile.push_back(qw);
    ops.queryIn(e, i, h, b) = qw.acc(e, i, h, b);
    break;
  }
  case Variant::Additive: {
    // W1 q per query tile and W2 k once per call, each a product over the input dim.
    Func w1 = transposed(terms.param("w1"), "w1_t"), w2 = transposed(terms.param("w2"), "w2_t");
    ops.tables.push_back(w1);
    ops.tables.push_back(w2);
    const int dAttn = dim(s.dAttn);
    Projection qh = project("query_hidden", dim(s.dQ), dAttn, seqQ, heads,
                            [&, w1](Expr a, Expr t, Expr head, Expr batch, Expr d) {
                              return query(d, t, head, batch) * w1(a, d, head);
                            });
    Projection kh = project("key_hidden", dim(s.dK), dAttn, seqK, heads,
                            [&, w2](Expr a, Expr t, Expr head, Expr batch, Expr d) {
                              return key(d, t, head, batch) * w2(a, d, head);
                            });
    ops.perQueryTile.push_back(qh);
    ops.perCall.push_back(kh);
    ops.queryIn(e, i, h, b) = qh.acc(e, i, h, b);
    ops.keyIn(e, j, h, b) = kh.acc(e, j, h, b);
    ops.additive = true;
    ops.scoreWeight = Func("score_weight");
    ops.scoreWeight(e, h) =
        cast<float>(terms.param("v_a")(e, h)) * static_cast<float>(s.scale);
    break;
  }
  case Variant::Linformer: {
    // (E K)[p] = sum_{j < valid} E[g, p, j] k_j over the Tk keys, and F V alike, once per call.
    const ImageParam &keyMap = terms.param("e"), &valueMap = terms.param("f");
    auto alongKeys = [&](const char* name, const ImageParam& x, const ImageParam& weights,
                         int64_t width) {
      return project(name, seqK, dim(width), keys, kvHeads,
                     [&](Expr c, Expr p, Expr g, Expr batch, Expr r) {
                       return select(r < terms.validKeys(batch), cast<float>(weights(r, p, g)),
                                     0.0f) *
                              cast<float>(terms.load(x, c, r, g, batch));
                     });
    };
    Projection ek = alongKeys("key_projected", k, keyMap, s.dK);
    Projection fv = alongKeys("value_projected", v, valueMap, s.dV);
    ops.perCall.push_back(ek);
    ops.perCall.push_back(fv);
    ops.keyIn(e, j, h, b) = ek.acc(e, j, h / group, b);
    ops.valueIn(e, j, h, b) = fv.acc(e, j, h / group, b);
    break;
  }
  default: break;
  }
  if (!ops.queryIn.defined())
    ops.queryIn(e, i, h, b) = query(e, i, h, b);
  if (!ops.keyIn.defined())
    ops.keyIn(e, j, h, b) = key(e, j, h, b);
  if (!ops.valueIn.defined())
    ops.valueIn(e, j, h, b) = value(e, j, h, b);
  return ops;
}

} // namespace attnc::halide
