#include "CallSetup.h"

#include "Npy.h"
#include "Reference/MaskEvaluator.h"
#include "Semantics/Favor.h"
#include "Semantics/Random.h"
#include "Support/Errors.h"
#include "attnc/DType.hpp"
#include "attnc/Float8.hpp"
#include "attnc/TensorSpan.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fmt/core.h>
#include <numeric>
#include <sstream>
#include <unistd.h>

namespace attnc::tools {
namespace {

std::string sizeName(SizeSymbol s) {
  return std::string(kSizeSymbolNames[static_cast<int>(s)]);
}

// Binds unbound sizes from a file tensor whose rank matches the argument.
void bindFromFile(const Argument& arg, const HostTensor& t, RunSizes& sizes,
                  const std::string& path) {
  if (t.shape().size() != arg.shape.size())
    throw UsageError(path + " has rank " + std::to_string(t.shape().size()) + "; '" + arg.name +
                     "' needs rank " + std::to_string(arg.shape.size()));
  for (size_t d = 0; d < arg.shape.size(); ++d)
    if (arg.shape[d].binds() && sizes[*arg.shape[d].symbol] == 0)
      sizes[*arg.shape[d].symbol] = arg.shape[d].boundSize(t.shape()[d]).value_or(0);
}

void applyFlag(RunSizes& sizes, SizeSymbol s, std::optional<int64_t> flag, const char* option) {
  if (!flag)
    return;
  if (*flag < 1)
    throw UsageError(std::string(option) + " " + std::to_string(*flag) + ": must be at least 1");
  if (sizes[s] != 0 && sizes[s] != *flag)
    throw UsageError(std::string(option) + " " + std::to_string(*flag) +
                     " disagrees with the "
                     "input files, which have " +
                     sizeName(s) + "=" + std::to_string(sizes[s]));
  sizes[s] = *flag;
}

std::vector<int64_t> concreteShape(const Argument& arg, const RunSizes& sizes) {
  std::vector<int64_t> shape;
  for (const DimExpr& d : arg.shape)
    shape.push_back(*d.evaluate(sizes));
  return shape;
}

constexpr uint32_t kInputStream = 0xDA7A0000u; // random inputs, apart from the spec's streams

// Uniform 32-bit words for argument `stream`, from the seed.
class Words {
public:
  Words(uint64_t seed, uint32_t stream) : seed_(seed), stream_(stream) {}
  uint32_t next() {
    if (used_ == 4) {
      const uint64_t key = random::streamKey(seed_, kInputStream);
      block_ = random::philox4x32({counter_++, stream_, 1, 0}, static_cast<uint32_t>(key),
                                  static_cast<uint32_t>(key >> 32));
      used_ = 0;
    }
    return block_[used_++];
  }

private:
  uint64_t seed_;
  uint32_t stream_, counter_ = 0;
  random::Block block_{};
  int used_ = 4;
};

std::vector<double> randomValues(const Spec& spec, const Argument& arg,
                                 const std::vector<int64_t>& shape, const RunSizes& sizes,
                                 uint64_t seed, uint32_t stream) {
  int64_t count = 1;
  for (int64_t extent : shape)
    count *= extent;
  std::vector<double> values(count);
  Words words(seed, stream);
  random::GaussianStream gaussian(seed, kInputStream, stream);
  switch (arg.fill) {
  case ArgumentFill::Normal:
    for (double& v : values)
      v = gaussian.next();
    break;
  case ArgumentFill::ScaledNormal: {
    double sd = 1.0 / std::sqrt(static_cast<double>(shape[arg.fanInDim]));
    for (double& v : values)
      v = sd * gaussian.next();
    break;
  }
  case ArgumentFill::Lengths: // uniform in [0, Tk]: 0 gives fully masked rows
    for (double& v : values)
      v = words.next() % (sizes[SizeSymbol::SeqK] + 1);
    break;
  case ArgumentFill::BlockTable: {
    // Distinct pages, shuffled (Fisher-Yates), so that no sequence's pages are in order; with
    // fewer pages than entries (a k_pages file), they repeat.
    std::vector<int64_t> pages(sizes[SizeSymbol::Pages]);
    std::iota(pages.begin(), pages.end(), 0);
    for (size_t k = pages.size(); k > 1; --k)
      std::swap(pages[k - 1], pages[words.next() % k]);
    for (size_t e = 0; e < values.size(); ++e)
      values[e] = static_cast<double>(pages[e % pages.size()]);
    break;
  }
  case ArgumentFill::QueryOffsets: // prepareCall draws them first: they size q and o
    break;
  case ArgumentFill::Int8Values:
    for (double& v : values)
      v = static_cast<double>(words.next() % 255) - 127;
    break;
  case ArgumentFill::Fp8Values:
    for (double& v : values)
      v = doubleToE4m3(static_cast<double>(words.next() % 255) - 127);
    break;
  case ArgumentFill::RowScales:
    for (double& v : values)
      v = (1.0 + (words.next() % 1024) / 512.0) / 256.0;
    break;
  case ArgumentFill::MaskBits:
    for (double& v : values)
      v = words.next() % 5 != 0; // 80% kept
    break;
  case ArgumentFill::BlockLayout:
    for (double& v : values)
      v = words.next() % 2;
    break;
  case ArgumentFill::FavorFeatures:
    values = favor::orthogonalFeatures(*spec.seed, spec.features, spec.dK);
    break;
  case ArgumentFill::SmallIntegers:
    for (double& v : values)
      v = words.next() % 8;
    break;
  case ArgumentFill::None: break;
  }
  return values;
}

HostTensor lengthsFromList(const std::string& list, int64_t batch, int64_t seqK) {
  std::vector<double> values;
  std::stringstream items(list);
  std::string item;
  while (std::getline(items, item, ',')) {
    int64_t length = 0;
    auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), length);
    if (ec != std::errc() || end != item.data() + item.size() || length < 0 || length > seqK)
      throw UsageError("--lengths " + list + ": '" + item + "' is not an integer in [0, Tk=" +
                       std::to_string(seqK) + "]");
    values.push_back(static_cast<double>(length));
  }
  if (!list.empty() && list.back() == ',')
    throw UsageError("--lengths " + list + ": ends with a comma");
  if (static_cast<int64_t>(values.size()) != batch)
    throw UsageError("--lengths " + list + ": gives " + std::to_string(values.size()) +
                     " lengths for batch " + std::to_string(batch));
  HostTensor t(*parseDType("i32"), {batch});
  t.assign(values);
  return t;
}

