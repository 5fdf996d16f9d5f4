// What the f64 reference's expressions read in a kernel call: the spec's params and its aux
// tensors' elements, bound from the call's tensors, and the kernel inputs the built-in masks
// and modifiers read as aux tensors (lengths, mask, bias, block_layout).
#ifndef ATTNC_COMPILER_REFERENCE_EXPRESSIONINPUTS_H
#define ATTNC_COMPILER_REFERENCE_EXPRESSIONINPUTS_H

#include "Expr/ExprEval.h"
#include "Reference/KernelTensors.h"

#include <map>
#include <span>
#include <string>
#include <vector>

namespace attnc {

class ExpressionInputs {
public:
  explicit ExpressionInputs(const KernelTensors& tensors);
  ExpressionInputs(const ExpressionInputs&) = delete; // the environment points back here
  ExpressionInputs& operator=(const ExpressionInputs&) = delete;

  const expr::Environment& environment() const { return environment_; }
  // Where element `indices` of aux tensor `name` lies in its dense values (a dimension of extent
  // 1 broadcasts), and how many values it has.
  int64_t offset(const std::string& name, std::span<const int64_t> indices) const;
  int64_t size(const std::string& name) const { return aux_.at(name).values.size(); }

private:
  struct AuxValues {
    expr::Type type;
    std::vector<int64_t> shape;
    std::vector<double> values; // dense, row-major
  };
  expr::Value element(const std::string& name, std::span<const int64_t> indices) const;

  std::map<std::string, AuxValues> aux_;
  expr::Environment environment_;
};

} // namespace attnc

#endif // ATTNC_COMPILER_REFERENCE_EXPRESSIONINPUTS_H
