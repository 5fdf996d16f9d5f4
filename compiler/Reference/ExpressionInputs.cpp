#include "Reference/ExpressionInputs.h"

#include "Spec/BuiltinExpressions.h"

#include <stdexcept>

namespace attnc {

ExpressionInputs::ExpressionInputs(const KernelTensors& t) {
  for (const SpecParam& p : t.spec().params)
    environment_.params[p.name] = p.value;
  for (const ExpressionTensor& e : expressionTensors(t.spec())) {
    const DLTensor& tensor = t.tensor(e.name);
    aux_[e.name] = {e.type, std::vector<int64_t>(tensor.shape, tensor.shape + tensor.ndim),
                    t.dense(e.name)};
  }
  environment_.aux = [this](const std::string& name, std::span<const int64_t> indices) {
    return element(name, indices);
  };
}

int64_t ExpressionInputs::offset(const std::string& name, std::span<const int64_t> indices) const {
  const AuxValues& a = aux_.at(name);
  int64_t offset = 0;
  for (size_t d = 0; d < indices.size(); ++d) {
    // A dimension of extent 1 broadcasts (block_layout's heads); every other index the spec's
    // check proved in bounds, so a failure here is a compiler bug.
    const int64_t index = a.shape[d] == 1 ? 0 : indices[d];
    if (index < 0 || index >= a.shape[d])
      throw std::logic_error("aux tensor " + name + ": index " + std::to_string(indices[d]) +
                             " outside [0, " + std::to_string(a.shape[d]) + ")");
    offset = offset * a.shape[d] + index;
  }
  return offset;
}

expr::Value ExpressionInputs::element(const std::string& name,
                                      std::span<const int64_t> indices) const {
  const AuxValues& a = aux_.at(name);
  const double v = a.values[offset(name, indices)];
  if (a.type == expr::Type::Int)
    return {expr::Type::Int, static_cast<int64_t>(v), 0};
  return {expr::Type::Float, 0, v};
}

} // namespace attnc
