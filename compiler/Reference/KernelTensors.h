// A kernel call's tensors by manifest name, with the run-time sizes.
#ifndef ATTNC_COMPILER_REFERENCE_KERNELTENSORS_H
#define ATTNC_COMPILER_REFERENCE_KERNELTENSORS_H

#include "Abi/Arguments.h"
#include "Reference/Array4.h"

#include <dlpack/dlpack.h>
#include <string_view>
#include <vector>

namespace attnc {

class KernelTensors {
public:
  // `tensors` in the order of kernelArguments(spec), already checked against it.
  KernelTensors(const Spec& spec, std::vector<DLTensor*> tensors, int64_t batch, int64_t seqQ,
                int64_t seqK);
  // `tensors` in the order of `arguments` (the backward's: backwardArguments(spec)).
  KernelTensors(const Spec& spec, std::vector<Argument> arguments, std::vector<DLTensor*> tensors,
                int64_t batch, int64_t seqQ, int64_t seqK);

  const Spec& spec() const { return *spec_; }
  int64_t batch() const { return batch_; }
  int64_t seqQ() const { return seqQ_; }
  int64_t seqK() const { return seqK_; }

  const std::vector<Argument>& arguments() const { return arguments_; }
  const std::vector<DLTensor*>& tensors() const { return tensors_; }

  bool has(std::string_view name) const;
  DLTensor& tensor(std::string_view name) const; // throws std::out_of_range when absent

  // The tensor's values as doubles, dense in its own dimension order.
  std::vector<double> dense(std::string_view name) const;
  // A [B, heads, T, d] tensor in the spec's layout, returned as [B, heads, T, d].
  Array4 headMajor(std::string_view name) const;
  // Writes a [B, heads, T, d] array into a tensor in the spec's layout.
  void storeHeadMajor(std::string_view name, const Array4& values) const;
  // Writes a dense array already in the tensor's own dimension order.
  void store(std::string_view name, const std::vector<double>& values) const;

private:
  void checkShapes() const;

  const Spec* spec_;
  std::vector<Argument> arguments_;
  std::vector<DLTensor*> tensors_;
  int64_t batch_, seqQ_, seqK_;
};

} // namespace attnc

#endif // ATTNC_COMPILER_REFERENCE_KERNELTENSORS_H
