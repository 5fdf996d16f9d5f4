#!/usr/bin/env bash
# The GPU side of scripts/gpu-kit: run from a copy of the kit's folder on a machine with an
# NVIDIA GPU and its driver.  run.sh OUT
set -uo pipefail
kit=$(cd "$(dirname "$0")" && pwd)
out=$(mkdir -p "${1:?usage: run.sh OUT}" && cd "$1" && pwd)
runner=$(mktemp -d)
trap 'rm -rf "$runner"' EXIT
tar -C "$runner" -xJf "$kit/runner.tar.xz"
export ATTNC_KIT_RUNNER="$runner/runner"
attnc() { LD_LIBRARY_PATH="$ATTNC_KIT_RUNNER" "$ATTNC_KIT_RUNNER/attnc" "$@"; }
export -f attnc
cd "$kit"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$out/gpu.txt"

# Numerics: each run against the f64 reference, several at once (the reference runs on the CPU).
# A backward run (its 6th field "backward") verifies the forward, then the backward entry; a
# 7th field other than "-" is a bias file.
verify_one() {
  local bundle=$1 batch=$2 seq_q=$3 seq_k=$4 seed=$5 entry=$6 bias=$7 result flags=()
  [[ $entry == backward ]] && flags=(--backward)
  [[ $bias != - ]] && flags+=(--bias "$bias")
  result=$(attnc verify "$bundle" --batch "$batch" --seq-q "$seq_q" --seq-k "$seq_k" \
             --seed "$seed" "${flags[@]}" 2>&1)
  if [[ $? == 0 && $result == *PASS* ]]; then
    echo "PASS $bundle $batch $seq_q $seq_k $entry"
  else
    printf 'FAIL %s %s %s %s %s\n%s\n' "$bundle" "$batch" "$seq_q" "$seq_k" "$entry" \
      "$(tail -n 12 <<< "$result" | sed 's/^/    /')"
  fi
}
export -f verify_one
python3 -c 'import json; [print(r["bundle"], *r["shape"], r["seed"],
                               "backward" if r["backward"] else "forward", r.get("bias", "-"))
                         for r in json.load(open("runs.json"))["verify"]]' |
  xargs -P "$(nproc)" -L 1 bash -c 'verify_one "$@"' _ > "$out/verify.log"
echo "verify: $(grep -c '^PASS' "$out/verify.log") passed, $(grep -c '^FAIL' "$out/verify.log") failed"
grep -A 12 '^FAIL' "$out/verify.log" | head -n 80

# attnc bench at the GPU shapes (medians of 20 after an L2 flush each).
python3 -c 'import json; [print(r["name"], r["bundle"], r["batch"], r["seq_q"], r["seq_k"],
                               "backward" if r["backward"] else "forward")
                         for r in json.load(open("runs.json"))["bench"]]' |
  while read -r name bundle batch seq_q seq_k entry; do
    echo "== $name B=$batch Tq=$seq_q Tk=$seq_k $entry"
    flags=(--no-baseline)
    [[ $entry == backward ]] && flags+=(--backward)
    attnc bench "$bundle" --batch "$batch" --seq-q "$seq_q" --seq-k "$seq_k" "${flags[@]}" \
      --runs 20 --warmup 3 2>&1 | grep -E 'kernel|error|attnc:'
  done | tee "$out/bench.log"

# The peers, when this machine's python3 has PyTorch.
if python3 -c 'import torch' 2>/dev/null; then
  PYTHONUNBUFFERED=1 python3 peers.py runs.json 2>&1 | grep -v Warning | tee "$out/peers.log"
else
  echo "peers: skipped (python3 has no torch)" | tee "$out/peers.log"
fi
