// Include this instead of <doctest/doctest.h> in tests that use LibTorch.
// Debian's LibTorch pulls in glog, whose CHECK, CHECK_EQ, ... macros clash
// with doctest's: LibTorch goes first, glog's macros are dropped, doctest's
// are defined last.
#pragma once

#include <torch/script.h>

#undef CHECK
#undef CHECK_EQ
#undef CHECK_NE
#undef CHECK_LE
#undef CHECK_LT
#undef CHECK_GE
#undef CHECK_GT

#include <doctest/doctest.h>
