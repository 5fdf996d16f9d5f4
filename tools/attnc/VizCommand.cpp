// attnc viz: the attention weights a bundle computes for one batch entry and head, checked
// against the f64 reference and drawn as a heatmap, queries down and keys across, with the
// tokens on the axes when a token list is given.
#include "CallSetup.h"
#include "Commands.h"
#include "Compare.h"
#include "Heatmap.h"
#include "RunSupport.h"

#include <filesystem>
#include <fmt/core.h>
#include <fstream>
#include <memory>

namespace attnc::tools {
namespace {

struct VizOptions {
  RunOptions run;
  int64_t head = 0, batchEntry = 0;
  std::string queryRange, keyRange;
  std::string tokens, queryTokens;
  std::string image;
  bool check = true;
};

int64_t rangeBound(const std::string& part, int64_t fallback, const std::string& option,
                   const std::string& text) {
  if (part.empty())
    return fallback;
  try {
    size_t used = 0;
    const int64_t value = std::stoll(part, &used);
    if (used == part.size() && value >= 0)
      return value;
  } catch (const std::exception&) {
  }
  throw UsageError(option + " " + text + ": '" + part + "' is not a position (0 or more)");
}

// "FIRST:END" with END excluded, either side optional ("8:", ":16"), as a Python slice without
// steps or negative positions; the whole axis when empty.
IndexRange parseRange(const std::string& text, int64_t count, const std::string& option,
                      const std::string& what) {
  if (text.empty())
    return {0, count};
  const size_t colon = text.find(':');
  if (colon == std::string::npos)
    throw UsageError(option + " " + text + ": expected FIRST:END (END excluded), e.g. 0:16");
  const IndexRange r{rangeBound(text.substr(0, colon), 0, option, text),
                     rangeBound(text.substr(colon + 1), count, option, text)};
  if (r.begin >= r.end || r.end > count)
    throw UsageError(fmt::format("{} {}: must be a non-empty range within 0:{}, the {} of this call",
                                 option, text, count, what));
  return r;
}

void requireDrawable(IndexRange r, const std::string& option, const std::string& what) {
  if (r.size() > kMaxHeatmapCells)
    throw UsageError(fmt::format("{} {} to draw, but viz draws at most {} per axis; choose fewer "
                                 "with {} FIRST:END",
                                 r.size(), what, kMaxHeatmapCells, option));
}

// One token per line, kept as written (a trailing CR dropped).
std::vector<std::string> readTokens(const std::string& path, const std::string& option) {
  if (path.empty())
    return {};
  std::ifstream in(path);
  if (!in)
    throw UsageError(option + " " + path + ": cannot read it");
  std::vector<std::string> tokens;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line.back() == '\r')
      line.pop_back();
    tokens.push_back(line);
  }
  if (tokens.empty())
    throw UsageError(option + " " + path + ": has no tokens (one per line)");
  return tokens;
}

void requireTokenCount(const std::vector<std::string>& tokens, int64_t count,
                       const std::string& option, const std::string& what) {
  if (!tokens.empty() && static_cast<int64_t>(tokens.size()) != count)
    throw UsageError(fmt::format("{} has {} tokens, but this call has {} {}", option,
                                 tokens.size(), count, what));
}

void requireIndex(int64_t value, int64_t count, const std::string& option,
                  const std::string& what) {
  if (value < 0 || value >= count)
    throw UsageError(fmt::format("{} {}: must be in 0..{} (this call has {} {})", option, value,
                                 count - 1, count, what));
}

std::vector<std::string> sliced(const std::vector<std::string>& tokens, IndexRange r) {
  if (tokens.empty())
    return {};
  return {tokens.begin() + r.begin, tokens.begin() + r.end};
}

// Fails the job when the kernel's weights differ from the f64 reference's.
void checkWeights(Call& call, int32_t threads) {
  std::vector<HostTensor> expected = referenceOutputs(call, threadedFor(threadsOrAll(threads)));
  size_t e = 0;
  for (const Argument& a : call.arguments) {
    if (a.role != ArgumentRole::Output)
      continue;
    if (a.name == "weights") {
      const Comparison c =
          compare(call.tensor("weights").values(), expected[e].values(),
                  toleranceFor(call.spec.dtype,
                               reductionLength(call.spec, call.sizes[SizeSymbol::SeqK])));
      if (c.failures != 0)
        throw JobError(fmt::format("the kernel's weights differ from the f64 reference at {} "
                                   "elements (max abs err {:.3e}); no image written",
                                   c.failures, c.maxAbsError));
      fmt::print("weights match the f64 reference (max abs err {:.3e})\n", c.maxAbsError);
    }
    ++e;
  }
}

