// attnc._attnc, the Python package's extension module (nanobind): specs parsed in process by the
// compiler core, bundles opened and run through the runtime's C API (attnc.h).
#ifndef ATTNC_PYTHON_BINDINGS_H
#define ATTNC_PYTHON_BINDINGS_H

#include <nanobind/nanobind.h>
#include <stdexcept>

namespace attnc::python {

// A call's tensors refused by the runtime (ATTNC_ERROR_TENSOR_MISMATCH or
// ATTNC_ERROR_INVALID_ARGUMENT): Python's attnc.TensorError, a ValueError.
class TensorError : public std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A bundle that cannot be opened or whose kernel failed: attnc.BundleError, a RuntimeError.
class BundleError : public std::runtime_error {
  using std::runtime_error::runtime_error;
};

void bindSpecs(nanobind::module_& module);
void bindBundle(nanobind::module_& module);

} // namespace attnc::python

#endif // ATTNC_PYTHON_BINDINGS_H
