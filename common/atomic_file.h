// Writing an output file so that nobody ever sees half of it: the text goes
// to a temporary file beside the target, which is then renamed over it.
#pragma once

#include <string>
#include <vector>

namespace mp {

// Writes `text` to `path` atomically. `protected_paths` are files the
// command reads (the model, the plan): writing over one of them is an
// InputError, as is an unwritable directory. On any error the target is
// untouched and the temporary file is removed.
void WriteFileAtomically(const std::string& path, const std::string& text,
                         const std::vector<std::string>& protected_paths = {});

// True when both paths exist and name the same file (links and relative
// paths resolved); false on any filesystem error.
bool SameFile(const std::string& a, const std::string& b);

// The checks WriteFileAtomically makes before writing, for a command to run
// before it spends time on the work: not a protected path, not a directory,
// in a directory that exists.
void CheckWritable(const std::string& path, const std::vector<std::string>& protected_paths = {});

// The whole content of `path`; InputError naming it when it cannot be read.
std::string ReadTextFile(const std::string& path, const std::string& what = "file");

}  // namespace mp