int runViz(const VizOptions& o) {
  runtime::Bundle bundle = runtime::Bundle::open(o.run.bundle);
  const Spec spec = bundleSpec(bundle);
  if (!spec.weights)
    throw UsageError(o.run.bundle + " returns no attention weights; compile its spec with "
                                    "weights=true");
  const std::vector<std::string> keyTokens = readTokens(o.tokens, "--tokens");
  const std::vector<std::string> queryTokens =
      o.queryTokens.empty() ? keyTokens : readTokens(o.queryTokens, "--query-tokens");

  // With random inputs and no sizes given, the token lists set the lengths.
  CallFlags flags = withParams(o.run);
  if (flags.inputFiles.empty()) {
    if (!flags.seqQ && !queryTokens.empty())
      flags.seqQ = static_cast<int64_t>(queryTokens.size());
    if (!flags.seqK && !keyTokens.empty() && spec.variant != Variant::Linformer)
      flags.seqK = static_cast<int64_t>(keyTokens.size());
  }
  Call call = prepareCall(spec, flags);
  const int64_t batch = call.sizes[SizeSymbol::Batch], seqQ = call.sizes[SizeSymbol::SeqQ];
  const int64_t keysSeen = call.tensor("weights").shape().back();
  // Linformer attends over proj_len projections of the keys, not over the tokens.
  const bool keysAreTokens = spec.variant != Variant::Linformer;
  requireIndex(o.head, spec.heads, "--head", "heads");
  requireIndex(o.batchEntry, batch, "--batch-entry", "batch entries");
  requireTokenCount(queryTokens, seqQ, o.queryTokens.empty() ? "--tokens" : "--query-tokens",
                    "queries");
  if (keysAreTokens)
    requireTokenCount(keyTokens, keysSeen, "--tokens", "keys");
  const IndexRange queries = parseRange(o.queryRange, seqQ, "--query-range", "queries");
  const IndexRange keys = parseRange(o.keyRange, keysSeen, "--key-range", "keys");
  requireDrawable(queries, "--query-range", "queries");
  requireDrawable(keys, "--key-range", "keys");

  (void)timedRuns(bundle, call, o.run.threads, 1);
  if (o.check)
    checkWeights(call, o.run.threads);

  Heatmap map;
  map.title = fmt::format("{}: head {} of {}, batch entry {}",
                          std::filesystem::path(o.run.bundle).filename().string(), o.head,
                          spec.heads, o.batchEntry);
  map.rows = queries.size();
  map.columns = keys.size();
  const std::vector<double> weights = call.tensor("weights").values(); // [B, H, Tq, keys]
  for (int64_t i = queries.begin; i < queries.end; ++i)
    for (int64_t j = keys.begin; j < keys.end; ++j)
      map.values.push_back(weights[static_cast<size_t>(
          ((o.batchEntry * spec.heads + o.head) * seqQ + i) * keysSeen + j)]);
  map.kept = keptScores(call, o.batchEntry, o.head, queries, keys);
  map.rowAxis = {"queries", queries.begin, sliced(queryTokens, queries)};
  map.columnAxis = {keysAreTokens ? "keys" : "projected keys", keys.begin,
                    keysAreTokens ? sliced(keyTokens, keys) : std::vector<std::string>{}};
  writeHeatmap(map, o.image);
  const HeatmapLayout l = heatmapLayout(map);
  fmt::print("wrote {}: {} queries x {} keys, cells of {} px from ({}, {})\n", o.image, map.rows,
             map.columns, l.cell, l.left, l.top);
  return 0;
}

} // namespace

Action addVizCommand(CLI::App& app) {
  auto o = std::make_shared<VizOptions>();
  CLI::App* cmd = app.add_subcommand(
      "viz", "Draw the attention weights of one head as a heatmap (PNG or SVG), checked against "
             "the f64 reference; the bundle needs weights=true");
  addCallOptions(cmd, o->run);
  cmd->add_option("-o,--output", o->image, "the image: .png or .svg")->required();
  cmd->add_option("--head", o->head, "the head to draw")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--batch-entry", o->batchEntry, "the batch entry to draw")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--query-range", o->queryRange, "queries FIRST:END, END excluded (default all)");
  cmd->add_option("--key-range", o->keyRange, "keys FIRST:END, END excluded (default all)");
  cmd->add_option("--tokens", o->tokens,
                  "a file with one token per line: labels the keys, and the queries unless "
                  "--query-tokens is given; with random inputs it sets the lengths");
  cmd->add_option("--query-tokens", o->queryTokens, "the queries' tokens, one per line");
  cmd->add_flag("!--no-check", o->check,
                "skip comparing the weights with the f64 reference (for long sequences)");
  return [o] { return runViz(*o); };
}

} // namespace attnc::tools
