#include "Backends/Halide/StrictFloats.h"

namespace attnc::halide {
namespace {

using namespace Halide;
using namespace Halide::Internal;

class Strictify : public IRMutator {
  using IRMutator::visit;

  // The mutated op, wrapped when it reads or makes a float.
  template <typename Op> Expr strict(const Op* op, bool floats) {
    const Expr e = IRMutator::visit(op);
    return floats ? strict_float(e) : e;
  }
  template <typename Op> Expr arithmetic(const Op* op) { return strict(op, op->type.is_float()); }
  template <typename Op> Expr comparison(const Op* op) {
    return strict(op, op->a.type().is_float());
  }

  Expr visit(const Add* op) override { return arithmetic(op); }
  Expr visit(const Sub* op) override { return arithmetic(op); }
  Expr visit(const Mul* op) override { return arithmetic(op); }
  Expr visit(const Div* op) override { return arithmetic(op); }
  Expr visit(const Mod* op) override { return arithmetic(op); }
  Expr visit(const Min* op) override { return arithmetic(op); }
  Expr visit(const Max* op) override { return arithmetic(op); }
  Expr visit(const Select* op) override { return arithmetic(op); }
  Expr visit(const EQ* op) override { return comparison(op); }
  Expr visit(const NE* op) override { return comparison(op); }
  Expr visit(const LT* op) override { return comparison(op); }
  Expr visit(const LE* op) override { return comparison(op); }
  Expr visit(const GT* op) override { return comparison(op); }
  Expr visit(const GE* op) override { return comparison(op); }
  Expr visit(const Cast* op) override {
    return strict(op, op->type.is_float() || op->value.type().is_float());
  }

  // Math functions (exp, log, sqrt, floor, ...) and reinterpretations of floats; a strict_float
  // already present gives way to the wrappers of its operations.
  Expr visit(const Call* op) override {
    if (op->is_intrinsic(Call::strict_float))
      return mutate(op->args[0]);
    const bool reads = op->call_type == Call::Halide || op->call_type == Call::Image;
    const bool floats =
        op->type.is_float() || (!op->args.empty() && op->args[0].type().is_float());
    return strict(op, floats && !reads); // a tensor's element needs no wrapper
  }
};

} // namespace

Expr strictFloats(const Expr& e) {
  return Strictify().mutate(e);
}

} // namespace attnc::halide
