#include "EagerExpression.h"

#include "Semantics/Random.h"

#include <algorithm>
#include <cmath>
#include <type_traits>

namespace attnc::bench {
namespace {

using expr::Node;
using expr::Op;
using expr::Type;

// The array's elements of type T (floats, ints or bools), const when the array is.
template <typename T, typename Array> auto& storage(Array& a) {
  if constexpr (std::is_same_v<T, float>)
    return a.floats;
  else if constexpr (std::is_same_v<T, int64_t>)
    return a.ints;
  else
    return a.bools;
}

EagerArray allocate(Type type, int64_t rows, int64_t cols) {
  EagerArray a{type, rows, cols, {}, {}, {}};
  const size_t n = static_cast<size_t>(rows * cols);
  switch (type) {
  case Type::Float: a.floats.resize(n); break;
  case Type::Int: a.ints.resize(n); break;
  case Type::Bool: a.bools.resize(n); break;
  }
  return a;
}

template <typename T> EagerArray scalar(Type type, T value) {
  EagerArray a = allocate(type, 1, 1);
  storage<T>(a)[0] = value;
  return a;
}

// out = f(x) elementwise.
template <typename Out, typename X, typename F>
EagerArray map1(Type type, const EagerArray& x, F f) {
  EagerArray out = allocate(type, x.rows, x.cols);
  const std::vector<X>& in = storage<X>(x);
  std::vector<Out>& o = storage<Out>(out);
  for (size_t n = 0; n < in.size(); ++n)
    o[n] = f(in[n]);
  return out;
}

// out[r, c] = f(x[r, c], y[r, c]) over the broadcast of the two shapes; a row's loop runs over
// contiguous elements, or holds the operand that broadcasts along it.
template <typename Out, typename X, typename Y, typename F>
EagerArray map2(Type type, const EagerArray& x, const EagerArray& y, F f) {
  const int64_t rows = std::max(x.rows, y.rows), cols = std::max(x.cols, y.cols);
  EagerArray out = allocate(type, rows, cols);
  const X* xs = storage<X>(x).data();
  const Y* ys = storage<Y>(y).data();
  Out* os = storage<Out>(out).data();
  for (int64_t r = 0; r < rows; ++r) {
    const X* xr = xs + (x.rows == 1 ? 0 : r * x.cols);
    const Y* yr = ys + (y.rows == 1 ? 0 : r * y.cols);
    Out* o = os + r * cols;
    if (x.cols == cols && y.cols == cols) {
      for (int64_t c = 0; c < cols; ++c)
        o[c] = f(xr[c], yr[c]);
    } else if (x.cols == cols) {
      const Y b = yr[0];
      for (int64_t c = 0; c < cols; ++c)
        o[c] = f(xr[c], b);
    } else {
      const X a = xr[0];
      for (int64_t c = 0; c < cols; ++c)
        o[c] = f(a, yr[c]);
    }
  }
  return out;
}

// An int or bool array as floats (type promotion: one pass, as torch promotes an operand).
EagerArray asFloat(EagerArray a) {
  if (a.type == Type::Float)
    return a;
  if (a.type == Type::Bool)
    return map1<float, uint8_t>(Type::Float, a, [](uint8_t v) { return static_cast<float>(v); });
  return map1<float, int64_t>(Type::Float, a, [](int64_t v) { return static_cast<float>(v); });
}

// The broadcast shape of several arrays.
std::pair<int64_t, int64_t> broadcastShape(const std::vector<EagerArray>& arrays) {
  int64_t rows = 1, cols = 1;
  for (const EagerArray& a : arrays) {
    rows = std::max(rows, a.rows);
    cols = std::max(cols, a.cols);
  }
  return {rows, cols};
}

class Evaluator {
public:
  Evaluator(const HeadGrid& grid, const EagerInputs& inputs) : grid_(grid), inputs_(inputs) {}

  EagerArray operator()(const Node& n) const;

private:
  EagerArray variable(const std::string& name) const;
  EagerArray aux(const Node& n) const;
  EagerArray arithmetic(Op op, Type type, const EagerArray& x, const EagerArray& y) const;
  EagerArray compare(Op op, const EagerArray& x, const EagerArray& y) const;
  EagerArray where(Type type, const EagerArray& condition, EagerArray x, EagerArray y) const;
  EagerArray philox(const Node& n) const;
  EagerArray unaryFloat(const Node& n, float (*f)(float)) const {
    return map1<float, float>(Type::Float, asFloat((*this)(n.args[0])), f);
  }

