// attnc._attnc.Bundle: a bundle opened through the runtime's C API and run on DLPack tensors
// (numpy, torch, any __dlpack__ object). The runtime checks every tensor against the manifest;
// its refusal becomes an exception naming the tensor and the rule. The GIL is released while
// the kernel runs, so Python threads calling one bundle run in parallel (the runtime is
// thread-safe).
#include "Bindings.h"
#include "attnc/attnc.h"
#include "src/HostCpu.h"

#include <nanobind/ndarray.h>
#include <nanobind/stl/set.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <string>
#include <vector>

namespace nb = nanobind;

namespace attnc::python {
namespace {

[[noreturn]] void raise(const attnc_error& error) {
  if (error.status == ATTNC_ERROR_TENSOR_MISMATCH || error.status == ATTNC_ERROR_INVALID_ARGUMENT)
    throw TensorError(error.message);
  throw BundleError(std::string(attnc_status_name(error.status)) + ": " + error.message);
}

// NAME's array imported through DLPack (or numpy's array interface), or TensorError saying
// what it is instead.
template <typename Array> Array imported(const std::string& name, nb::handle object, bool output) {
  Array array;
  if (!nb::try_cast(object, array))
    throw TensorError("tensor '" + name + "' is not " + (output ? "a writable array" : "an array") +
                      " (numpy, torch or any object with __dlpack__); it is a " +
                      nb::cast<std::string>(nb::type_name(object.type())));
  return array;
}

// The runtime's view of an array nanobind imported; valid while the array is held.
template <typename Array> DLTensor viewOf(const Array& array) {
  DLTensor tensor{};
  tensor.data = const_cast<void*>(static_cast<const void*>(array.data()));
  tensor.device = {static_cast<DLDeviceType>(array.device_type()), array.device_id()};
  tensor.ndim = static_cast<int32_t>(array.ndim());
  tensor.dtype = {array.dtype().code, array.dtype().bits, array.dtype().lanes};
  tensor.shape = const_cast<int64_t*>(array.shape_ptr());
  tensor.strides = const_cast<int64_t*>(array.stride_ptr());
  return tensor;
}

class Bundle {
public:
  explicit Bundle(const std::string& path) {
    attnc_error error{};
    if (attnc_bundle_open(path.c_str(), &bundle_, &error) != ATTNC_OK)
      raise(error);
  }
  ~Bundle() { attnc_bundle_close(bundle_); }
  Bundle(const Bundle&) = delete;
  Bundle& operator=(const Bundle&) = delete;

  std::string manifest() const { return attnc_bundle_manifest(bundle_); }
  std::string target() const { return attnc_bundle_target(bundle_); }
  std::string targetChoice() const { return attnc_bundle_target_choice(bundle_); }

  // Inputs may be read-only arrays; outputs must be writable (nanobind refuses others).
  void run(const nb::dict& inputs, const nb::dict& outputs, int32_t threads, uintptr_t stream,
           bool backward) {
    std::vector<nb::ndarray<nb::ro>> heldInputs;
    std::vector<nb::ndarray<>> heldOutputs;
    std::vector<std::string> names;
    for (auto [name, array] : inputs) {
      names.push_back(nb::cast<std::string>(name));
      heldInputs.push_back(imported<nb::ndarray<nb::ro>>(names.back(), array, false));
    }
    for (auto [name, array] : outputs) {
      names.push_back(nb::cast<std::string>(name));
      heldOutputs.push_back(imported<nb::ndarray<>>(names.back(), array, true));
    }
    std::vector<DLTensor> views;
    for (const auto& array : heldInputs)
      views.push_back(viewOf(array));
    for (const auto& array : heldOutputs)
      views.push_back(viewOf(array));
    std::vector<attnc_named_tensor> tensors;
    for (size_t i = 0; i < views.size(); ++i)
      tensors.push_back({names[i].c_str(), &views[i]});
    const attnc_run_options options{threads, reinterpret_cast<void*>(stream)};
    attnc_error error{};
    attnc_status status;
    {
      nb::gil_scoped_release released;
      status =
          backward
              ? attnc_bundle_run_backward(bundle_, tensors.data(), tensors.size(), &options, &error)
              : attnc_bundle_run(bundle_, tensors.data(), tensors.size(), &options, &error);
    }
    if (status != ATTNC_OK)
      raise(error);
  }

private:
  attnc_bundle* bundle_ = nullptr;
};

} // namespace

void bindBundle(nb::module_& module) {
  module.def(
      "host_cpu",
      [] { return std::tuple(std::string(runtime::hostArch()), runtime::hostCpuFeatures()); },
      "(architecture, CPU features) of this host, as the runtime judges a bundle's target.");
  nb::class_<Bundle>(module, "Bundle", "A kernel bundle opened by the runtime.")
      .def(nb::init<const std::string&>(), nb::arg("path"),
           "Opens a bundle .so: its ABI version, manifest and target checked against this host.")
      .def_prop_ro("manifest", &Bundle::manifest, "The manifest's JSON text.")
      .def_prop_ro("target", &Bundle::target, "The target that runs here.")
      .def_prop_ro("target_choice", &Bundle::targetChoice, "Why that target was chosen.")
      .def("run", &Bundle::run, nb::arg("inputs"), nb::arg("outputs"), nb::arg("threads"),
           nb::arg("stream"), nb::arg("backward") = false,
           "Runs the kernel on {name: array} inputs and outputs (every manifest argument once); "
           "threads 0: all; stream: a CUDA stream's handle for GPU bundles, else 0; backward: "
           "the backward entry of a backward=true bundle, on its manifest's backward arguments.");
}

} // namespace attnc::python
