#include "Tuning/TuningRecord.h"

#include <array>
#include <bit>
#include <ctime>
#include <random>
#include <stdexcept>

namespace attnc::tuning {
namespace {

constexpr std::array<const char*, 7> kStatusNames{"ok",    "wrong",   "invalid", "compile_error",
                                                  "crash", "timeout", "failed"};

std::pair<int64_t, int64_t> powerOfTwoRange(int64_t length) {
  const uint64_t lo = std::bit_floor(static_cast<uint64_t>(std::max<int64_t>(length, 1)));
  return {static_cast<int64_t>(lo), static_cast<int64_t>(2 * lo - 1)};
}

} // namespace

ShapeBucket ShapeBucket::of(int64_t seqQ, int64_t seqK) {
  auto [qLo, qHi] = powerOfTwoRange(seqQ);
  auto [kLo, kHi] = powerOfTwoRange(seqK);
  return {qLo, qHi, kLo, kHi};
}

bool ShapeBucket::contains(int64_t seqQ, int64_t seqK) const {
  return seqQ >= seqQLo && seqQ <= seqQHi && seqK >= seqKLo && seqK <= seqKHi;
}

std::string ShapeBucket::text() const {
  return "Tq " + std::to_string(seqQLo) + "-" + std::to_string(seqQHi) + ", Tk " +
         std::to_string(seqKLo) + "-" + std::to_string(seqKHi);
}

const char* statusName(TrialStatus status) {
  return kStatusNames[static_cast<size_t>(status)];
}

TrialStatus parseStatus(const std::string& name) {
  for (size_t i = 0; i < kStatusNames.size(); ++i)
    if (name == kStatusNames[i])
      return static_cast<TrialStatus>(i);
  throw std::invalid_argument("unknown trial status '" + name + "'");
}

std::string TrialRecord::candidate() const {
  std::string text = backend;
  for (const auto& [name, value] : params.items())
    text += " " + name + "=" + value.dump();
  return text;
}

nlohmann::json TrialRecord::toJson() const {
  return {{"uid", uid},
          {"spec_hash", key.specHash},
          {"spec", key.spec},
          {"seq_q_range", {key.bucket.seqQLo, key.bucket.seqQHi}},
          {"seq_k_range", {key.bucket.seqKLo, key.bucket.seqKHi}},
          {"target", key.target},
          {"hardware", key.hardware},
          {"attnc_version", key.attncVersion},
          {"backend", backend},
          {"toolchain", toolchain},
          {"params", params},
          {"status", statusName(status)},
          {"median_ms", medianMs},
          {"p10_ms", p10Ms},
          {"p90_ms", p90Ms},
          {"runs", runs},
          {"batch", batch},
          {"seq_q", seqQ},
          {"seq_k", seqK},
          {"threads", threads},
          {"detail", detail},
          {"seconds", seconds},
          {"created_at", createdAt},
          {"seed", seed},
          {"shard", shard},
          {"build", build}};
}

TrialRecord TrialRecord::fromJson(const nlohmann::json& j) {
  TrialRecord r;
  r.uid = j.at("uid").get<std::string>();
  r.key.specHash = j.at("spec_hash").get<std::string>();
  r.key.spec = j.at("spec").get<std::string>();
  r.key.bucket = {
      j.at("seq_q_range").at(0).get<int64_t>(), j.at("seq_q_range").at(1).get<int64_t>(),
      j.at("seq_k_range").at(0).get<int64_t>(), j.at("seq_k_range").at(1).get<int64_t>()};
  r.key.target = j.at("target").get<std::string>();
  r.key.hardware = j.at("hardware").get<std::string>();
  r.key.attncVersion = j.at("attnc_version").get<std::string>();
  r.backend = j.at("backend").get<std::string>();
  r.toolchain = j.at("toolchain").get<std::string>();
  r.params = j.at("params");
  if (!r.params.is_object())
    throw std::invalid_argument("params must be an object");
  r.status = parseStatus(j.at("status").get<std::string>());
  r.medianMs = j.at("median_ms").get<double>();
  r.p10Ms = j.at("p10_ms").get<double>();
  r.p90Ms = j.at("p90_ms").get<double>();
  r.runs = j.at("runs").get<int>();
  r.batch = j.at("batch").get<int64_t>();
  r.seqQ = j.at("seq_q").get<int64_t>();
  r.seqK = j.at("seq_k").get<int64_t>();
  r.threads = j.at("threads").get<int>();
  r.detail = j.at("detail").get<std::string>();
  r.seconds = j.at("seconds").get<double>();
  r.createdAt = j.at("created_at").get<std::string>();
  r.seed = j.at("seed").get<uint64_t>();
  r.shard = j.at("shard").get<std::string>();
  r.build = j.value("build", ""); // absent from records written before it was kept
  return r;
}

std::string newUid() {
  std::random_device device;
  std::string uid;
  for (int word = 0; word < 4; ++word) {
    char hex[9];
    std::snprintf(hex, sizeof hex, "%08x", static_cast<unsigned>(device()));
    uid += hex;
  }
  return uid;
}

std::string utcNow() {
  std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
}

} // namespace attnc::tuning