  const HeadGrid& grid_;
  const EagerInputs& inputs_;
};

EagerArray Evaluator::variable(const std::string& name) const {
  if (name == "score") {
    EagerArray s = allocate(Type::Float, grid_.seqQ, grid_.keys);
    std::copy(grid_.scores, grid_.scores + grid_.seqQ * grid_.keys, s.floats.begin());
    return s;
  }
  if (name == "q_idx" || name == "qpos") {
    EagerArray rows = allocate(Type::Int, grid_.seqQ, 1);
    const int64_t first = name == "qpos" ? grid_.offset : 0;
    for (int64_t i = 0; i < grid_.seqQ; ++i)
      rows.ints[i] = first + i;
    return rows;
  }
  if (name == "kv_idx") {
    EagerArray keys = allocate(Type::Int, 1, grid_.keys);
    for (int64_t j = 0; j < grid_.keys; ++j)
      keys.ints[j] = j;
    return keys;
  }
  const int64_t value = name == "b"    ? grid_.b
                        : name == "h"  ? grid_.h
                        : name == "g"  ? grid_.g
                        : name == "Tq" ? grid_.seqQ
                                       : grid_.seqK; // the parser admits no other variable
  return scalar<int64_t>(Type::Int, value);
}

// tensor[indices...] at every point of the indices' broadcast shape. The spec's check proved
// every index inside its dimension; the clamp keeps a read inside the tensor regardless. An
// extent of 1 broadcasts (block_layout's heads).
EagerArray Evaluator::aux(const Node& n) const {
  const EagerInputs::Tensor& tensor = inputs_.tensors.at(n.name);
  std::vector<EagerArray> indices;
  for (const Node& index : n.args)
    indices.push_back((*this)(index));
  const auto [rows, cols] = broadcastShape(indices);
  EagerArray out = allocate(tensor.type, rows, cols);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      int64_t offset = 0;
      for (size_t d = 0; d < indices.size(); ++d) {
        const int64_t extent = tensor.shape[d];
        const int64_t i = extent == 1 ? 0 : indices[d].ints[indices[d].at(r, c)];
        offset = offset * extent + std::clamp<int64_t>(i, 0, extent - 1);
      }
      if (tensor.type == Type::Float)
        out.floats[r * cols + c] = tensor.floats[offset];
      else
        out.ints[r * cols + c] = tensor.ints[offset];
    }
  return out;
}

EagerArray Evaluator::arithmetic(Op op, Type type, const EagerArray& x,
                                 const EagerArray& y) const {
  if (type == Type::Int) {
    auto ints = [&](auto f) { return map2<int64_t, int64_t, int64_t>(Type::Int, x, y, f); };
    switch (op) {
    case Op::Add:
      return ints([](int64_t a, int64_t b) { return expr::wrapped(uint64_t(a) + uint64_t(b)); });
    case Op::Sub:
      return ints([](int64_t a, int64_t b) { return expr::wrapped(uint64_t(a) - uint64_t(b)); });
    case Op::Mul:
      return ints([](int64_t a, int64_t b) { return expr::wrapped(uint64_t(a) * uint64_t(b)); });
    case Op::Mod: return ints(expr::floorModulo);
    case Op::FloorDiv: return ints(expr::floorDivide);
    case Op::Min: return ints([](int64_t a, int64_t b) { return std::min(a, b); });
    default: return ints([](int64_t a, int64_t b) { return std::max(a, b); });
    }
  }
  auto floats = [&](auto f) {
    return map2<float, float, float>(Type::Float, asFloat(x), asFloat(y), f);
  };
  switch (op) {
  case Op::Add: return floats([](float a, float b) { return a + b; });
  case Op::Sub: return floats([](float a, float b) { return a - b; });
  case Op::Mul: return floats([](float a, float b) { return a * b; });
  case Op::Div: return floats([](float a, float b) { return a / b; });
  case Op::Min: return floats([](float a, float b) { return std::fmin(a, b); });
  default: return floats([](float a, float b) { return std::fmax(a, b); });
  }
}

EagerArray Evaluator::compare(Op op, const EagerArray& x, const EagerArray& y) const {
  return expr::withComparison(op, [&](auto compare) {
    auto test = [compare](auto a, auto b) -> uint8_t { return compare(a, b); };
    if (x.type == y.type && x.type == Type::Bool) // only == and != take bools
      return map2<uint8_t, uint8_t, uint8_t>(Type::Bool, x, y, test);
    if (x.type == y.type && x.type == Type::Int)
      return map2<uint8_t, int64_t, int64_t>(Type::Bool, x, y, test);
    return map2<uint8_t, float, float>(Type::Bool, asFloat(x), asFloat(y), test);
  });
}

EagerArray Evaluator::where(Type type, const EagerArray& condition, EagerArray x,
                            EagerArray y) const {
  if (type == Type::Float) {
    x = asFloat(std::move(x));
    y = asFloat(std::move(y));
  }
  const auto [rows, cols] = broadcastShape({condition, x, y});
  EagerArray out = allocate(type, rows, cols);
  auto select = [&](auto element) {
    using T = decltype(element);
    const std::vector<T>&a = storage<T>(x), &b = storage<T>(y);
    std::vector<T>& o = storage<T>(out);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c)
        o[r * cols + c] = condition.truth(r, c) ? a[x.at(r, c)] : b[y.at(r, c)];
  };
  switch (type) {
  case Type::Float: select(float{}); break;
  case Type::Int: select(int64_t{}); break;
  case Type::Bool: select(uint8_t{}); break;
  }
  return out;
}

