#!/usr/bin/env bash
# Run on the GPU machine, in the repo root, after tools/gpu_deps.sh here:
#
#   tools/gpu_check.sh LOG_DIR [BENCH_EXEC_SECTIONS]
#
# Builds the same sources against the CUDA LibTorch inside that machine's
# pip PyTorch 2.x (build-cuda/; yaml-cpp, Boost, CLI11, nlohmann-json and
# doctest unpacked from .deps/), exports the zoo with that PyTorch, runs
# every test (the GPU ones included; the ones over processes skip, as the
# pip LibTorch ships no Gloo headers), then `bench_exec --only SECTIONS`
# when sections are named; also the nn.TransformerEncoder cut mpexec refused
# under 2.11 (bert_style_cut.log) and a GPU profile's coverage
# (gpu_profile.log). Each phase's log goes to LOG_DIR (a few files,
# what the device tool brings back); the bench writes its tables and plots
# to /tmp/gpu-bench and its printout to LOG_DIR/bench.log. Prints each
# phase's exit status and time. Phases stop at MP_GPU_CHECK_BUDGET seconds
# in all (default 560), so the logs come back within one device call.
set -uo pipefail
cd "$(dirname "$0")/.."
logs=$(realpath -m "$1")
sections=${2:-}
budget=${MP_GPU_CHECK_BUDGET:-560}
prefix=/tmp/mp-deps
mkdir -p "$logs" "$prefix"
for f in .deps/*.deb; do dpkg -x "$f" "$prefix"; done
export LD_LIBRARY_PATH="$prefix/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}"
torch_prefix=$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)')
python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no GPU")'
echo "g++ $(g++ -dumpfullversion), $(cmake --version | head -1), $(nproc) cores"

start=$SECONDS
# phase NAME COMMAND...: runs COMMAND with what is left of the budget, its
# output in LOG_DIR/NAME.log; prints the exit status and the time.
phase() {
  local name=$1 t0=$SECONDS rc=0
  shift
  local left=$((budget - (SECONDS - start)))
  if [ $left -le 10 ]; then
    echo "$name: skipped, budget spent"
    return 1
  fi
  timeout $left "$@" >"$logs/$name.log" 2>&1 || rc=$?
  echo "$name: exit $rc, $((SECONDS - t0)) s"
  return $rc
}

phase configure cmake -S . -B build-cuda -G Ninja -DCMAKE_PREFIX_PATH="$torch_prefix;$prefix/usr" \
  -DMP_PYTHON="$(command -v python3)" || { tail -40 "$logs/configure.log"; exit 1; }
phase build cmake --build build-cuda -j"$(nproc)" || { grep -m 30 -A 12 "error" "$logs/build.log"; exit 1; }
# Two intra-op threads a test, as on CI's 2 cores: 16 tests at once with 16
# threads each (the pip LibTorch's default) ran 11 of them past 240 s.
export OMP_NUM_THREADS=2
phase tests ctest --test-dir build-cuda -j"$(($(nproc) / 2))" --timeout 240 --output-on-failure
sed -n '/tests passed/,$p' "$logs/tests.log"
# The inlined TorchScript graphs of the zoo's nn.TransformerEncoder models as
# this PyTorch scripts them (2.11: mpexec refused their cuts, "wrote through
# a view"), for reading here.
python3 - build-cuda/models >"$logs/graphs.txt" 2>&1 <<'PY'
import sys, torch
for name in ("bert", "heldout/bert_style"):
    print(f"==== {name}\n{torch.jit.load(f'{sys.argv[1]}/{name}.script.pt').inlined_graph}")
PY
# What mpexec refuses there, reproduced: bert_style planned at 2 stages for
# analytic devices, run on CPU workers, with its canonical graph printed
# (MP_DUMP=canonical) before the refusal.
phase bert_style_cut bash -c 'MP_DUMP=canonical build-cuda/apps/mpplan build-cuda/models/heldout/bert_style.script.pt \
  --gpus 2 --stages 2 --device-profile a100-80gb -o /tmp/bert_style.plan.yaml &&
  MP_DUMP=canonical build-cuda/apps/mpexec /tmp/bert_style.plan.yaml --device cpu --steps 1'
tail -2 "$logs/bert_style_cut.log"
# Profiling on the GPU: each node's time against the whole forward's
# (coverage), the tutorial's ResNet-50 at batch 8.
phase gpu_profile build-cuda/apps/mpplan build-cuda/models/resnet50.script.pt --device cuda --profile-only --batch 8
grep -i "coverage" "$logs/gpu_profile.log" | head -3
if [ -n "$sections" ]; then
  phase bench build-cuda/bench/bench_exec build-cuda/models /tmp/gpu-bench --only "$sections"
  tail -60 "$logs/bench.log"
fi
