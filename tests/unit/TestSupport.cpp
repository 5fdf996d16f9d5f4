#include "TestSupport.h"

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
  std::vector<HostTensor> outputs = tools::referenceOutputs(call, serialFor());
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