// The file's values in the argument's dtype, converted exactly or refused: float dtypes take any
// numbers (rounded once); integer dtypes take integers in their range; a u8 mask also takes a
// float mask in PyTorch's additive convention, 0 (attend) and -inf (masked).
HostTensor convertInput(const Argument& arg, const HostTensor& file, const std::string& path) {
  const DLDataType dtype = *parseDType(arg.dtypes.front());
  std::vector<double> values = file.values();
  HostTensor converted(dtype, file.shape());
  if (dtype.code == kDLFloat || dtype.code == kDLBfloat) {
    converted.assign(values);
    return converted;
  }
  const bool floatFile = file.dtype().code == kDLFloat;
  if (arg.fill == ArgumentFill::MaskBits && floatFile) {
    for (size_t i = 0; i < values.size(); ++i) {
      if (values[i] != 0 && values[i] != -INFINITY)
        throw UsageError(fmt::format(
            "{}: '{}' as floats holds {} at flat index {}; a float mask follows PyTorch's "
            "additive convention, 0 (attend) or -inf (masked); give a bool or u8 mask (1: attend) "
            "otherwise, or additive values through bias=true",
            path, arg.name, values[i], i));
      values[i] = values[i] == 0 ? 1 : 0;
    }
  } else {
    const double lo = dtype.code == kDLUInt ? 0 : -std::ldexp(1.0, dtype.bits - 1);
    const double hi = dtype.code == kDLUInt ? std::ldexp(1.0, dtype.bits) - 1
                                            : std::ldexp(1.0, dtype.bits - 1) - 1;
    for (size_t i = 0; i < values.size(); ++i)
      if (!(values[i] >= lo && values[i] <= hi && values[i] == std::floor(values[i])))
        throw UsageError(fmt::format("{}: '{}' takes {} integers in [{}, {}]; the file holds {} "
                                     "at flat index {}",
                                     path, arg.name, dtypeName(dtype), lo, hi, values[i], i));
  }
  converted.assign(values);
  return converted;
}

