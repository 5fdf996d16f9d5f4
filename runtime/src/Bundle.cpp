// The C API: opening bundles, checking them against this host, and running them.
#include "ElfCheck.h"
#include "HostCpu.h"
#include "KvAppend.h"
#include "KvCacheCheck.h"
#include "RuntimeManifest.h"
#include "TensorCheck.h"
#include "ThreadPool.h"
#include "attnc/CudaDriver.hpp"
#include "attnc/SequenceViews.hpp"
#include "attnc/attnc.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <dlfcn.h>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

struct attnc_bundle {
  void* handle = nullptr;       // NULL for a kernel linked into the application
  void* globalHandle = nullptr; // the same object reopened RTLD_GLOBAL, for a shared runtime
  std::string manifestJson;
  attnc::runtime::RuntimeManifest manifest;
  const attnc::runtime::TargetSpec* target = nullptr; // the one it runs, of manifest.targets
  std::string targetChoice;                           // why that one
  attnc_kernel_run_fn run = nullptr;
  ~attnc_bundle() {
    if (globalHandle)
      dlclose(globalHandle);
    if (handle)
      dlclose(handle);
  }
};

namespace {

// Why this host cannot run a CUDA bundle built for `arch` ("sm_90"), or "" when it can.
std::string cudaProblem(const std::string& arch) {
  int needed = 0;
  if (arch.rfind("sm_", 0) != 0 || (needed = std::atoi(arch.c_str() + 3)) <= 0)
    return "bundle names an unknown CUDA architecture '" + arch + "'";
  attnc::cuda::Device device;
  std::string why;
  if (!attnc::cuda::useDevice(&device, &why))
    return "bundle runs on an NVIDIA GPU (" + arch +
           " or newer) and this host has none usable: " + why;
  if (device.major * 10 + device.minor < needed)
    return "bundle needs an " + arch + " GPU or newer; device 0 (" + device.name + ") is sm_" +
           std::to_string(device.major * 10 + device.minor);
  return "";
}

attnc_status fail(attnc_error* error, attnc_status status, const std::string& message) {
  if (error) {
    error->status = status;
    std::snprintf(error->message, sizeof(error->message), "%s", message.c_str());
  }
  return status;
}

// A kernel's nonzero result (attnc_kernel_run_fn): its refusal of the call's tensors, or its
// failure; `where` names the sequences of a ragged batch's run, else is empty.
attnc_status failedRun(attnc_error* error, int32_t result, const std::string& where,
                       const char* message) {
  const bool refused = result == ATTNC_ERROR_TENSOR_MISMATCH;
  return fail(error, refused ? ATTNC_ERROR_TENSOR_MISMATCH : ATTNC_ERROR_KERNEL,
              (refused ? "the kernel refused the tensors" : "kernel failed") + where + ": " +
                  message);
}

attnc_status succeed(attnc_error* error) {
  if (error) {
    error->status = ATTNC_OK;
    error->message[0] = '\0';
  }
  return ATTNC_OK;
}

// Why this host cannot run `target`, or "" when it can.
std::string targetProblem(const attnc::runtime::TargetSpec& target) {
  if (target.device != "cpu" && target.device != "cuda")
    return "it targets device '" + target.device + "'; this runtime runs cpu and cuda kernels";
  if (target.arch != attnc::runtime::hostArch())
    return "it was compiled for " + target.arch + "; this host is " + attnc::runtime::hostArch();
  const auto& host = attnc::runtime::hostCpuFeatures();
  std::string missing;
  for (const std::string& feature : target.cpuFeatures)
    if (!host.count(feature))
      missing += (missing.empty() ? "" : " ") + feature;
  if (!missing.empty())
    return "it needs CPU features this host lacks: " + missing;
  // Code that may use AMX tiles needs the process's permission first.
  if (std::find(target.cpuFeatures.begin(), target.cpuFeatures.end(), "amx_tile") !=
      target.cpuFeatures.end())
    if (std::string refused = attnc::runtime::requestAmxTiles(); !refused.empty())
      return "it uses AMX tiles: " + refused;
  return target.device == "cuda" ? cudaProblem(target.cudaArch) : "";
}

// Picks the target of `bundle` to run: the one ATTNC_TARGET names, for a fat bundle when it is
// set, else the first (best) one this host supports. Fills target and targetChoice.
attnc_status chooseTarget(attnc_bundle& bundle, attnc_error* error) {
  const auto& targets = bundle.manifest.targets;
  const char* forced = bundle.manifest.fat ? std::getenv("ATTNC_TARGET") : nullptr;
  if (forced && *forced) {
    auto it = std::find_if(targets.begin(), targets.end(),
                           [&](const auto& t) { return t.name == forced; });
    if (it == targets.end()) {
      std::string names;
      for (const auto& t : targets)
        names += (names.empty() ? "" : ", ") + t.name;
      return fail(error, ATTNC_ERROR_UNSUPPORTED_TARGET,
                  std::string("ATTNC_TARGET=") + forced +
                      " names no target of this bundle; it holds: " + names);
    }
    if (std::string problem = targetProblem(*it); !problem.empty())
      return fail(error, ATTNC_ERROR_UNSUPPORTED_TARGET,
                  std::string("ATTNC_TARGET=") + forced + " cannot run here: " + problem);
    bundle.target = &*it;
    bundle.targetChoice = it->name + " (forced by ATTNC_TARGET)";
    return ATTNC_OK;
  }
  std::string passedOver;
  for (const auto& t : targets) {
    std::string problem = targetProblem(t);
    if (problem.empty()) {
      bundle.target = &t;
      bundle.targetChoice =
          t.name + (targets.size() == 1
                        ? " (the bundle's only target)"
                        : " (the first of the bundle's " + std::to_string(targets.size()) +
                              " targets this host supports" +
                              (passedOver.empty() ? "" : "; passed over " + passedOver) + ")");
      return ATTNC_OK;
    }
    passedOver += (passedOver.empty() ? "" : "; ") + t.name + ": " + problem;
  }
  if (targets.size() == 1)
    return fail(error, ATTNC_ERROR_UNSUPPORTED_TARGET, "bundle cannot run here: " + passedOver);
  return fail(error, ATTNC_ERROR_UNSUPPORTED_TARGET,
              "none of the bundle's targets runs here: " + passedOver);
}

// One copy of a shared runtime (Halide's) serves the whole process: the first bundle that
// carries it is made global, and the dynamic linker binds every later bundle's references to
// it. A bundle built for another version of that runtime cannot share it and is refused.
attnc_status shareRuntime(attnc_bundle& bundle, const std::string& file, attnc_error* error) {
  static std::mutex mutex;
  static std::string provider; // the runtime version that is global, once one is
  std::lock_guard lock(mutex);
  const std::string& wanted = bundle.manifest.sharedRuntime;
  if (!provider.empty() && provider != wanted)
    return fail(error, ATTNC_ERROR_UNSUPPORTED_TARGET,
                "bundle needs the " + wanted + " runtime, but this process already shares " +
                    provider + "; recompile it with the same attnc");
  if (!provider.empty())
    return ATTNC_OK; // its references were bound to the provider's copy at load
  bundle.globalHandle = dlopen(file.c_str(), RTLD_NOW | RTLD_NOLOAD | RTLD_GLOBAL);
  if (!bundle.globalHandle)
    return fail(error, ATTNC_ERROR_LOAD,
                std::string("cannot share the bundle's runtime: ") + dlerror());
  provider = wanted;
  return ATTNC_OK;
}

// Checks a kernel's exports (ABI, manifest, a run function per target) and picks the target
// it runs on this host: what opening a bundle file and a linked kernel share.
attnc_status openExports(attnc_bundle& bundle, const attnc_kernel_exports& exports,
                         attnc_error* error) {
  if (exports.abi_version != ATTNC_ABI_VERSION)
    return fail(error, ATTNC_ERROR_ABI_MISMATCH,
                "bundle was built for ABI version " + std::to_string(exports.abi_version) +
                    "; this runtime supports version " + std::to_string(ATTNC_ABI_VERSION) +
                    " (recompile the bundle with a matching attnc)");
  bundle.manifestJson = exports.manifest;
  try {
    bundle.manifest = attnc::runtime::parseRuntimeManifest(bundle.manifestJson);
  } catch (const std::exception& e) {
    return fail(error, ATTNC_ERROR_MANIFEST, e.what());
  }
  if (bundle.manifest.abiVersion != exports.abi_version)
    return fail(error, ATTNC_ERROR_MANIFEST,
                "manifest says ABI version " + std::to_string(bundle.manifest.abiVersion) +
                    " but the bundle exports " + std::to_string(exports.abi_version));
  if (bundle.manifest.fat && !exports.target_runs)
    return fail(error, ATTNC_ERROR_LOAD,
                "the manifest lists several targets but the bundle lacks attnc_kernel_target_runs");
  if (attnc_status status = chooseTarget(bundle, error); status != ATTNC_OK)
    return status;
  bundle.run = bundle.manifest.fat
                   ? exports.target_runs[bundle.target - bundle.manifest.targets.data()]
                   : exports.run;
  return ATTNC_OK;
}

// The call's tensors in the order of the entry's arguments, each given once.
attnc_status orderTensors(const std::vector<attnc::runtime::ArgumentSpec>& args,
                          const attnc_named_tensor* tensors, size_t num_tensors,
                          std::vector<DLTensor*>& ordered, attnc_error* error) {
  ordered.assign(args.size(), nullptr);
  for (size_t t = 0; t < num_tensors; ++t) {
    const char* name = tensors[t].name ? tensors[t].name : "";
    auto it = std::find_if(args.begin(), args.end(), [&](const auto& a) { return a.name == name; });
    if (it == args.end()) {
      std::string known;
      for (const auto& a : args)
        known += (known.empty() ? "" : ", ") + a.name;
      return fail(error, ATTNC_ERROR_INVALID_ARGUMENT,
                  std::string("unknown tensor name '") + name + "'; this bundle takes: " + known);
    }
    DLTensor*& slot = ordered[it - args.begin()];
    if (slot)
      return fail(error, ATTNC_ERROR_INVALID_ARGUMENT,
                  std::string("tensor '") + name + "' is given twice");
    if (!tensors[t].tensor)
      return fail(error, ATTNC_ERROR_INVALID_ARGUMENT,
                  std::string("tensor '") + name + "' is a null pointer");
    slot = tensors[t].tensor;
  }
  for (size_t a = 0; a < args.size(); ++a)
    if (!ordered[a])
      return fail(error, ATTNC_ERROR_INVALID_ARGUMENT,
                  "tensor '" + args[a].name +
                      "' is missing; this bundle needs every argument "
                      "its manifest lists");
  return ATTNC_OK;
}

// Runs one of the bundle's entries, whose arguments `manifest` lists.
attnc_status runEntry(const attnc_bundle* bundle, const attnc::runtime::RuntimeManifest& manifest,
                      attnc_entry entry, const attnc_named_tensor* tensors, size_t num_tensors,
                      const attnc_run_options* options, attnc_error* error) {
  const auto& args = manifest.arguments;
  std::vector<DLTensor*> ordered;
  if (attnc_status status = orderTensors(args, tensors, num_tensors, ordered, error);
      status != ATTNC_OK)
    return status;
  attnc::RunSizes sizes;
  if (auto problem = attnc::runtime::checkTensors(manifest, bundle->target->device, ordered, sizes))
    return fail(error, ATTNC_ERROR_TENSOR_MISMATCH, *problem);
  attnc::runtime::CacheIndices cache;
  if (auto problem =
          attnc::runtime::checkKvCache(manifest, bundle->target->device, ordered, sizes, &cache))
    return fail(error, ATTNC_ERROR_INVALID_ARGUMENT, *problem);
  const bool ragged = manifest.ragged;
  std::vector<int64_t> offsets;
  if (ragged)
    if (auto problem = attnc::runtime::readQueryOffsets(manifest, bundle->target->device, ordered,
                                                        sizes, &offsets))
      return fail(error, ATTNC_ERROR_INVALID_ARGUMENT, *problem);

  int32_t threads = options && options->num_threads > 0
                        ? options->num_threads
                        : attnc::runtime::ThreadPool::hardwareThreads();
  // The new rows into the cache first (kv_append); the kernel takes every argument but them.
  if (manifest.kvAppend)
    if (auto problem = attnc::runtime::appendNewRows(manifest, ordered, sizes, cache, offsets))
      return fail(error, ATTNC_ERROR_INVALID_ARGUMENT, *problem);
  std::vector<DLTensor*> kernelArgs;
  for (size_t a : manifest.kernelArguments)
    kernelArgs.push_back(ordered[a]);
  attnc_kernel_call call{};
  call.abi_version = ATTNC_ABI_VERSION;
  call.num_args = static_cast<uint32_t>(kernelArgs.size());
  call.entry = entry;
  call.args = kernelArgs.data();
  call.batch = sizes[attnc::SizeSymbol::Batch];
  call.seq_q = sizes[attnc::SizeSymbol::SeqQ];
  call.seq_k = sizes[attnc::SizeSymbol::SeqK];
  call.num_threads = threads;
  call.parallel_for = &attnc::runtime::ThreadPool::parallelForEntry;
  call.pool = &attnc::runtime::ThreadPool::global();
  call.stream = options ? options->stream : nullptr;
  char message[sizeof(attnc_error::message)] = "";
  if (!ragged) {
    if (const int32_t result = bundle->run(&call, message, sizeof(message)); result != 0)
      return failedRun(error, result, "", message);
    return succeed(error);
  }
  // A ragged batch: the kernel runs once per run of sequences with the same number of rows
  // (attnc/SequenceViews.hpp), each call on every thread.
  std::vector<std::vector<attnc::DimExpr>> kernelDims;
  for (size_t a : manifest.kernelArguments)
    kernelDims.push_back(args[a].shape);
  attnc::SequenceViews views(kernelDims, kernelArgs);
  call.num_args = static_cast<uint32_t>(kernelArgs.size() - 1);
  int64_t runStart = 0, runEnd = 0;
  const int failed =
      attnc::forEachRun(offsets, [&](int64_t b, int64_t sequences, int64_t first, int64_t rows) {
        call.args = views.select(b, sequences, first, rows).data();
        call.batch = sequences;
        call.seq_q = rows;
        runStart = b;
        runEnd = b + sequences;
        return static_cast<int>(bundle->run(&call, message, sizeof(message)));
      });
  if (failed != 0)
    return failedRun(
        error, failed,
        " on sequences " + std::to_string(runStart) + " to " + std::to_string(runEnd - 1), message);
  return succeed(error);
}

} // namespace

