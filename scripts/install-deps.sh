#!/usr/bin/env bash
# Installs the Debian 12 packages memsim needs to build, test and plot.
# Idempotent: prints nothing and touches nothing when everything is already there.
set -euo pipefail

packages=(
  build-essential cmake pkg-config
  libsimgrid-dev libboost-dev
  libyaml-cpp-dev libeigen3-dev
  libgtest-dev libgmock-dev googletest libbenchmark-dev
  libcli11-dev nlohmann-json3-dev libfmt-dev
  coinor-libcbc-dev
  libprotobuf-dev protobuf-compiler
  zlib1g-dev libsimdjson-dev
  python3-matplotlib python3-pandas python3-pytest python3-numpy
  python3-torch python3-torchvision
  parallel
  clang libclang-rt-14-dev
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done
[[ ${#missing[@]} -eq 0 ]] && exit 0

sudo=""
if [[ $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null || { echo "install-deps: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  sudo="sudo"
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
