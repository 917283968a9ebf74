#!/usr/bin/env bash
# Installs the Debian 12 packages memsim needs: `install-deps.sh build` what building the
# memsim binary needs (what `make run` asks for), `install-deps.sh` (or `all`) also what
# the tests, the benchmarks and the plots need. Idempotent: prints nothing and touches
# nothing when everything is already there; otherwise one line per step, as it starts.
set -euo pipefail

what=${1:-all}
case "$what" in
  build|all) ;;
  *) echo "usage: install-deps.sh [build|all]" >&2; exit 2 ;;
esac

# Groups in install order: a name for the progress line, then the packages.
groups=(
  "the compiler and CMake|build-essential cmake pkg-config"
  "the simulator's libraries|libsimgrid-dev libboost-dev libyaml-cpp-dev libeigen3-dev libcli11-dev nlohmann-json3-dev libfmt-dev coinor-libcbc-dev libprotobuf-dev protobuf-compiler zlib1g-dev libsimdjson-dev"
  # CMake looks for these when it configures, also for the memsim target alone.
  "GoogleTest and Google Benchmark|libgtest-dev libgmock-dev googletest libbenchmark-dev"
)
if [[ $what == all ]]; then
  groups+=(
    "GNU parallel for the sweep tests|parallel"
    "Python for the plots and tests|python3-matplotlib python3-pandas python3-pytest python3-numpy"
    "pybind11 for the Python package (docs/python.md)|pybind11-dev python3-pybind11 python3-dev"
    "PyTorch for the trace and memory_viz tests (the largest step)|python3-torch python3-torchvision"
    "clang and libFuzzer for the fuzz harnesses (make fuzz)|clang libclang-rt-14-dev"
  )
fi

installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'; }

todo=()  # "name|missing packages" per group with something missing
for g in "${groups[@]}"; do
  missing=()
  for p in ${g#*|}; do installed "$p" || missing+=("$p"); done
  [[ ${#missing[@]} -gt 0 ]] && todo+=("${g%%|*}|${missing[*]}")
done
[[ ${#todo[@]} -eq 0 ]] && exit 0

sudo=""
if [[ $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null || {
    all_missing=""
    for t in "${todo[@]}"; do all_missing+=" ${t#*|}"; done
    echo "install-deps: need root or sudo to install:$all_missing" >&2
    exit 1
  }
  sudo="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
steps=$(( ${#todo[@]} + 1 ))
echo "install-deps: [1/$steps] apt-get update"
$sudo apt-get update -qq
step=1
for t in "${todo[@]}"; do
  step=$((step + 1))
  echo "install-deps: [$step/$steps] installing ${t%%|*}: ${t#*|}"
  # shellcheck disable=SC2086  # the package list splits on spaces
  $sudo apt-get install -y -qq --no-install-recommends ${t#*|} >/dev/null
done
echo "install-deps: done"
