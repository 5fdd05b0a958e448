#!/usr/bin/env bash
# Run here (Debian, network to its archive): downloads into .deps/ (ignored)
# the Debian packages the build needs besides LibTorch, for a machine that
# has a pip PyTorch 2.x, CMake and g++ but no Debian archive (the GPU
# machine). tools/gpu_check.sh unpacks them there into a prefix of its own.
# About 10 MB; the device tool carries them with `carry: [".deps"]`.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .deps
cd .deps
apt-get download libyaml-cpp-dev libyaml-cpp0.7 libboost1.74-dev libcli11-dev nlohmann-json3-dev doctest-dev
ls -l