// Refuses sizes whose tensors cannot be held: more bytes than 64 bits count, or than this
// machine's memory, before anything is allocated.
void checkCallFits(const std::vector<Argument>& arguments, const RunSizes& sizes) {
  const auto machine = static_cast<double>(::sysconf(_SC_PHYS_PAGES)) *
                       static_cast<double>(::sysconf(_SC_PAGE_SIZE));
  double total = 0, largest = 0;
  std::string largestName;
  for (const Argument& arg : arguments) {
    const std::vector<int64_t> shape = concreteShape(arg, sizes);
    const std::optional<int64_t> count =
        elementCount(shape.data(), static_cast<int32_t>(shape.size()));
    const std::optional<int64_t> bytes =
        count ? byteCount(*count, *parseDType(arg.dtypes.front())) : std::nullopt;
    if (!bytes)
      throw UsageError(fmt::format("{}: tensor '{}' would have more bytes than the address "
                                   "space holds",
                                   sizesText(sizes), arg.name));
    const auto need = static_cast<double>(*bytes);
    total += need;
    if (need > largest || largestName.empty()) {
      largest = need;
      largestName = arg.name;
    }
  }
  if (total > machine)
    throw UsageError(fmt::format("{}: the call's tensors need {:.4g} GB ('{}' alone {:.4g} GB); "
                                 "this machine has {:.4g} GB of memory",
                                 sizesText(sizes), total / 1e9, largestName, largest / 1e9,
                                 machine / 1e9));
}

// Lengths outside [0, Tk] name no key count.
void checkLengths(const HostTensor& lengths, int64_t seqK, const std::string& path) {
  const std::vector<double> values = lengths.values();
  for (size_t b = 0; b < values.size(); ++b)
    if (values[b] < 0 || values[b] > static_cast<double>(seqK))
      throw UsageError(fmt::format("{}: length {} of batch entry {} is outside [0, Tk={}]", path,
                                   values[b], b, seqK));
}

// A ragged batch's cu_seqlens_q, and total_q bound from it: the file's (its last offset), or
// drawn from the seed: the first sequence Tq rows (Tq the longest), each other uniform in
// [0, Tq], so batches mix empty, one-row (decode) and longer (prefill) sequences.
HostTensor raggedOffsets(Call& call, const std::map<std::string, HostTensor>& loaded,
                         const CallFlags& flags) {
  RunSizes& sizes = call.sizes;
  const int64_t batch = sizes[SizeSymbol::Batch], longest = sizes[SizeSymbol::SeqQ];
  HostTensor offsets(*parseDType("i32"), {batch + 1});
  if (auto it = loaded.find("cu_seqlens_q"); it != loaded.end()) {
    offsets = convertInput(*std::find_if(call.arguments.begin(), call.arguments.end(),
                                         [](const Argument& a) { return a.name == "cu_seqlens_q"; }),
                           it->second, flags.inputFiles.at("cu_seqlens_q"));
  } else {
    constexpr uint32_t kRowCounts = 0x5E0; // apart from the arguments' streams (their indices)
    Words words(flags.seed, kRowCounts);
    std::vector<double> values = {0};
    for (int64_t b = 0; b < batch; ++b)
      values.push_back(values.back() +
                       static_cast<double>(b == 0 ? longest : words.next() % (longest + 1)));
    offsets.assign(values);
  }
  const std::vector<double> values = offsets.values();
  const auto rows = static_cast<int64_t>(values.back());
  if (rows < 1)
    throw UsageError(fmt::format("cu_seqlens_q ends at {}: a ragged batch needs at least one "
                                 "query row",
                                 rows));
  if (sizes[SizeSymbol::QueryRows] == 0)
    sizes[SizeSymbol::QueryRows] = rows;
  return offsets;
}

