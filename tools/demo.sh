#!/usr/bin/env bash
# Sets up, builds and runs the main job on a bundled model: mpplan plans the
# tutorial's ResNet-50 (batch 120, 3x128x128, training) for 2 devices of this
# machine, measuring it here, and prints the report; the plan, a Markdown
# report with a Gantt chart of one predicted step and the op graph by stage
# are written under build/demo/. Then mpexec runs that plan: three training
# steps on CPU workers (stages, replicas or both, as the plan chose) after
# two warm-ups, measured against the
# prediction, with a Chrome trace of the median step and the trained model
# kept as TorchScript. Extra arguments go to mpplan.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/bootstrap.sh
cmake -S . -B build -G Ninja -DCMAKE_CXX_COMPILER="${CXX:-clang++}"  # clang: README, "Hardening"
cmake --build build -j2
mkdir -p build/demo
build/apps/mpplan build/models/resnet50.script.pt --gpus 2 \
  --split 'layer1,layer2|layer3,layer4,fc' \
  -o build/demo/resnet50.plan.yaml --report build/demo/resnet50.report.md --dot build/demo/resnet50.dot "$@"
build/apps/mpexec build/demo/resnet50.plan.yaml --warmup 2 --steps 3 \
  --trace build/demo/resnet50.trace.json --save build/demo/resnet50.trained.pt
