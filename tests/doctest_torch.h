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

#include "common/sanitizer_build.h"

namespace mp::test {

// `TEST_CASE("..." * NotUnderTsan())`: a case that runs no thread of ours
// that other cases of its file do not run the same way, and checks what a
// feature makes of it: a checkpoint, torch.save files, Python reading the
// results, or how close a prediction comes. The TSan job (tools/sanitize.sh
// tsan), which looks for races between threads, skips it: it spent a
// quarter of that job's test time there. The plain and ASan builds run it.
inline doctest::skip NotUnderTsan() { return doctest::skip(mp::kUnderThreadSanitizer); }

}  // namespace mp::test
