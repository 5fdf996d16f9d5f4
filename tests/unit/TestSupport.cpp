#include "TestSupport.h"

#include <gtest/gtest.h>
#include <unistd.h>

namespace attnc::test {

ScratchDir::ScratchDir(const std::string& purpose)
    : path_(std::filesystem::temp_directory_path() /
            ("attnc_" + purpose + "_" + std::to_string(::getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name())) {
  std::filesystem::remove_all(path_);
  std::filesystem::create_directories(path_);
}

ScratchDir::~ScratchDir() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

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