extern "C" {

uint32_t attnc_runtime_abi_version(void) {
  return ATTNC_ABI_VERSION;
}

const char* attnc_status_name(attnc_status status) {
  switch (status) {
  case ATTNC_OK: return "ok";
  case ATTNC_ERROR_INVALID_ARGUMENT: return "invalid argument";
  case ATTNC_ERROR_LOAD: return "load error";
  case ATTNC_ERROR_ABI_MISMATCH: return "ABI mismatch";
  case ATTNC_ERROR_UNSUPPORTED_TARGET: return "unsupported target";
  case ATTNC_ERROR_MANIFEST: return "bad manifest";
  case ATTNC_ERROR_TENSOR_MISMATCH: return "tensor mismatch";
  case ATTNC_ERROR_KERNEL: return "kernel error";
  }
  return "unknown status";
}

attnc_status attnc_bundle_open(const char* path, attnc_bundle** bundle, attnc_error* error) {
  if (!path || !bundle)
    return fail(error, ATTNC_ERROR_INVALID_ARGUMENT, "attnc_bundle_open: null path or result");
  *bundle = nullptr;
  auto loaded = std::make_unique<attnc_bundle>();
  // dlopen searches the library path for a name without a slash; a bundle is always a file.
  std::string file = std::string(path).find('/') == std::string::npos ? "./" + std::string(path)
                                                                      : std::string(path);
  if (auto problem = attnc::runtime::sharedObjectProblem(file))
    return fail(error, ATTNC_ERROR_LOAD, "cannot load bundle " + file + ": " + *problem);
  loaded->handle = dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!loaded->handle)
    return fail(error, ATTNC_ERROR_LOAD, std::string("cannot load bundle: ") + dlerror());

  auto* abi = static_cast<const uint32_t*>(dlsym(loaded->handle, "attnc_kernel_abi"));
  attnc_kernel_exports exports{};
  exports.manifest = static_cast<const char*>(dlsym(loaded->handle, "attnc_kernel_manifest"));
  exports.run = reinterpret_cast<attnc_kernel_run_fn>(dlsym(loaded->handle, "attnc_kernel_run"));
  exports.target_runs = static_cast<const attnc_kernel_run_fn*>(
      dlsym(loaded->handle, "attnc_kernel_target_runs"));
  if (!abi || !exports.manifest || !exports.run)
    return fail(error, ATTNC_ERROR_LOAD,
                std::string(path) + " is not an attnc bundle: it lacks attnc_kernel_abi, "
                                    "attnc_kernel_manifest or attnc_kernel_run");
  exports.abi_version = *abi;
  if (attnc_status status = openExports(*loaded, exports, error); status != ATTNC_OK)
    return status;
  if (!loaded->manifest.sharedRuntime.empty())
    if (attnc_status status = shareRuntime(*loaded, file, error); status != ATTNC_OK)
      return status;
  *bundle = loaded.release();
  return succeed(error);
}

