// The name of a TorchScript class as its user wrote it.
#pragma once

#include <ATen/core/jit_type.h>

#include <string>

namespace mp {

// "torch.autograd.grad_mode.no_grad" for the scripted class
// __torch__.torch.autograd.grad_mode.no_grad; the type's own string where
// it has no name.
std::string ScriptClassName(const c10::ClassType& cls);

}  // namespace mp
