#include "Reference/ExpressionInputs.h"

#include <stdexcept>

namespace attnc {

ExpressionInputs::ExpressionInputs(const KernelTensors& t) {
  for (const SpecParam& p : t.spec().params)
    environment_.params[p.name] = p.value;
  for (const AuxTensor& a : t.spec().aux) {
    const DLTensor& tensor = t.tensor(a.name);
    aux_[a.name] = {a.elementType, std::vector<int64_t>(tensor.shape, tensor.shape + tensor.ndim),
                    t.dense(a.name)};
  }
  environment_.aux = [this](const std::string& name, std::span<const int64_t> indices) {
    return element(name, indices);
  };
}

expr::Value ExpressionInputs::element(const std::string& name,
                                      std::span<const int64_t> indices) const {
  const AuxValues& a = aux_.at(name);
  int64_t offset = 0;
  for (size_t d = 0; d < indices.size(); ++d) {
    // The spec's check proved every index in bounds; a failure here is a compiler bug.
    if (indices[d] < 0 || indices[d] >= a.shape[d])
      throw std::logic_error("aux tensor " + name + ": index " + std::to_string(indices[d]) +
                             " outside [0, " + std::to_string(a.shape[d]) + ")");
    offset = offset * a.shape[d] + indices[d];
  }
  const double v = a.values[offset];
  if (a.type == expr::Type::Int)
    return {expr::Type::Int, static_cast<int64_t>(v), 0};
  return {expr::Type::Float, 0, v};
}

} // namespace attnc
