#!/usr/bin/env bash
# Runs each libFuzzer harness of fuzz/ for SECONDS, seeded with the shipped inputs.
#   scripts/fuzz.sh BUILD_DIR SECONDS [HARNESS...]      (make fuzz FUZZ_SECONDS=N)
# FUZZ_SEED fixes libFuzzer's seed; FUZZ_TIMEOUT (seconds, default 20) is how long one input
# may run before it counts as a hang (raise it for long runs on a loaded machine).
# Each harness keeps its growing corpus in BUILD_DIR/fuzz/corpus/NAME (so later runs start
# where earlier ones stopped) and writes what it finds to BUILD_DIR/fuzz/findings/NAME/.
# Exit status 1 when any harness found a crash, a leak, a hang or runaway memory; its
# input is named, to be turned into a file under tests/bad_inputs/ with its message.
set -uo pipefail
cd "$(dirname "$0")/.."
build=${1:?usage: scripts/fuzz.sh BUILD_DIR SECONDS [HARNESS...]}
seconds=${2:?usage: scripts/fuzz.sh BUILD_DIR SECONDS [HARNESS...]}
shift 2
harnesses=("$@")
[ ${#harnesses[@]} -gt 0 ] || harnesses=(platform workload parallel hf sweep native_trace et chakra)

# The seeds: every shipped input of the harness's kind, good and bad.
seeds() {
  case $1 in
    platform) ls configs/devices/*.yaml tests/scenarios/data/*.yaml tests/bad_inputs/*.yaml ;;
    workload) ls workloads/*.yaml tests/bad_inputs/*.yaml fuzz/seeds/workload/*.yaml ;;
    parallel) grep -l '^parallel:' workloads/*.yaml tests/scenarios/data/*.yaml fuzz/seeds/workload/*.yaml; ls fuzz/seeds/parallel/*.yaml ;;
    hf) ls fuzz/seeds/hf/* ;;
    sweep) ls configs/sweeps/*.yaml tests/bad_sweeps/*.yaml fuzz/seeds/sweep/*.yaml ;;
    native_trace) grep -l '"memsim-trace"' tests/bad_inputs/*.json tests/scenarios/data/*.json tests/scenarios/data/*/*.json fuzz/seeds/native_trace/* ;;
    et) ls tests/data/et/*.json tests/bad_inputs/et_*.json workloads/traces/mlp-b64.et.json
        external -name '*.json' | xargs -r grep -l '"schema"' ;;
    chakra) ls tests/bad_inputs/*.et fuzz/seeds/chakra/*.et; external -name '*.et' ;;
  esac 2>/dev/null
}
# Traces of other projects kept beside the repository (../shared/validation/external), small ones.
external() { [ -d ../shared/validation/external ] && find ../shared/validation/external -type f -size -256k "$@"; }
# The largest input tried: a few times the largest seed, within what runs fast.
max_len() { case $1 in et) echo 262144 ;; *) echo 65536 ;; esac; }

status=0
for h in "${harnesses[@]}"; do
  bin=$build/fuzz_$h
  [ -x "$bin" ] || { echo "fuzz: $bin is not built (make fuzz builds it)"; exit 2; }
  corpus=$build/fuzz/corpus/$h findings=$build/fuzz/findings/$h
  mkdir -p "$corpus" "$findings"
  seed_dir=$build/fuzz/seeds/$h
  rm -rf "$seed_dir" && mkdir -p "$seed_dir"
  seeds "$h" | while read -r f; do cp "$f" "$seed_dir/$(echo "${f#../}" | tr / _)"; done
  log=$build/fuzz/$h.log
  echo "fuzz: $h for ${seconds}s ($(ls -A "$seed_dir" | wc -l) seeds, corpus $corpus)"
  # -rss_limit_mb: inputs are bounded, so memory is too; -timeout: no input takes seconds.
  "$bin" "$corpus" "$seed_dir" -max_total_time="$seconds" -timeout="${FUZZ_TIMEOUT:-20}" -rss_limit_mb=3072 -seed="${FUZZ_SEED:-0}" \
    -max_len="$(max_len "$h")" -artifact_prefix="$findings/" -print_final_stats=1 >"$log" 2>&1
  rc=$?
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1)
  echo "fuzz: $h: ${runs:-?} runs, exit $rc"
  if [ $rc -ne 0 ]; then
    status=1
    grep -E '^(==[0-9]+==ERROR|SUMMARY|.*runtime error|artifact_prefix|Test unit written)' "$log" | head -20
    echo "fuzz: $h: full log in $log"
  fi
done
exit $status
