// The f64 reference's backward against central finite differences of its forward, on small odd
// shapes: every learnable argument of each case, every element.
#include "Support/Threads.h"
#include "TestSupport.h"
#include "attnc/DType.hpp"

#include <cmath>
#include <gtest/gtest.h>

namespace attnc {
namespace {

using test::randomCall;

// A backward call on the forward call's inputs, held in f64 so that a finite difference
// nudges them exactly: dL/do random, L = sum(dL/do * o).
class BackwardCase {
public:
  BackwardCase(const std::string& spec, int64_t batch, int64_t seqQ, int64_t seqK)
      : call_(randomCall(spec, batch, seqQ, seqK, 7)) {
    for (HostTensor& t : call_.tensors)
      if (t.dtype().code == kDLFloat || t.dtype().code == kDLBfloat)
        t = widened(t);
    const std::vector<HostTensor> outputs = tools::referenceOutputs(call_, serialFor());
    for (size_t a = 0, k = 0; a < call_.arguments.size(); ++a)
      if (call_.arguments[a].role == ArgumentRole::Output)
        forwardOutputs_.emplace(call_.arguments[a].name, widened(outputs[k++]));
    HostTensor& o = forwardOutputs_.at("o");
    outputGradient_.emplace(o.dtype(), o.shape());
    std::vector<double> gradient(o.values().size());
    for (size_t k = 0; k < gradient.size(); ++k)
      gradient[k] = std::sin(0.7 * static_cast<double>(k) + 0.3);
    outputGradient_->assign(gradient);
  }

  tools::Call& call() { return call_; }

  // L = sum(dL/do * o) at the call's current inputs.
  double loss() {
    const std::vector<HostTensor> outputs = tools::referenceOutputs(call_, serialFor());
    const std::vector<double> o = outputs.front().values(), dO = outputGradient_->values();
    double sum = 0;
    for (size_t k = 0; k < o.size(); ++k)
      sum += dO[k] * o[k];
    return sum;
  }

  // runReferenceBackward's gradients by argument name.
  std::map<std::string, std::vector<double>> gradients(const ParallelFor& parallelFor) {
    const std::vector<Argument> arguments = backwardArguments(call_.spec);
    std::vector<HostTensor> gradients;
    gradients.reserve(arguments.size());
    std::vector<DLTensor*> tensors;
    for (const Argument& a : arguments) {
      if (a.role == ArgumentRole::Output) {
        gradients.push_back(widened(call_.tensor(learnedName(a.name))));
        tensors.push_back(gradients.back().dl());
      } else if (a.name == gradientName("o")) {
        tensors.push_back(outputGradient_->dl());
      } else if (forwardOutputs_.count(a.name)) {
        tensors.push_back(forwardOutputs_.at(a.name).dl());
      } else {
        tensors.push_back(call_.tensor(a.name).dl());
      }
    }
    KernelTensors kernel(call_.spec, arguments, tensors, call_.sizes[SizeSymbol::Batch],
                         call_.sizes[SizeSymbol::SeqQ], call_.sizes[SizeSymbol::SeqK]);
    runReferenceBackward(kernel, parallelFor);
    std::map<std::string, std::vector<double>> byName;
    for (size_t a = 0, k = 0; a < arguments.size(); ++a)
      if (arguments[a].role == ArgumentRole::Output)
        byName[learnedName(arguments[a].name)] = gradients[k++].values();
    return byName;
  }

private:
  static HostTensor widened(const HostTensor& t) {
    HostTensor wide(*parseDType("f64"), t.shape());
    wide.assign(t.values());
    return wide;
  }

