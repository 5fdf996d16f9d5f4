#include "Reference/KernelTensors.h"

#include "Support/TensorAccess.h"

#include <stdexcept>
#include <string>

namespace attnc {

KernelTensors::KernelTensors(const Spec& spec, std::vector<DLTensor*> tensors, int64_t batch,
                             int64_t seqQ, int64_t seqK)
    : KernelTensors(spec, kernelArguments(spec), std::move(tensors), batch, seqQ, seqK) {}

KernelTensors::KernelTensors(const Spec& spec, std::vector<Argument> arguments,
                             std::vector<DLTensor*> tensors, int64_t batch, int64_t seqQ,
                             int64_t seqK)
    : spec_(&spec), arguments_(std::move(arguments)), tensors_(std::move(tensors)), batch_(batch),
      seqQ_(seqQ), seqK_(seqK) {
  if (tensors_.size() != arguments_.size())
    throw std::invalid_argument("kernel call has " + std::to_string(tensors_.size()) +
                                " tensors; the spec takes " + std::to_string(arguments_.size()));
  checkShapes();
}

// The runtime checked the tensors against the bundle's manifest; a manifest that no longer
// lists the spec's arguments (edited, its hash stamped again) would have the reference read
// past a tensor, so every extent it knows from B, Tq and Tk is checked again here.
void KernelTensors::checkShapes() const {
  RunSizes sizes;
  sizes[SizeSymbol::Batch] = batch_;
  sizes[SizeSymbol::SeqQ] = seqQ_;
  sizes[SizeSymbol::SeqK] = seqK_;
  for (size_t i = 0; i < arguments_.size(); ++i) {
    const Argument& a = arguments_[i];
    const DLTensor& t = *tensors_[i];
    bool fits = t.ndim == static_cast<int32_t>(a.shape.size());
    for (size_t d = 0; fits && d < a.shape.size(); ++d) {
      const DimExpr& dim = a.shape[d];
      const bool known = !dim.symbol || *dim.symbol == SizeSymbol::Batch ||
                         *dim.symbol == SizeSymbol::SeqQ || *dim.symbol == SizeSymbol::SeqK;
      const std::optional<int64_t> extent = known ? dim.evaluate(sizes) : std::nullopt;
      fits = !extent || t.shape[d] == *extent || (dim.broadcastable && t.shape[d] == 1);
    }
    if (!fits)
      throw std::invalid_argument("kernel call: tensor " + std::to_string(i) + " is not '" +
                                  a.name + "' of this spec (its rank or extents differ)");
  }
}

bool KernelTensors::has(std::string_view name) const {
  for (const Argument& a : arguments_)
    if (a.name == name)
      return true;
  return false;
}

DLTensor& KernelTensors::tensor(std::string_view name) const {
  for (size_t i = 0; i < arguments_.size(); ++i)
    if (arguments_[i].name == name)
      return *tensors_[i];
  throw std::out_of_range("kernel call has no tensor '" + std::string(name) + "'");
}

std::vector<double> KernelTensors::dense(std::string_view name) const {
  return readDense(tensor(name));
}

Array4 KernelTensors::headMajor(std::string_view name) const {
  const DLTensor& t = tensor(name);
  Array4 a(t.shape[0], t.shape[1], t.shape[2], t.shape[3]);
  a.data = readDense(t);
  return spec_->layout == Layout::Bshd ? a.swapMiddle() : a;
}

void KernelTensors::storeHeadMajor(std::string_view name, const Array4& values) const {
  store(name, spec_->layout == Layout::Bshd ? values.swapMiddle().data : values.data);
}

void KernelTensors::store(std::string_view name, const std::vector<double>& values) const {
  writeDense(tensor(name), values);
}

} // namespace attnc
