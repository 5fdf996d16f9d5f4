// attnc compile: spec -> bundle.
#include "Commands.h"
#include "Driver/Driver.h"
#include "Driver/ShapeDispatch.h"
#include "Support/Errors.h"
#include "Tuning/TunedSchedule.h"

#include <charconv>
#include <fmt/core.h>
#include <memory>

namespace attnc::tools {

std::map<std::string, int64_t> parseScheduleOverrides(const std::vector<std::string>& items) {
  std::map<std::string, int64_t> values;
  for (const std::string& item : items) {
    size_t eq = item.find('=');
    int64_t value = 0;
    auto [end, ec] = eq == std::string::npos
                         ? std::from_chars_result{nullptr, std::errc::invalid_argument}
                         : std::from_chars(item.data() + eq + 1, item.data() + item.size(), value);
    if (ec != std::errc() || end != item.data() + item.size() || eq == 0)
      throw UsageError("--schedule " + item + ": expected NAME=INTEGER");
    if (!values.emplace(item.substr(0, eq), value).second)
      throw UsageError("--schedule names " + item.substr(0, eq) + " twice; give each once");
  }
  return values;
}

namespace {

struct CompileCommandOptions {
  std::string spec, backend = "auto", out, name, targetList = "host";
  std::vector<std::string> emit{"so"};
  std::vector<std::string> schedule;
  std::vector<int64_t> tunedFor;
  bool noTuning = false;
};

// One target's kernel. Without --schedule, the tuning database's best records for this spec,
// target and machine set the schedule (and with --backend auto, the backend): one per tuned
// shape bucket, and the driver decides whether they make one shape-dispatch kernel.
KernelRequest kernelFor(const Spec& spec, const CompileCommandOptions& o, const Target& target,
                        const EmitSet& emit) {
  KernelRequest kernel{o.backend, target, parseScheduleOverrides(o.schedule), "", {}};
  // A schedule given is compiled alone; tuned and default ones get the decode kernel beside
  // them (decodingSchedules).
  kernel.withDecode = kernel.schedule.empty();
  if (o.backend == "reference" || !kernel.schedule.empty() || o.noTuning)
    return kernel;
  std::optional<std::pair<int64_t, int64_t>> shape;
  if (!o.tunedFor.empty())
    shape = {o.tunedFor.front(), o.tunedFor.back()};
  const std::optional<std::string> note = useTunedSchedules(
      kernel, emit,
      tuning::findTunedSchedules(spec, target, o.backend == "auto" ? "" : o.backend, shape));
  if (note)
    fmt::print(stderr, "attnc: note: {}\n", *note);
  return kernel;
}

} // namespace

Action addCompileCommand(CLI::App& app) {
  auto o = std::make_shared<CompileCommandOptions>();
  CLI::App* cmd = app.add_subcommand("compile", "Compile a spec into a kernel bundle");
  cmd->add_option("spec", o->spec, "spec text 'key=value ...' or a .json file")->required();
  cmd->add_option("--backend", o->backend,
                  "mlir | halide | reference | auto: the backend of the best tuning record, "
                  "else the fastest that covers the spec and target (attnc backends)")
      ->capture_default_str();
  cmd->add_option("--target", o->targetList,
                  "host | x86-64-avx2 | x86-64-avx512 | x86-64-zen4 | x86-64-sapphirerapids | "
                  "arm-64-linux "
                  "(halide, mlir) | cuda-sm_80 | cuda-sm_90 (halide sdpa, mlir); reference: "
                  "host only. Several, comma separated: one fat bundle, run on the best one "
                  "the host supports")
      ->capture_default_str();
  cmd->add_option("--emit", o->emit,
                  "artifacts: so,lib (any backend's kernel; lib: a static library and C++ "
                  "header to link into applications), a,h,obj,asm,stmt (halide), "
                  "mlir,llvm,asm,obj,ptx (mlir)")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--name", o->name,
                  "--emit lib: the C identifier naming the library, header, symbol and C++ "
                  "class (default attnc_<variant>_<hash>)");
  cmd->add_option("--schedule", o->schedule,
                  "schedule parameters NAME=VALUE instead of the target's defaults (comma "
                  "separated; halide: query_tile key_block vector_width key_unroll row_unroll "
                  "value_split; mlir: query_tile key_block vector_width key_unroll value_split, "
                  "backward_key_block (keys per block of the backward's dK and dV tasks), "
                  "amx=0/1 (bf16 products on AMX tiles, the default where the target has "
                  "them), dot=0/1 (as vdpbf16ps: the default with AVX512-BF16 and no AMX), "
                  "and decode=1 for the decode kernel alone, with decode_rows split_keys). "
                  "Without it an MLIR CPU bundle holds its decode kernel too, run for Tq <= 16")
      ->delimiter(',');
  cmd->add_flag("--no-tuning", o->noTuning,
                "use the target's default schedule even when attnc tune has measured better");
  cmd->add_option("--tuned-for", o->tunedFor,
                  "TQ[,TK]: only the tuned schedule for these sequence lengths (default: a "
                  "bundle carries every tuned shape bucket's and picks one per call)")
      ->delimiter(',')
      ->expected(1, 2)
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 31));
  cmd->add_option("-o,--out", o->out, "directory for the bundle and its manifest")->required();
  return [o] {
    Spec spec = loadSpec(o->spec);
    // Split here, not by CLI11, which drops empty items: "avx2," is a mistake to report.
    std::vector<Target> targets;
    for (size_t start = 0;;) {
      const size_t comma = o->targetList.find(',', start);
      const std::string name = o->targetList.substr(start, comma - start);
      if (name.empty())
        throw UsageError("--target " + o->targetList +
                         ": lists an empty name; give targets separated by single commas");
      targets.push_back(parseTarget(name));
      if (comma == std::string::npos)
        break;
      start = comma + 1;
    }
    CompileRequest request;
    request.outDir = o->out;
    request.libraryName = o->name;
    request.emit.clear();
    for (const std::string& kind : o->emit)
      request.emit.insert(parseEmit(kind));
    if (!o->name.empty() && !request.emit.count(Emit::Lib))
      throw UsageError("--name names a linked library; add --emit lib");
    // Each target's tuned schedules are looked up once; several targets (or a linked library)
    // make one artifact of them all.
    for (const Target& target : targets)
      request.kernels.push_back(kernelFor(spec, *o, target, request.emit));
    CompileResult result = compileBundle(spec, request);
    // The bundle (or first artifact) first; the manifest copy beside a bundle goes unsaid.
    for (const std::filesystem::path& file : result.files)
      if (file == result.primary || file.extension() != ".json")
        fmt::print("{}\n", file.string());
    return 0;
  };
}

} // namespace attnc::tools
