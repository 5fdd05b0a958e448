#!/usr/bin/env bash
# Sets up, builds and runs the main job on a bundled model: for now the
# canonical graph of the tutorial's ResNet-50 (`mpplan --inspect`).
set -euo pipefail
cd "$(dirname "$0")/.."
tools/bootstrap.sh
cmake -S . -B build -G Ninja
cmake --build build -j2
build/apps/mpplan build/models/resnet50.script.pt --inspect "$@"
