#include "TestSupport.h"

#include "Reference/Reference.h"
#include "attnc/DType.hpp"

namespace attnc::test {

tools::Call randomCall(const std::string& spec, int64_t batch, int64_t seqQ, int64_t seqK,
                       uint64_t seed) {
  tools::CallFlags flags;
  flags.batch = batch;
  flags.seqQ = seqQ;
  flags.seqK = seqK;
  flags.seed = seed;
  return tools::prepareCall(parseSpec(spec), flags);
}

Outputs runReferenceOn(tools::Call& call) {
  std::vector<HostTensor> outputs;
  outputs.reserve(call.arguments.size());
  std::vector<DLTensor*> tensors;
  for (size_t i = 0; i < call.arguments.size(); ++i) {
    if (call.arguments[i].role == ArgumentRole::Output) {
      outputs.emplace_back(*parseDType("f64"), call.tensors[i].shape());
      tensors.push_back(outputs.back().dl());
    } else {
      tensors.push_back(call.tensors[i].dl());
    }
  }
  KernelTensors kt(call.spec, tensors, call.sizes[SizeSymbol::Batch],
                   call.sizes[SizeSymbol::SeqQ], call.sizes[SizeSymbol::SeqK]);
  runReference(kt, serialFor());
  Outputs result;
  size_t k = 0;
  for (const Argument& a : call.arguments) {
    if (a.role != ArgumentRole::Output)
      continue;
    std::vector<double> values = outputs[k++].values();
    if (a.name == "o")
      result.o = values;
    else if (a.name == "lse")
      result.lse = values;
    else
      result.weights = values;
  }
  return result;
}

} // namespace attnc::test
