#!/usr/bin/env bash
# Builds and tests under GCC's sanitizers: CI's hardening jobs.
#
#   tools/sanitize.sh asan [--quick]  build-asan/: AddressSanitizer + UndefinedBehaviorSanitizer
#                                     (LeakSanitizer at exit); every target, every test.
#   tools/sanitize.sh tsan            build-tsan/: ThreadSanitizer; mpplan, mpexec and the
#                                     executor's runtime tests (tests/executor), which run the
#                                     pipeline's worker threads through those two binaries,
#                                     and the thread pool they run on (test_worker_pool).
#
# On 2 cores: asan about 19 minutes (7 to build, 12 to test), tsan about 10
# (2 and 8). asan --quick leaves out the zoo-wide training sweeps at 2 and 3
# stages, about 2 minutes: the 4-stage sweep still runs, and a 4-stage
# pipeline takes every path of a 2- or 3-stage one (first, middle and last
# stage, values and gradients relayed past a stage). tsan keeps all three:
# more stages at once are more interleavings.
#
# Any report fails the test it happens in: UB aborts (-fno-sanitize-recover),
# ASan and TSan halt on the first error, and every sanitizer exits with 66,
# which no tool of ours uses, so a report in a child mpexec cannot pass for
# its expected exit 1. LibTorch, libgomp and the other Debian libraries are
# not instrumented; tools/sanitizers/*.supp say what that makes them report,
# and name nothing of ours.
#
# Run tools/bootstrap.sh first (tools/test.sh does). Each phase prints its
# wall and CPU time.
set -euo pipefail
cd "$(dirname "$0")/.."

mode=${1:-}
quick=${2:-}
if [[ "$mode" != asan && "$mode" != tsan ]] || [[ -n "$quick" && "$mode/$quick" != asan/--quick ]]; then
  echo "usage: tools/sanitize.sh asan [--quick] | tsan" >&2
  exit 2
fi
supp="$PWD/tools/sanitizers"
report_exit=66
skip='^$'  # no test has an empty name
[ -z "$quick" ] || skip='every zoo model at [23] stages'

# -O1: LibTorch's kernels are most of the run time, and -O1 -g1 compiles a
# third faster than the plain build's -O3. -g1: line numbers in reports
# without full debug info (LibTorch's headers make that huge).
# -Wno-maybe-uninitialized: the instrumentation makes GCC 12 warn about Boost
# and libstdc++ code; the plain build keeps the warning for ours.
base_flags="-O1 -g1 -DNDEBUG -fno-omit-frame-pointer -Wno-maybe-uninitialized"

if [ "$mode" = asan ]; then
  dir=build-asan
  # -fno-sanitize=vptr: the vptr check needs the typeinfo of every
  # polymorphic class it meets, and LibTorch does not export some of its own
  # (c10::DynamicType): the link fails.
  san="-fsanitize=address,undefined -fno-sanitize=vptr -fno-sanitize-recover=undefined"
  # check_initialization_order: a global of ours read before its
  # constructor ran is a report, not a silent zero.
  export ASAN_OPTIONS="exitcode=$report_exit:check_initialization_order=1:strict_init_order=1:suppressions=$supp/asan.supp"
  export LSAN_OPTIONS="exitcode=$report_exit:suppressions=$supp/lsan.supp:print_suppressions=0"
  export UBSAN_OPTIONS="exitcode=$report_exit:halt_on_error=1:print_stacktrace=1"
else
  dir=build-tsan
  san="-fsanitize=thread"
  # OMP_NUM_THREADS=1: libgomp's barriers and thread pool synchronise with
  # raw futexes TSan cannot see, so every OpenMP region in LibTorch would
  # look like a race. The threads under test are ours (a worker per stage,
  # the heap sampler) and do not depend on intra-op threads; mpexec's default
  # of one intra-op thread per stage comes from the plan (measured plans
  # record at::get_num_threads(), which this makes 1).
  export OMP_NUM_THREADS=1
  export TSAN_OPTIONS="exitcode=$report_exit:halt_on_error=1:second_deadlock_stack=1:suppressions=$supp/tsan.supp"
fi

# TSan (GCC 12) maps its shadow memory at fixed addresses and fails with
# "unexpected memory mapping" when the kernel randomises mmap with more than
# 28 bits; ASan of this vintage can loop on DEADLYSIGNAL there. Turn address
# randomisation off for everything below (setarch -R is inherited).
wrap=()
rnd_bits=$(cat /proc/sys/vm/mmap_rnd_bits 2>/dev/null || echo 28)
if [ "$rnd_bits" -gt 28 ]; then
  if setarch "$(uname -m)" -R true 2>/dev/null; then
    wrap=(setarch "$(uname -m)" -R)
    echo "sanitize: vm.mmap_rnd_bits is $rnd_bits (> 28): running with address randomisation off (setarch -R)"
  else
    echo "sanitize: vm.mmap_rnd_bits is $rnd_bits (> 28) and setarch -R is not permitted here;" \
         "run 'sysctl vm.mmap_rnd_bits=28' first" >&2
    exit 2
  fi
fi

timed() {  # timed LABEL COMMAND...: runs it, then prints its wall and CPU time
  local TIMEFORMAT="sanitize: $mode $1: %0R s wall, %0U s user + %0S s sys (all its processes)"
  shift
  time "${wrap[@]}" "$@"
}

cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=$base_flags" \
  "-DCMAKE_CXX_FLAGS=$san" \
  "-DCMAKE_EXE_LINKER_FLAGS=$san" \
  "-DCMAKE_SHARED_LINKER_FLAGS=$san"

# The build runs the test executables too (doctest_discover_tests lists their
# cases after linking), under the options exported above.
if [ "$mode" = asan ]; then
  timed build cmake --build "$dir" -j2
  timed tests ctest --test-dir "$dir" -j2 --output-on-failure -E "$skip"
else
  # What tests/executor needs: its three tests, and through their
  # dependencies mpplan, mpexec, the zoo and the example test_executor_api
  # runs; and the thread pool the stages run on, alone.
  timed build cmake --build "$dir" -j2 --target test_mpexec test_training test_executor_api test_worker_pool
  timed tests ctest --test-dir "$dir" -j2 --output-on-failure -R '^test_(mpexec|training|executor_api|worker_pool):' \
    -E "$skip"
fi