  tools::Call call_;
  std::map<std::string, HostTensor> forwardOutputs_;
  std::optional<HostTensor> outputGradient_;
};

// Every learnable argument's gradient against (L(x + h) - L(x - h)) / 2h, element by element.
void expectFiniteDifferences(BackwardCase& c) {
  constexpr double kStep = 1e-5;
  const std::map<std::string, std::vector<double>> gradients = c.gradients(serialFor());
  ASSERT_FALSE(gradients.empty());
  for (const auto& [name, gradient] : gradients) {
    HostTensor& x = c.call().tensor(name);
    std::vector<double> values = x.values();
    ASSERT_EQ(values.size(), gradient.size()) << name;
    double largest = 0;
    for (size_t k = 0; k < values.size(); ++k) {
      const double original = values[k];
      values[k] = original + kStep;
      x.assign(values);
      const double up = c.loss();
      values[k] = original - kStep;
      x.assign(values);
      const double down = c.loss();
      values[k] = original;
      x.assign(values);
      const double numeric = (up - down) / (2 * kStep);
      EXPECT_NEAR(gradient[k], numeric, 1e-6 * (1 + std::fabs(numeric)))
          << "d L / d " << name << "[" << k << "]";
      largest = std::max(largest, std::fabs(numeric));
    }
    EXPECT_GT(largest, 1e-3) << "the loss does not depend on " << name;
  }
}

struct Shape {
  int64_t batch, seqQ, seqK;
};

void expectGradients(const std::string& spec, Shape shape) {
  SCOPED_TRACE(spec + " B=" + std::to_string(shape.batch) + " Tq=" + std::to_string(shape.seqQ) +
               " Tk=" + std::to_string(shape.seqK));
  BackwardCase c(spec, shape.batch, shape.seqQ, shape.seqK);
  expectFiniteDifferences(c);
}

TEST(ReferenceBackward, SdpaOnOddShapes) {
  for (Shape shape : {Shape{2, 3, 5}, Shape{1, 1, 4}, Shape{1, 6, 2}})
    expectGradients("heads=2 d_k=3 d_v=2", shape);
}

TEST(ReferenceBackward, CausalGqaWithFullyMaskedRows) {
  // Top-left alignment with Tq > Tk and bottom-right with Tq > Tk both leave rows with no key.
  expectGradients("heads=4 kv_heads=2 d_k=3 mask=causal", {2, 3, 5});
  expectGradients("heads=4 kv_heads=2 d_k=3 mask=causal", {1, 5, 3});
  expectGradients("heads=2 kv_heads=1 d_k=2 mask=causal causal_align=top_left layout=bshd",
                  {2, 4, 3});
}

TEST(ReferenceBackward, PaddingWithAnEmptySequence) {
  BackwardCase c("heads=2 d_k=3 mask=padding", 3, 4, 5);
  c.call().tensor("lengths").assign({3, 0, 5});
  expectFiniteDifferences(c);
}

TEST(ReferenceBackward, ModifiersBiasAndSinks) {
  expectGradients("heads=2 d_k=3 bias=true sinks=true", {2, 3, 4});
  expectGradients("heads=2 d_k=4 softcap=2 alibi=true bias=true mask=window window_left=2",
                  {1, 5, 6});
  expectGradients("heads=2 d_k=4 rope=true rope_dims=2 mask=causal sinks=true", {2, 3, 4});
}

TEST(ReferenceBackward, ScoreModReadingAuxTables) {
  // A relative position table read twice per score, a where and a clamp at its ends, and an
  // aux tensor that only mask_mod reads (gradient 0).
  expectGradients("heads=2 d_k=3 aux=\"rel:f32[heads,9] slope:f32[heads]\" "
                  "score_mod=\"where(score > 0, score * slope[h], score) + "
                  "rel[h, clamp(kv_idx - qpos, -4, 4) + 4] * rel[h, 4]\"",
                  {2, 3, 5});
}

TEST(ReferenceBackward, DropoutRegeneratesItsMask) {
  expectGradients("heads=2 kv_heads=1 d_k=3 dropout=0.3 seed=11 mask=causal", {2, 4, 6});
}

TEST(ReferenceBackward, Variants) {
  expectGradients("variant=bilinear heads=2 d_q=3 d_k=2 mask=causal", {2, 3, 4});
  expectGradients("variant=additive heads=2 d_q=3 d_k=2 d_attn=4", {1, 3, 4});
  expectGradients("variant=linformer heads=2 kv_heads=1 d_k=2 proj_len=3 mask=padding", {2, 3, 5});
  expectGradients("variant=mha heads=2 kv_heads=1 d_k=2 pe=sinusoidal rope=true mask=causal",
                  {2, 3, 4});
}

TEST(ReferenceBackward, LinearAttention) {
  expectGradients("variant=linear heads=2 kv_heads=1 d_k=3 d_v=2 mask=causal+padding", {2, 4, 6});
  expectGradients("variant=linear heads=2 d_k=3 feature_map=relu mask=causal", {1, 5, 3});
  expectGradients("variant=linear heads=2 d_k=3 feature_map=favor features=5 seed=3", {2, 3, 4});
}

TEST(ReferenceBackward, SameBitsOnAnyNumberOfThreads) {
  BackwardCase c("variant=mha heads=4 kv_heads=2 d_k=3 bias=true sinks=true mask=causal", 2, 5, 7);
  const auto serial = c.gradients(serialFor());
  const auto threaded = c.gradients([](int64_t count, const std::function<void(int64_t)>& body) {
    forEachOnThreads(3, count, [&](int64_t index, int64_t) { body(index); });
  });
  EXPECT_EQ(serial, threaded);
}

} // namespace
} // namespace attnc
