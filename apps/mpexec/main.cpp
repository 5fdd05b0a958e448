// mpexec: runs an mpplan execution plan with micro-batch pipelining. The
// command line is RunMpexec (run_mpexec.h).
#include <iostream>

#include "apps/mpexec/run_mpexec.h"
#include "common/allocator.h"
#include "planner/profile/memory_meter.h"

int main(int argc, char** argv) {
  mp::KeepFreedMemory();  // as the profiler measured: see common/allocator.h
  mp::InstallAligningCpuAllocator();  // as mpplan: see planner/profile/memory_meter.h
  return mp::RunMpexec(std::vector<std::string>(argv + 1, argv + argc), std::cout, std::cerr, "/proc/self/exe");
}
