#!/usr/bin/env bash
# Sets up (Debian packages), builds, exports the model zoo and runs every
# test with CTest. This is README's test command and what CI runs. Prints
# each phase's time (tools/timed.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
source tools/timed.sh
unset MP_TEST_ZOO  # the zoo sweeps take every zoo model here (tests/graph/zoo.h)
timed bootstrap tools/bootstrap.sh
cmake -S . -B build -G Ninja -DCMAKE_CXX_COMPILER="${CXX:-clang++}"  # clang: README, "Hardening"
timed build cmake --build build -j2
timed tests ctest --test-dir build -j2 --output-on-failure
