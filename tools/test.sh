#!/usr/bin/env bash
# Sets up (Debian packages), builds, exports the model zoo and runs every
# test with CTest. This is README's test command and what CI runs.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/bootstrap.sh
cmake -S . -B build -G Ninja
cmake --build build -j2
ctest --test-dir build -j2 --output-on-failure
