// The spec's expression keys: params="cap=30 width=128" and aux="doc:i32[B,Tk]" as text in and
// out, and the step that turns score_mod and mask_mod into checked trees once every key is
// parsed (they read params and aux, whatever order the keys came in).
#ifndef ATTNC_COMPILER_SPEC_SPECEXPRESSIONS_H
#define ATTNC_COMPILER_SPEC_SPECEXPRESSIONS_H

#include "Spec/Spec.h"

#include <string>
#include <string_view>
#include <vector>

namespace attnc {

// Throw SpecError naming the key, the value and what is allowed.
std::vector<SpecParam> parseParams(std::string_view text);
std::vector<AuxTensor> parseAux(std::string_view text);
std::string printParams(const std::vector<SpecParam>& params);
std::string printAux(const std::vector<AuxTensor>& aux);

// Parses and checks score_mod and mask_mod against the spec's params and aux (types, names, aux
// indices proved in bounds), and puts their canonical text in place. Throws SpecError.
void resolveExpressions(Spec& spec);

} // namespace attnc

#endif // ATTNC_COMPILER_SPEC_SPECEXPRESSIONS_H
