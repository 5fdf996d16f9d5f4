// The module attnc._attnc: its exceptions, then the specs and the bundle.
#include "Bindings.h"
#include "Spec/Spec.h"

namespace nb = nanobind;

NB_MODULE(_attnc, module) {
  // attnc.compile keeps every kernel it opened for the life of the process (its in-memory
  // cache), so bundles are still alive when nanobind checks for leaks at exit.
  nb::set_leak_warnings(false);
  nb::exception<attnc::SpecError>(module, "SpecError", PyExc_ValueError);
  nb::exception<attnc::python::TensorError>(module, "TensorError", PyExc_ValueError);
  nb::exception<attnc::python::BundleError>(module, "BundleError", PyExc_RuntimeError);
  attnc::python::bindSpecs(module);
  attnc::python::bindBundle(module);
}
