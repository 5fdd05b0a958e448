// mpplan: plans pipeline-parallel execution of a TorchScript model. The
// command line is RunMpplan (run_mpplan.h).
#include <iostream>

#include "apps/mpplan/run_mpplan.h"
#include "planner/profile/aligning_allocator.h"

int main(int argc, char** argv) {
  mp::KeepFreedMemoryAligned();  // before LibTorch starts threads and before any tensor: see aligning_allocator.h
  return mp::RunMpplan(std::vector<std::string>(argv + 1, argv + argc), std::cout, std::cerr);
}
