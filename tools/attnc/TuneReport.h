// attnc tune --report: what a tuning run found for one spec, shape bucket, target and machine,
// as markdown tables on stdout and a plot (Plot.h): each trial's time in the order the search ran
// them with the best so far, and per parameter, the times of the trials at each of its values.
#ifndef ATTNC_TOOLS_ATTNC_TUNEREPORT_H
#define ATTNC_TOOLS_ATTNC_TUNEREPORT_H

#include "Backends/Backend.h"
#include "Tuning/TuningRecord.h"

#include <filesystem>
#include <ostream>
#include <vector>

namespace attnc::tools {

// `trials` oldest first (as TuningDatabase::trials returns them); `spaces` name each backend's
// default and parameter choices. Draws the plot as SVG or PNG by the extension of `plot` (attnc
// tune --report asks for SVG), written beside it and renamed into place, so a failure leaves no
// partial file. Throws UsageError when there are no trials, or none ran correctly.
void writeTuneReport(const std::vector<tuning::TrialRecord>& trials,
                     const std::vector<TuningSpace>& spaces, std::ostream& tables,
                     const std::filesystem::path& plot);

} // namespace attnc::tools

#endif // ATTNC_TOOLS_ATTNC_TUNEREPORT_H
