// mpplan: plans pipeline-parallel execution of a TorchScript model. The
// command line is RunMpplan (run_mpplan.h).
#include <iostream>

#include "apps/mpplan/run_mpplan.h"
#include "common/allocator.h"

int main(int argc, char** argv) {
  mp::KeepFreedMemory();  // before LibTorch starts threads: see allocator.h
  return mp::RunMpplan(std::vector<std::string>(argv + 1, argv + argc), std::cout, std::cerr);
}