// kv_append writes each sequence's new rows at its last positions: drawn lengths are raised to
// at least its rows (Tq, or a ragged batch's own).
void holdNewRows(Call& call) {
  const int64_t batch = call.sizes[SizeSymbol::Batch], capacity = call.sizes[SizeSymbol::SeqK];
  std::vector<double> lengths = call.tensor("seq_lens").values(), offsets;
  if (call.spec.raggedQueries)
    offsets = call.tensor("cu_seqlens_q").values();
  for (int64_t b = 0; b < batch; ++b) {
    const double rows = offsets.empty() ? static_cast<double>(call.sizes[SizeSymbol::SeqQ])
                                        : offsets[b + 1] - offsets[b];
    if (rows > static_cast<double>(capacity))
      throw UsageError(fmt::format("kv_append: sequence {} has {} new rows, more than the "
                                   "cache's Tk={}",
                                   b, rows, capacity));
    lengths[b] = std::max(lengths[b], rows);
  }
  call.tensor("seq_lens").assign(lengths);
}

} // namespace

std::string sizesText(const RunSizes& z) {
  if (z[SizeSymbol::QueryRows] != 0)
    return fmt::format("B={} total_q={} Tk={}", z[SizeSymbol::Batch], z[SizeSymbol::QueryRows],
                       z[SizeSymbol::SeqK]);
  return fmt::format("B={} Tq={} Tk={}", z[SizeSymbol::Batch], z[SizeSymbol::SeqQ],
                     z[SizeSymbol::SeqK]);
}

std::vector<attnc_named_tensor> Call::named() {
  std::vector<attnc_named_tensor> list;
  for (size_t i = 0; i < arguments.size(); ++i)
    list.push_back({arguments[i].name.c_str(), tensors[i].dl()});
  return list;
}

HostTensor& Call::tensor(const std::string& name) {
  for (size_t i = 0; i < arguments.size(); ++i)
    if (arguments[i].name == name)
      return tensors[i];
  throw UsageError("this bundle has no tensor '" + name + "'");
}

const HostTensor& Call::tensor(const std::string& name) const {
  return const_cast<Call*>(this)->tensor(name);
}

