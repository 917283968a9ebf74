#!/usr/bin/env bash
# The reports of a big run: `memsim run` of a 25,000-layer chain (100,001 ops) writing all of
# its files (trace.pftrace included), then plot_memory.py and plot_timeline.py on them. Prints
# each step's wall-clock and CPU (user + system) seconds, and fails when the whole takes
# more than LIMIT_S (default 10) seconds of wall-clock time.
#
#   bench/report_bench.sh                 # with build/memsim, into bench-out/report
#   MEMSIM_BINARY=/tmp/b/memsim LAYERS=50000 bench/report_bench.sh /tmp/out
#   TRACE_FORMAT=json bench/report_bench.sh    # trace.json instead (--trace-format json)
set -euo pipefail
cd "$(dirname "$0")/.."
memsim=${MEMSIM_BINARY:-build/memsim}
out=${1:-bench-out/report}
layers=${LAYERS:-25000}
limit=${LIMIT_S:-10}
format=${TRACE_FORMAT:-pftrace}
trace_file=$([ "$format" = json ] && echo trace.json || echo trace.pftrace)
python=/usr/bin/python3

rm -rf "$out"
mkdir -p "$out"
TIMEFORMAT='%R %U %S'
total_wall=0 total_cpu=0
step() {  # step LABEL COMMAND...: runs it, prints "LABEL  wall s  cpu s", adds to the totals
  local label=$1 t
  shift
  t=$( { time "$@" > /dev/null; } 2>&1 | tail -1 )
  read -r wall user sys <<< "$t"
  local cpu
  cpu=$(awk -v u="$user" -v s="$sys" 'BEGIN { printf "%.2f", u + s }')
  printf '  %-62s %6.2f s wall  %6.2f s cpu\n' "$label" "$wall" "$cpu"
  total_wall=$(awk -v a="$total_wall" -v b="$wall" 'BEGIN { print a + b }')
  total_cpu=$(awk -v a="$total_cpu" -v b="$cpu" 'BEGIN { print a + b }')
}

echo "report_bench: chain of $layers layers on a100-40gb, into $out"
step "memsim run (simulate; timeline.csv, memory.csv, $trace_file)" \
  "$memsim" run a100-40gb workloads/chain.yaml --set "workload.layers=$layers" \
  --set workload.width=128 --trace-format "$format" --out "$out"
step "plot_memory.py" $python analysis/plot_memory.py "$out" -o "$out/memory.png"
step "plot_timeline.py" $python analysis/plot_timeline.py "$out" -o "$out/timeline.png"
printf '  %-62s %6.2f s wall  %6.2f s cpu (limit %s s wall)\n' total "$total_wall" "$total_cpu" "$limit"

ops=$($python -c "import json,sys; print(json.load(open(sys.argv[1]))['ops_total'])" "$out/summary.json")
echo "  $ops ops; $trace_file: $(du -m "$out/$trace_file" | cut -f1) MiB"
if awk -v t="$total_wall" -v l="$limit" 'BEGIN { exit !(t > l) }'; then
  echo "report_bench: over the limit of $limit s" >&2
  exit 1
fi
