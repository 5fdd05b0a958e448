#!/usr/bin/env bash
# Builds and tests under GCC's sanitizers; CI's hardening jobs.
#
#   tools/sanitize.sh asan   build-asan/: AddressSanitizer + UndefinedBehaviorSanitizer
#                            (and LeakSanitizer at exit); every target, every test.
#   tools/sanitize.sh tsan   build-tsan/: ThreadSanitizer; mpplan, mpexec and the
#                            executor's runtime tests (tests/executor), which run the
#                            pipeline's worker threads through those two binaries.
#
# Any report fails the test it happens in: UB aborts (-fno-sanitize-recover),
# ASan and TSan halt on the first error, and every sanitizer exits with
# kReportExit (below), which no tool of ours uses, so a report in a child
# mpexec cannot pass for its expected exit 1. LibTorch, libgomp and the other
# Debian libraries are not instrumented; tools/sanitizers/*.supp silence what
# that makes them report, and name nothing of ours.
#
# Run tools/bootstrap.sh first (tools/test.sh does). Timings on 2 cores are in
# the comments of each mode below.
set -euo pipefail
cd "$(dirname "$0")/.."

mode=${1:-}
supp="$PWD/tools/sanitizers"
report_exit=66  # kReportExit: a sanitizer found something

# -O1: our code is a small part of the run time (LibTorch kernels are most
# of it) and -O1 builds much faster than -O3; -g1 gives line numbers in
# reports without full debug info (LibTorch's headers make that huge).
base_flags="-O1 -g1 -DNDEBUG -fno-omit-frame-pointer"

case "$mode" in
  asan)
    dir=build-asan
    # -fno-sanitize=vptr: the vptr check needs the typeinfo of every
    # polymorphic class it meets, and LibTorch does not export some of its
    # own (c10::DynamicType): the link fails.
    san="-fsanitize=address,undefined -fno-sanitize=vptr -fno-sanitize-recover=undefined"
    # check_initialization_order: a global of ours read before its
    # constructor ran is a report, not a silent zero.
    export ASAN_OPTIONS="exitcode=$report_exit:check_initialization_order=1:strict_init_order=1:detect_leaks=1:suppressions=$supp/asan.supp"
    export LSAN_OPTIONS="exitcode=$report_exit:suppressions=$supp/lsan.supp:print_suppressions=0"
    export UBSAN_OPTIONS="exitcode=$report_exit:halt_on_error=1:print_stacktrace=1"
    ;;
  tsan)
    dir=build-tsan
    san="-fsanitize=thread"
    # OMP_NUM_THREADS=1: libgomp's barriers and thread pool synchronise with
    # raw futexes TSan cannot see, so every OpenMP region inside LibTorch
    # would look like a race. Our threads (one worker per stage, the heap
    # sampler) are what we test; they do not depend on intra-op threads, and
    # mpexec's default of one intra-op thread per stage comes from the plan
    # (measured plans record at::get_num_threads(), which this makes 1).
    export OMP_NUM_THREADS=1
    export TSAN_OPTIONS="exitcode=$report_exit:halt_on_error=1:second_deadlock_stack=1:history_size=4:suppressions=$supp/tsan.supp"
    ;;
  *)
    echo "usage: tools/sanitize.sh asan|tsan" >&2
    exit 2
    ;;
esac

# TSan (GCC 12) maps its shadow at fixed addresses and fails with
# "unexpected memory mapping" when the kernel randomises mmap with more than
# 28 bits; ASan of this vintage can loop on DEADLYSIGNAL there. Turn off
# address randomisation for everything below (setarch -R is inherited).
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

timed() {  # timed LABEL COMMAND...: runs it, then prints how long it took
  local label=$1 start=$SECONDS
  shift
  "${wrap[@]}" "$@"
  echo "sanitize: $mode $label took $((SECONDS - start)) s"
}

# The build runs the test executables too (doctest_discover_tests lists
# their cases after linking), so the sanitizer options above apply there.
cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=$base_flags" \
  "-DCMAKE_CXX_FLAGS=$san" \
  "-DCMAKE_EXE_LINKER_FLAGS=$san" \
  "-DCMAKE_SHARED_LINKER_FLAGS=$san"

if [ "$mode" = asan ]; then
  # Build: ~N min on 2 cores. Tests: ~N min.
  timed build cmake --build "$dir" -j2
  timed tests ctest --test-dir "$dir" -j2 --output-on-failure
else
  # Only what tests/executor needs: its three tests, the two tools they
  # run, and the example program test_executor_api runs.
  timed build cmake --build "$dir" -j2 --target test_mpexec test_training test_executor_api
  timed tests ctest --test-dir "$dir" -j2 --output-on-failure -R '^test_(mpexec|training|executor_api):'
fi