Call prepareCall(const Spec& spec, const CallFlags& flags) {
  Call call{spec, kernelArguments(spec), {}, {}};
  std::map<std::string, HostTensor> loaded;
  for (const auto& [name, path] : flags.inputFiles) {
    auto it = std::find_if(call.arguments.begin(), call.arguments.end(),
                           [&](const Argument& a) { return a.name == name; });
    if (it == call.arguments.end() || it->role == ArgumentRole::Output) {
      std::string names;
      for (const Argument& a : call.arguments)
        if (a.role != ArgumentRole::Output)
          names += (names.empty() ? "" : " ") + a.name;
      throw UsageError("this bundle takes no input '" + name + "'; its inputs are: " + names);
    }
    loaded.emplace(name, npy::read(path));
  }
  // --lengths fills the padding mask's lengths, or a KV cache's seq_lens.
  const std::string lengthsName = spec.cached() ? "seq_lens" : "lengths";
  bool lengthsFile = !flags.lengths.empty() && flags.lengths.ends_with(".npy");
  if (!flags.lengths.empty() && !spec.masks.has(MaskKind::Padding) && !spec.cached())
    throw UsageError("--lengths: this bundle has no padding mask and no KV cache");
  if (lengthsFile)
    loaded.emplace(lengthsName, npy::read(flags.lengths));

  for (const Argument& arg : call.arguments)
    if (auto it = loaded.find(arg.name); it != loaded.end())
      bindFromFile(arg, it->second, call.sizes,
                   flags.inputFiles.count(arg.name) ? flags.inputFiles.at(arg.name)
                                                    : flags.lengths);
  applyFlag(call.sizes, SizeSymbol::Batch, flags.batch, "--batch");
  applyFlag(call.sizes, SizeSymbol::SeqQ, flags.seqQ, "--seq-q");
  applyFlag(call.sizes, SizeSymbol::SeqK, flags.seqK, "--seq-k");
  RunSizes& sizes = call.sizes;
  if (sizes[SizeSymbol::Batch] == 0)
    sizes[SizeSymbol::Batch] = 1;
  if (sizes[SizeSymbol::SeqQ] == 0)
    sizes[SizeSymbol::SeqQ] = 128;
  if (sizes[SizeSymbol::SeqK] == 0)
    sizes[SizeSymbol::SeqK] = sizes[SizeSymbol::SeqQ];
  if (spec.kvCache == KvCache::Paged) {
    // Tk, each sequence's capacity, is whole pages; the cache has a spare page besides the
    // batch's, which no block table entry names.
    const int64_t page = spec.pageSize, keys = sizes[SizeSymbol::SeqK];
    sizes[SizeSymbol::SeqK] = (keys / page + (keys % page != 0)) * page;
    if (sizes[SizeSymbol::Pages] == 0)
      sizes[SizeSymbol::Pages] = sizes[SizeSymbol::Batch] * (sizes[SizeSymbol::SeqK] / page) + 1;
  }
  std::optional<HostTensor> queryOffsets;
  if (spec.raggedQueries)
    queryOffsets = raggedOffsets(call, loaded, flags);
  checkCallFits(call.arguments, sizes);

  for (size_t i = 0; i < call.arguments.size(); ++i) {
    const Argument& arg = call.arguments[i];
    const DLDataType dtype = *parseDType(arg.dtypes.front());
    std::vector<int64_t> shape = concreteShape(arg, sizes);
    HostTensor tensor(dtype, shape);
    if (auto it = loaded.find(arg.name); it != loaded.end()) {
      // Converted to the bundle's dtype; the runtime checks the shape.
      const std::string& path =
          flags.inputFiles.count(arg.name) ? flags.inputFiles.at(arg.name) : flags.lengths;
      tensor = convertInput(arg, it->second, path);
      if (arg.fill == ArgumentFill::Lengths)
        checkLengths(tensor, sizes[SizeSymbol::SeqK], path);
    } else if (arg.fill == ArgumentFill::QueryOffsets) {
      tensor = std::move(*queryOffsets);
    } else if (arg.name == lengthsName && !flags.lengths.empty()) {
      tensor = lengthsFromList(flags.lengths, sizes[SizeSymbol::Batch], sizes[SizeSymbol::SeqK]);
    } else if (arg.role != ArgumentRole::Output) {
      tensor.assign(randomValues(spec, arg, shape, sizes, flags.seed, static_cast<uint32_t>(i)));
    }
    call.tensors.push_back(std::move(tensor));
  }
  if (spec.kvAppend && !loaded.count("seq_lens") && flags.lengths.empty())
    holdNewRows(call);
  return call;
}

Call prepareBackwardCall(Call&& forward, uint64_t seed) {
  Call call{forward.spec, backwardArguments(forward.spec), {}, forward.sizes, ATTNC_ENTRY_BACKWARD};
  // Each gradient shaped as the tensor it differentiates (a broadcast bias of its own shape),
  // taken before the forward's tensors move over as they are: the process never holds them
  // twice.
  std::map<std::string, std::pair<DLDataType, std::vector<int64_t>>> gradientShapes;
  for (const Argument& arg : call.arguments)
    if (arg.role == ArgumentRole::Output) {
      const HostTensor& learned = forward.tensor(learnedName(arg.name));
      gradientShapes.emplace(arg.name, std::pair{learned.dtype(), learned.shape()});
    }
  // Streams apart from the forward's inputs', so grad_o is drawn independently of them.
  constexpr uint32_t kBackwardStreams = 1u << 16;
  for (size_t i = 0; i < call.arguments.size(); ++i) {
    const Argument& arg = call.arguments[i];
    if (arg.name == gradientName("o")) {
      const std::vector<int64_t> shape = concreteShape(arg, call.sizes);
      HostTensor tensor(*parseDType(arg.dtypes.front()), shape);
      tensor.assign(randomValues(call.spec, arg, shape, call.sizes, seed,
                                 kBackwardStreams + static_cast<uint32_t>(i)));
      call.tensors.push_back(std::move(tensor));
    } else if (arg.role == ArgumentRole::Output) {
      const auto& [dtype, shape] = gradientShapes.at(arg.name);
      call.tensors.emplace_back(dtype, shape);
    } else {
      call.tensors.push_back(std::move(forward.tensor(arg.name)));
    }
  }
  return call;
}