// Word n mod 4 of Philox4x32-10 at counter (c0..c3) under the node's key, as a signed 32-bit
// int (Expr.h): per element, as torch draws a random tensor.
EagerArray Evaluator::philox(const Node& n) const {
  std::vector<EagerArray> args;
  for (const Node& a : n.args)
    args.push_back((*this)(a));
  const uint64_t key = static_cast<uint64_t>(n.intValue);
  const auto [rows, cols] = broadcastShape(args);
  EagerArray out = allocate(Type::Int, rows, cols);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      auto word = [&](size_t i) { return static_cast<uint32_t>(args[i].ints[args[i].at(r, c)]); };
      const random::Block x =
          random::philox4x32({word(0), word(1), word(2), word(3)}, static_cast<uint32_t>(key),
                             static_cast<uint32_t>(key >> 32));
      out.ints[r * cols + c] =
          static_cast<int32_t>(x[expr::floorModulo(args[4].ints[args[4].at(r, c)], 4)]);
    }
  return out;
}

EagerArray Evaluator::operator()(const Node& n) const {
  auto arg = [&](size_t i) { return (*this)(n.args[i]); };
  switch (n.op) {
  case Op::IntLiteral: return scalar<int64_t>(Type::Int, n.intValue);
  case Op::FloatLiteral: return scalar<float>(Type::Float, static_cast<float>(n.floatValue));
  case Op::BoolLiteral: return scalar<uint8_t>(Type::Bool, n.intValue != 0);
  case Op::Variable: return variable(n.name);
  case Op::Param: {
    const expr::Value& v = inputs_.params.at(n.name);
    return v.type == Type::Float ? scalar<float>(Type::Float, static_cast<float>(v.f))
                                 : scalar<int64_t>(Type::Int, v.i);
  }
  case Op::Aux: return aux(n);
  case Op::Neg:
    if (n.type == Type::Int)
      return map1<int64_t, int64_t>(Type::Int, arg(0),
                                    [](int64_t a) { return expr::wrapped(0 - uint64_t(a)); });
    return map1<float, float>(Type::Float, arg(0), [](float a) { return -a; });
  case Op::Not: return map1<uint8_t, uint8_t>(Type::Bool, arg(0), [](uint8_t a) { return !a; });
  case Op::And:
    return map2<uint8_t, uint8_t, uint8_t>(Type::Bool, arg(0), arg(1),
                                           [](uint8_t a, uint8_t b) { return a & b; });
  case Op::Or:
    return map2<uint8_t, uint8_t, uint8_t>(Type::Bool, arg(0), arg(1),
                                           [](uint8_t a, uint8_t b) { return a | b; });
  case Op::Lt:
  case Op::Le:
  case Op::Gt:
  case Op::Ge:
  case Op::Eq:
  case Op::Ne: return compare(n.op, arg(0), arg(1));
  case Op::Add:
  case Op::Sub:
  case Op::Mul:
  case Op::Div:
  case Op::Mod:
  case Op::FloorDiv:
  case Op::Min:
  case Op::Max: return arithmetic(n.op, n.type, arg(0), arg(1));
  case Op::Where: return where(n.type, arg(0), arg(1), arg(2));
  case Op::Abs:
    if (n.type == Type::Int)
      return map1<int64_t, int64_t>(Type::Int, arg(0), [](int64_t a) {
        return a < 0 ? expr::wrapped(0 - uint64_t(a)) : a;
      });
    return map1<float, float>(Type::Float, arg(0), [](float a) { return std::fabs(a); });
  case Op::Clamp:
    return arithmetic(Op::Min, n.type, arithmetic(Op::Max, n.type, arg(0), arg(1)), arg(2));
  case Op::Floor: {
    EagerArray x = arg(0);
    if (x.type == Type::Int)
      return x;
    return map1<int64_t, float>(Type::Int, x, [](float a) { return expr::floorToInt(a); });
  }
  case Op::Exp: return unaryFloat(n, [](float a) { return std::exp(a); });
  case Op::Log: return unaryFloat(n, [](float a) { return std::log(a); });
  case Op::Sqrt: return unaryFloat(n, [](float a) { return std::sqrt(a); });
  case Op::Tanh: return unaryFloat(n, [](float a) { return std::tanh(a); });
  case Op::Sigmoid: return unaryFloat(n, [](float a) { return 1 / (1 + std::exp(-a)); });
  case Op::Bit:
    return map2<uint8_t, int64_t, int64_t>(Type::Bool, arg(0), arg(1), [](int64_t w, int64_t i) {
      return static_cast<uint8_t>(i >= 0 && i < 64 && ((uint64_t(w) >> i) & 1) != 0);
    });
  case Op::Philox: return philox(n);
  }
  return scalar<int64_t>(Type::Int, 0); // not reached: every op is handled above
}

} // namespace

EagerArray evaluateEagerly(const Node& node, const HeadGrid& grid, const EagerInputs& inputs) {
  return Evaluator(grid, inputs)(node);
}

} // namespace attnc::bench
