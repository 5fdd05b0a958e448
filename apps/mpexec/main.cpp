// mpexec: runs an mpplan execution plan with micro-batch pipelining. The
// command line is RunMpexec (run_mpexec.h).
#include <iostream>

#include "apps/mpexec/run_mpexec.h"
#include "planner/profile/aligning_allocator.h"

int main(int argc, char** argv) {
  mp::KeepFreedMemoryAligned();  // as the profiler measured: see aligning_allocator.h
  return mp::RunMpexec(std::vector<std::string>(argv + 1, argv + argc), std::cout, std::cerr, "/proc/self/exe");
}
