#!/usr/bin/env bash
# Installs every Debian package mpplan/mpexec needs to build, test and export
# its model zoo. Idempotent: packages already present are not reinstalled and
# `apt-get update` runs only when something is missing.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git
  libtorch-dev                       # LibTorch 1.13, CPU
  libopenblas0-openmp                # an optimised BLAS behind libblas.so.3, where LibTorch's matrix
                                     # products go: without it Debian's reference BLAS ran them (64% of
                                     # a GPT training step's CPU); its threads follow at::set_num_threads
  libgloo-dev                        # c10d ProcessGroupGloo's headers: stages as processes
  libjemalloc-dev                    # mpplan's and mpexec's malloc (CMake's MP_JEMALLOC): an arena per few
                                     # threads, where glibc's one arena made the stages' threads meet at its lock
  libyaml-cpp-dev                    # plan files
  libboost-graph-dev                 # op DAG for the partitioner
  doctest-dev libcli11-dev nlohmann-json3-dev
  python3-torch python3-torchvision  # models/export.py only
  libxml2-utils                      # xmllint: tests check the Gantt SVG parses
  clang libclang-rt-14-dev llvm-14   # tools/fuzz.sh: libFuzzer; llvm-symbolizer for sanitizer traces;
  lld                                # tools/sanitize.sh: its clang builds link with lld
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "bootstrap: all ${#packages[@]} packages present"
  exit 0
fi

sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
echo "bootstrap: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
