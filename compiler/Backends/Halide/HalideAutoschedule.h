// Halide 14's autoschedulers as schedule generators for the halide backend (schedule parameter
// autoscheduler = 1 Adams2019, 2 Li2018, 3 Mullapudi2016): they schedule the whole algorithm
// from estimates of its sizes. Debian ships them as plugins beside libHalide14
// (<libdir>/halide14/libautoschedule_<name>.so); $ATTNC_HALIDE_PLUGIN_DIR overrides the
// directory.
#ifndef ATTNC_COMPILER_BACKENDS_HALIDE_HALIDEAUTOSCHEDULE_H
#define ATTNC_COMPILER_BACKENDS_HALIDE_HALIDEAUTOSCHEDULE_H

#include "Spec/Spec.h"

#include <Halide.h>
#include <vector>

namespace attnc {

// Loads the plugin, sets estimates on the pipeline's inputs and outputs (B = 1, Tq = Tk =
// 1024: the sizes attnc tune measures by default) and applies the autoscheduler's schedule.
// Throws JobError when the plugin cannot be loaded, naming where it looked.
void autoscheduleAttention(Halide::Pipeline& pipeline,
                           const std::vector<Halide::ImageParam>& params,
                           const std::vector<Halide::Func>& outputs, const Spec& spec,
                           int64_t autoscheduler, const Halide::Target& target);

} // namespace attnc

#endif // ATTNC_COMPILER_BACKENDS_HALIDE_HALIDEAUTOSCHEDULE_H
