#!/usr/bin/env bash
# Builds the libFuzzer targets in fuzz/ with clang, ASan and UBSan into
# build-fuzz/ (MP_FUZZ: the plain libraries only, no LibTorch) and runs them.
#
#   tools/fuzz.sh --ci            each target for a fixed number of runs over
#                                 the committed corpus (fuzz/corpus/TARGET/);
#                                 what CI runs. Fails on any crash, leak,
#                                 sanitizer report or timeout.
#   tools/fuzz.sh --seconds S     each target for S seconds, growing
#                                 build-fuzz/corpus/TARGET/; prints exec/s and
#                                 coverage at the end.
#   tools/fuzz.sh ... TARGET...   only these (plan_reader, input_spec, spec_json,
#                                 profile_file, device_profile)
#
# Nothing is written into the source tree: new inputs go to build-fuzz/ (or a
# temporary directory in --ci), crash inputs to build-fuzz/artifacts/TARGET/.
# To replay one: build-fuzz/fuzz/TARGET_fuzz build-fuzz/artifacts/TARGET/crash-...
# Once fixed, copy it into fuzz/corpus/TARGET/ so --ci keeps checking it.
# Needs the Debian packages clang and libclang-rt-14-dev (libFuzzer).
set -euo pipefail
cd "$(dirname "$0")/.."
source tools/timed.sh

# Runs per target in --ci: about 10 s each on one core of a CI machine;
# the targets run at once.
declare -A ci_runs=([plan_reader]=10000 [input_spec]=150000 [spec_json]=50000 [profile_file]=30000
                   [device_profile]=75000)
all_targets=(plan_reader input_spec spec_json profile_file device_profile)

usage() { echo "usage: tools/fuzz.sh --ci | --seconds S  [TARGET...]" >&2; exit 2; }
mode="${1:-}"
seconds=0
case "$mode" in
  --ci) shift ;;
  --seconds) [[ "${2:-}" =~ ^[0-9]+$ ]] || usage; seconds="$2"; shift 2 ;;
  *) usage ;;
esac
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=("${all_targets[@]}")
for t in "${targets[@]}"; do
  [ -n "${ci_runs[$t]:-}" ] || { echo "fuzz: unknown target '$t' (expected ${all_targets[*]})" >&2; exit 2; }
done

command -v clang++ >/dev/null || { echo "fuzz: needs clang++ and libFuzzer (Debian: clang libclang-rt-14-dev)" >&2; exit 1; }
build=build-fuzz
# -O1 -g without NDEBUG: nlohmann's and our own assertions stay on.
cmake -S . -B "$build" -G Ninja -DMP_FUZZ=ON -DCMAKE_CXX_COMPILER=clang++ \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g" >/dev/null
timed "fuzz build" cmake --build "$build" -j"$(nproc)" --target "${targets[@]/%/_fuzz}"

export ASAN_OPTIONS="detect_leaks=1:allocator_may_return_null=0:${ASAN_OPTIONS:-}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:${UBSAN_OPTIONS:-}"

scratch=""
if [ "$mode" = --ci ]; then
  scratch="$(mktemp -d)"
  trap 'rm -rf "$scratch"' EXIT
fi

# fuzz_one TARGET: runs it into build-fuzz/fuzz-TARGET.log and leaves
# "EXIT SECONDS" in build-fuzz/fuzz-TARGET.result.
fuzz_one() {
  local t=$1
  local artifacts="$build/artifacts/$t"
  mkdir -p "$artifacts"
  local flags=(-artifact_prefix="$artifacts/" -timeout=10 -rss_limit_mb=2048 -detect_leaks=1 -print_final_stats=1)
  [ -f "fuzz/$t.dict" ] && flags+=(-dict="fuzz/$t.dict")
  if [ "$mode" = --ci ]; then
    # A fixed seed and run count: the same inputs on every CI run. New inputs
    # go to the scratch directory, listed first; the committed corpus is only read.
    mkdir -p "$scratch/$t"
    flags+=(-seed=1 -runs="${ci_runs[$t]}" "$scratch/$t" "fuzz/corpus/$t")
  else
    mkdir -p "$build/corpus/$t"
    flags+=(-max_total_time="$seconds" "$build/corpus/$t" "fuzz/corpus/$t")
  fi
  echo "fuzz: $t: $build/fuzz/${t}_fuzz ${flags[*]}"
  local start=$SECONDS rc=0
  "$build/fuzz/${t}_fuzz" "${flags[@]}" >"$build/fuzz-$t.log" 2>&1 || rc=$?
  echo "$rc $((SECONDS - start))" >"$build/fuzz-$t.result"
}

failed=()
summary=()
# The targets run at once (libFuzzer uses one thread each), then each log is
# checked.
run_targets() {
  local pids=() t
  for t in "${targets[@]}"; do
    rm -f "$build/fuzz-$t.result"
    fuzz_one "$t" &
    pids+=($!)
  done
  wait "${pids[@]}" || true
  for t in "${targets[@]}"; do
    local log="$build/fuzz-$t.log" rc=1 secs=0
    [ -f "$build/fuzz-$t.result" ] && read -r rc secs <"$build/fuzz-$t.result"
    # A report from code the fuzzer does not watch (a recovered UBSan check)
    # still fails the run.
    if [ "$rc" -ne 0 ] || grep -qE "runtime error:|ERROR: (Address|Leak|UndefinedBehavior)Sanitizer" "$log"; then
      failed+=("$t")
      echo "fuzz: $t FAILED (exit $rc); the end of $log:" >&2
      tail -n 40 "$log" >&2
      continue
    fi
    # The last status line: "#N DONE cov: C ft: F corp: K/S exec/s: E rss: R".
    local done_line
    done_line="$(grep -E '^#[0-9]+[[:space:]]+DONE' "$log" | tail -n 1)"
    summary+=("$(printf '%-12s %4ss  %s' "$t" "$secs" "${done_line:-(no DONE line, see $log)}")")
  done
}
timed "fuzz runs" run_targets

echo
echo "fuzz: target       time  last status (runs, coverage: cov = edges, ft = features; corpus; exec/s)"
for line in "${summary[@]}"; do echo "fuzz: $line"; done
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz: FAILED: ${failed[*]} (inputs under $build/artifacts/)" >&2
  exit 1
fi
echo "fuzz: no crash, leak or sanitizer report"
