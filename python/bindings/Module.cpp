// The module attnc._attnc: its exceptions, then the specs and the bundle.
#include "Bindings.h"
#include "Spec/Spec.h"

namespace nb = nanobind;

NB_MODULE(_attnc, module) {
  nb::exception<attnc::SpecError>(module, "SpecError", PyExc_ValueError);
  nb::exception<attnc::python::TensorError>(module, "TensorError", PyExc_ValueError);
  nb::exception<attnc::python::BundleError>(module, "BundleError", PyExc_RuntimeError);
  attnc::python::bindSpecs(module);
  attnc::python::bindBundle(module);
}