std::vector<HostTensor> referenceOutputs(Call& call, const ParallelFor& parallelFor) {
  std::vector<HostTensor> outputs;
  outputs.reserve(call.arguments.size());
  std::vector<DLTensor*> tensors;
  for (size_t i = 0; i < call.arguments.size(); ++i) {
    if (call.arguments[i].role == ArgumentRole::Output) {
      outputs.emplace_back(*parseDType("f64"), call.tensors[i].shape());
      tensors.push_back(outputs.back().dl());
    } else {
      tensors.push_back(call.tensors[i].dl());
    }
  }
  KernelTensors reference(call.spec, call.arguments, tensors, call.sizes[SizeSymbol::Batch],
                          call.sizes[SizeSymbol::SeqQ], call.sizes[SizeSymbol::SeqK]);
  if (call.entry == ATTNC_ENTRY_BACKWARD)
    runReferenceBackward(reference, parallelFor);
  else
    runReference(reference, parallelFor);
  return outputs;
}

namespace {

// Calls body(mask) with the spec's masks bound to the call's tensors.
template <class Body> void withMask(Call& call, Body body) {
  std::vector<DLTensor*> tensors;
  for (HostTensor& t : call.tensors)
    tensors.push_back(t.dl());
  KernelTensors view(call.spec, tensors, call.sizes[SizeSymbol::Batch],
                     call.sizes[SizeSymbol::SeqQ], call.sizes[SizeSymbol::SeqK]);
  body(MaskEvaluator(view));
}

// Linformer's masks act on the keys before E and F project them; its weights have none.
bool scoresAreMasked(const Spec& s) { return !s.masks.empty() && s.variant != Variant::Linformer; }

} // namespace

double maskDensity(Call& call) {
  if (call.spec.raggedQueries)
    throw UsageError("--mask-density: a ragged batch (ragged_q=true) has no one Tq to count "
                     "its scores over");
  if (!scoresAreMasked(call.spec))
    return 1.0;
  const int64_t B = call.sizes[SizeSymbol::Batch], H = call.spec.heads,
                Tq = call.sizes[SizeSymbol::SeqQ], Tk = call.sizes[SizeSymbol::SeqK];
  int64_t kept = 0;
  withMask(call, [&](const MaskEvaluator& mask) {
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t i = 0; i < Tq; ++i)
          for (int64_t j = 0; j < Tk; ++j)
            kept += mask.allowed(b, h, i, j);
  });
  return static_cast<double>(kept) / static_cast<double>(B * H * Tq * Tk);
}

std::vector<uint8_t> keptScores(Call& call, int64_t b, int64_t h, IndexRange queries,
                                IndexRange keys) {
  std::vector<uint8_t> kept(static_cast<size_t>(queries.size() * keys.size()), 1);
  if (!scoresAreMasked(call.spec))
    return kept;
  withMask(call, [&](const MaskEvaluator& mask) {
    size_t k = 0;
    for (int64_t i = queries.begin; i < queries.end; ++i)
      for (int64_t j = keys.begin; j < keys.end; ++j)
        kept[k++] = mask.allowed(b, h, i, j);
  });
  return kept;
}

} // namespace attnc::tools