attnc_status attnc_bundle_open_linked(const attnc_kernel_exports* exports, attnc_bundle** bundle,
                                      attnc_error* error) {
  if (!exports || !bundle || !exports->manifest || !exports->run)
    return fail(error, ATTNC_ERROR_INVALID_ARGUMENT,
                "attnc_bundle_open_linked: null exports, manifest, run function or result");
  *bundle = nullptr;
  auto opened = std::make_unique<attnc_bundle>();
  if (attnc_status status = openExports(*opened, *exports, error); status != ATTNC_OK)
    return status;
  if (exports->target_runs && exports->num_targets != opened->manifest.targets.size())
    return fail(error, ATTNC_ERROR_MANIFEST,
                "the kernel has " + std::to_string(exports->num_targets) +
                    " run functions but its manifest lists " +
                    std::to_string(opened->manifest.targets.size()) + " targets");
  *bundle = opened.release();
  return succeed(error);
}

void attnc_bundle_close(attnc_bundle* bundle) {
  delete bundle;
}

const char* attnc_bundle_manifest(const attnc_bundle* bundle) {
  return bundle ? bundle->manifestJson.c_str() : nullptr;
}

const char* attnc_bundle_target(const attnc_bundle* bundle) {
  return bundle ? bundle->target->name.c_str() : nullptr;
}

