#include "Backends/Halide/HalideAutoschedule.h"

#include "Abi/Arguments.h"
#include "Support/Errors.h"

#include <array>
#include <cstdlib>
#include <dlfcn.h>
#include <filesystem>
#include <mutex>
#include <set>
#include <thread>

namespace attnc {
namespace {

struct Autoscheduler {
  const char* name;   // as Halide registers it
  const char* plugin; // libautoschedule_<plugin>.so
};
constexpr std::array<Autoscheduler, 3> kAutoschedulers{
    {{"Adams2019", "adams2019"}, {"Li2018", "li2018"}, {"Mullapudi2016", "mullapudi2016"}}};

// The sizes the estimates describe.
constexpr int64_t kEstimateBatch = 1, kEstimateSeq = 1024;

std::filesystem::path pluginDirectory() {
  if (const char* dir = std::getenv("ATTNC_HALIDE_PLUGIN_DIR"); dir && *dir)
    return dir;
  // Beside the libHalide this process loaded.
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&Halide::load_plugin), &info) && info.dli_fname)
    return std::filesystem::path(info.dli_fname).parent_path() / "halide14";
  return "/usr/lib/halide14";
}

void loadPlugin(const Autoscheduler& a) {
  static std::mutex mutex;
  static std::set<std::string> loaded;
  std::lock_guard<std::mutex> lock(mutex);
  if (loaded.count(a.name))
    return;
  const std::filesystem::path path =
      pluginDirectory() / ("libautoschedule_" + std::string(a.plugin) + ".so");
  if (!std::filesystem::exists(path))
    throw JobError(std::string("the ") + a.name + " autoscheduler is not installed: " +
                   path.string() + " is missing (Debian's libhalide14-0 ships it; set " +
                   "ATTNC_HALIDE_PLUGIN_DIR to its directory)");
  Halide::load_plugin(path.string());
  loaded.insert(a.name);
}

// Halide's dims run innermost first; manifest shapes outermost first.
Halide::Region regionOf(const Argument& argument) {
  RunSizes sizes;
  sizes[SizeSymbol::Batch] = kEstimateBatch;
  sizes[SizeSymbol::SeqQ] = kEstimateSeq;
  sizes[SizeSymbol::SeqK] = kEstimateSeq;
  Halide::Region region;
  for (auto dim = argument.shape.rbegin(); dim != argument.shape.rend(); ++dim)
    region.push_back({0, static_cast<int>(dim->evaluate(sizes).value_or(1))});
  return region;
}

} // namespace

void autoscheduleAttention(Halide::Pipeline& pipeline,
                           const std::vector<Halide::ImageParam>& params,
                           const std::vector<Halide::Func>& outputs, const Spec& spec,
                           int64_t autoscheduler, const Halide::Target& target) {
  const Autoscheduler& a = kAutoschedulers.at(static_cast<size_t>(autoscheduler - 1));
  loadPlugin(a);
  std::vector<Argument> inputArguments, outputArguments;
  for (Argument& argument : kernelArguments(spec))
    (argument.role == ArgumentRole::Output ? outputArguments : inputArguments)
        .push_back(std::move(argument));
  for (size_t n = 0; n < params.size(); ++n) {
    const Halide::Region region = regionOf(inputArguments.at(n));
    for (size_t k = 0; k < region.size(); ++k)
      params[n].dim(static_cast<int>(k)).set_estimate(region[k].min, region[k].extent);
  }
  for (size_t n = 0; n < outputs.size(); ++n) {
    Halide::Func output = outputs[n];
    output.set_estimates(regionOf(outputArguments.at(n)));
  }
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  // Last-level cache and the cost of a load relative to arithmetic: Halide's generic values.
  pipeline.auto_schedule(a.name, target, Halide::MachineParams(cores, 16 * 1024 * 1024, 40));
}

} // namespace attnc
