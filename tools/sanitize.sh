#!/usr/bin/env bash
# Builds with clang and tests under its sanitizers: CI's hardening jobs.
# (The plain build is clang's too, tools/test.sh, unless CXX says otherwise.)
#
#   tools/sanitize.sh asan   build-asan/: AddressSanitizer + UndefinedBehaviorSanitizer
#                            (LeakSanitizer at exit); every test and what it runs.
#   tools/sanitize.sh tsan   build-tsan/: ThreadSanitizer; mpplan, mpexec and the
#                            executor's runtime tests (tests/executor), which run the
#                            pipeline's worker threads through mpexec's command line
#                            (in their own process, and the binary where a test needs
#                            a process of its own), the thread pool they run on
#                            (test_worker_pool) and the memory meter their workers
#                            allocate through (test_memory), and the link probe's
#                            two ranks, threads of one process (test_link_probe; its
#                            failing-rank case skips itself under TSan: Gloo's
#                            exception hand-off is not instrumented), and the
#                            search's memo, which builds DP tables on another
#                            thread (test_search's memo case). Cases marked
#                            NotUnderTsan (tests/doctest_torch.h) skip themselves:
#                            they run no thread the others do not (a checkpoint,
#                            torch.save files, Python reading results, how close a
#                            memory prediction comes).
#
# Both run every test case of theirs but test_bench_suite (asan: the
# benchmark harness's smoke run, over 5 minutes under ASan for mpplan and
# mpexec runs the other tests make). The zoo-wide sweeps (the tests that loop
# over tests/graph/zoo.h's ZooFiles(), each model at one of 2, 3 and 4 stages
# or processes by turns) sweep the representative subset below instead of
# all 21 files, which the plain build (tools/test.sh) runs; tests with
# lists of models of their own take the subset's members of their list, or
# its first (ZooKeep). A sanitizer finds
# a bad access or a race on the path that makes it, and the 21 files take
# the same runtime paths many times over; the subset keeps one model for
# each path the others take:
#   bert.script.pt       dropout drawn from seeded generators on the stage threads;
#                        nn.TransformerEncoder's uninitialized values on the wire
#   branchy.script.pt    a DAG: many values live across a cut, skip connections
#   gpt.trace.pt         integer inputs, embeddings, attention; a traced graph
#   inplace.trace.pt     in-place writes across cuts; training that must fail in one line
#   lstm.script.pt       several inputs, tuple outputs, tensor-list attributes; scripted
#   mobilenet.script.pt  BatchNorm buffers updated per micro-batch, in-place activations
#                        (torchvision's MobileNetV3: ResNet-50's paths at a sixteenth of
#                        its weights, which took 8 s to load under ASan)
# (the over-processes sweep takes the scripted ones of these, one per
# process count: BERT at 4, branchy at 2, the LSTM at 3). TSan takes the
# four whose paths are the threads' own: the stage threads' generators,
# values that many stages hold, in-place writes across a cut, and buffers
# written per micro-batch; the GPT and the LSTM add operators, not threads.
# Set MP_TEST_ZOO yourself to choose others, or to empty to sweep the whole
# zoo (MP_TEST_ZOO= tools/sanitize.sh asan).
#
# On 2 cores (2026-12-05, fresh clones): asan 355-443 s to build with
# clang (GCC took 749 to 844 s on a slow host; the same translation unit
# 0.47x of GCC's time, alternated) and 616-759 s to test (CI's run of the
# code before asan_cpu_cache.cpp: 796 s); tsan 135-192 + 281-516 s (281
# with the NotUnderTsan cases skipped, 438 before on the same host).
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
source tools/timed.sh

