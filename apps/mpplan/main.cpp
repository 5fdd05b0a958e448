// mpplan: plans pipeline-parallel execution of a TorchScript model. The
// command line is RunMpplan (run_mpplan.h).
#include <iostream>

#include "apps/mpplan/run_mpplan.h"
#include "common/allocator.h"
#include "planner/profile/memory_meter.h"

int main(int argc, char** argv) {
  mp::KeepFreedMemory();  // before LibTorch starts threads: see allocator.h
  mp::InstallAligningCpuAllocator();  // before any tensor: see memory_meter.h
  return mp::RunMpplan(std::vector<std::string>(argv + 1, argv + argc), std::cout, std::cerr);
}