const char* attnc_bundle_target_choice(const attnc_bundle* bundle) {
  return bundle ? bundle->targetChoice.c_str() : nullptr;
}

attnc_status attnc_bundle_run(const attnc_bundle* bundle, const attnc_named_tensor* tensors,
                              size_t num_tensors, const attnc_run_options* options,
                              attnc_error* error) {
  if (!bundle || (!tensors && num_tensors > 0))
    return fail(error, ATTNC_ERROR_INVALID_ARGUMENT, "attnc_bundle_run: null bundle or tensors");
  return runEntry(bundle, bundle->manifest, ATTNC_ENTRY_FORWARD, tensors, num_tensors, options,
                  error);
}

attnc_status attnc_bundle_run_backward(const attnc_bundle* bundle,
                                       const attnc_named_tensor* tensors, size_t num_tensors,
                                       const attnc_run_options* options, attnc_error* error) {
  if (!bundle || (!tensors && num_tensors > 0))
    return fail(error, ATTNC_ERROR_INVALID_ARGUMENT,
                "attnc_bundle_run_backward: null bundle or tensors");
  if (!bundle->manifest.backward)
    return fail(error, ATTNC_ERROR_INVALID_ARGUMENT,
                "this bundle has no backward entry; compile its spec with backward=true");
  return runEntry(bundle, *bundle->manifest.backward, ATTNC_ENTRY_BACKWARD, tensors, num_tensors,
                  options, error);
}

} // extern "C"