mode=${1:-}
if [[ $# -ne 1 || ( "$mode" != asan && "$mode" != tsan ) ]]; then
  echo "usage: tools/sanitize.sh asan | tsan" >&2
  exit 2
fi
supp="$PWD/tools/sanitizers"
report_exit=66
if [ "$mode" = asan ]; then
  default_zoo=bert.script.pt,branchy.script.pt,gpt.trace.pt,inplace.trace.pt,lstm.script.pt,mobilenet.script.pt
else
  default_zoo=bert.script.pt,branchy.script.pt,inplace.trace.pt,mobilenet.script.pt
fi
export MP_TEST_ZOO="${MP_TEST_ZOO-$default_zoo}"
echo "sanitize: zoo sweeps over ${MP_TEST_ZOO:-every zoo model} (MP_TEST_ZOO)"

# -O1: LibTorch's kernels are most of the run time, and -O1 -g1 compiled a
# third faster than -O3 (measured with GCC). -g1: line numbers in reports without full debug
# info (LibTorch's headers make that huge).
base_flags="-O1 -g1 -DNDEBUG -fno-omit-frame-pointer"

cache=OFF
if [ "$mode" = asan ]; then
  dir=build-asan
  # Freed tensor memory kept for the next tensor of its size, as glibc keeps
  # it in the plain build (tools/sanitizers/asan_cpu_cache.cpp): ASan's
  # allocator unmaps every block over 128 KiB, and a test_training process
  # spent over a third of its CPU time faulting pages back in.
  cache=ON
  # -fno-sanitize=vptr: the vptr check needs the typeinfo of every
  # polymorphic class it meets, and LibTorch does not export some of its own
  # (c10::DynamicType): the link fails.
  san="-fsanitize=address,undefined -fno-sanitize=vptr -fno-sanitize-recover=undefined"
  # check_initialization_order: a global of ours read before its
  # constructor ran is a report, not a silent zero.
  # quarantine_size_mb=4 (default 256): freed memory stays poisoned, and a
  # use after free is a report, for the last 4 MB of frees rather than 256.
  # A tensor's buffer leaves the quarantine after a few more frees; a node,
  # a string or a vector's after thousands. Held, 256 MB of frees made every
  # process touch fresh pages: a third of the ASan job's test time went to
  # page faults (a test_training case: 8.4 s, 2.05 s of it system time;
  # 6.6 s and 0.91 s with 4 MB; 5.7 s with none).
  export ASAN_OPTIONS="exitcode=$report_exit:check_initialization_order=1:strict_init_order=1:quarantine_size_mb=4"
  ASAN_OPTIONS+=":suppressions=$supp/asan.supp"
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

# TSan (clang 14's, as GCC 12's) maps its shadow memory at fixed addresses
# and fails with "unexpected memory mapping" when the kernel randomises mmap
# with more than 28 bits; ASan of this vintage can loop on DEADLYSIGNAL
# there. Turn address randomisation off for everything below (setarch -R is
# inherited).
rnd_bits=$(cat /proc/sys/vm/mmap_rnd_bits 2>/dev/null || echo 28)
if [ "$rnd_bits" -gt 28 ]; then
  if setarch "$(uname -m)" -R true 2>/dev/null; then
    timed_wrap=(setarch "$(uname -m)" -R)
    echo "sanitize: vm.mmap_rnd_bits is $rnd_bits (> 28): running with address randomisation off (setarch -R)"
  else
    echo "sanitize: vm.mmap_rnd_bits is $rnd_bits (> 28) and setarch -R is not permitted here;" \
         "run 'sysctl vm.mmap_rnd_bits=28' first" >&2
    exit 2
  fi
fi

# clang, always (the plain build's is CXX's, clang unless set): it
# compiles these trees in about half of GCC's time (its precompiled
# LibTorch header holds the templates its inline code uses already
# instantiated, -fpch-instantiate-templates, where GCC instantiates them
# again at the end of every translation unit, 5 s of an empty one: with
# these flags a small test unit took 7.3 s against 12.7, mpplan's command
# line 37-43 s against 83-85, alternated). lld links: gold, which the
# plain build uses, warns about every check clang's static ASan runtime
# exports.
cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_COMPILER=clang++ -DMP_GOLD=OFF -DMP_ASAN_CPU_CACHE=$cache \
  "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=$base_flags" \
  "-DCMAKE_CXX_FLAGS=$san" \
  "-DCMAKE_EXE_LINKER_FLAGS=$san -fuse-ld=lld" \
  "-DCMAKE_SHARED_LINKER_FLAGS=$san -fuse-ld=lld"

# The build runs the test executables that do not link LibTorch too
# (doctest_discover_tests lists their cases after linking), under the
# options exported above.
if [ "$mode" = asan ]; then
  # mp_tests: every test but test_bench_suite, and what the tests run
  # (mpplan, mpexec, the example, the zoo), not the benchmarks.
  timed "asan build" cmake --build "$dir" -j2 --target mp_tests
  timed "asan tests" ctest --test-dir "$dir" -j2 --output-on-failure -E '^test_bench_suite'
else
  # What tests/executor needs: its pipeline tests and the memory meter's,
  # and through their dependencies mpplan, mpexec, the zoo and the example
  # test_executor_api runs; the thread pool the stages run on, alone; and
  # the link probe's two ranks, threads of one process that stop each other;
  # the search's memo, whose DP tables are built on another thread.
  timed "tsan build" cmake --build "$dir" -j2 --target test_mpexec test_training test_executor_api test_worker_pool \
    test_memory test_link_probe test_search
  timed "tsan tests" ctest --test-dir "$dir" -j2 --output-on-failure \
    -R '^test_(mpexec|training|executor_api|worker_pool|memory|link_probe)($|[:-])|^test_search:a memo.s table'
fi
