#!/usr/bin/env bash
# Sets up, builds and runs the main job on a bundled model. Planning
# (`mpplan --gpus N`) comes with the plan-file issue; for now: the canonical
# graph of the tutorial's ResNet-50 (`--inspect`) and its measured per-layer
# profile at a CPU-sized batch of 16 (`--profile-only`).
set -euo pipefail
cd "$(dirname "$0")/.."
tools/bootstrap.sh
cmake -S . -B build -G Ninja
cmake --build build -j2
build/apps/mpplan build/models/resnet50.script.pt --inspect
build/apps/mpplan build/models/resnet50.script.pt --profile-only --batch 16 "$@"
