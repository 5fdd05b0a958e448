// Atomic output: temp file in the target's directory (same filesystem, so
// rename(2) replaces the target in one step), flushed, then renamed.
#include "common/atomic_file.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/error.h"

namespace mp {
namespace fs = std::filesystem;

bool SameFile(const std::string& a, const std::string& b) {
  std::error_code ec;
  return fs::exists(a, ec) && fs::exists(b, ec) && fs::equivalent(a, b, ec);
}

void CheckWritable(const std::string& path, const std::vector<std::string>& protected_paths) {
  for (const auto& input : protected_paths) {
    if (!input.empty() && SameFile(path, input)) {
      throw InputError(Concat(path, ": refusing to overwrite a file this command reads",
                              input == path ? "" : " (" + input + ")"));
    }
  }
  std::error_code ec;
  if (fs::is_directory(path, ec)) throw InputError(Concat(path, ": is a directory, expected a file name"));
  const fs::path target(path);
  const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  if (!fs::is_directory(dir, ec)) throw InputError(Concat(path, ": directory ", dir.string(), " does not exist"));
}

void WriteFileAtomically(const std::string& path, const std::string& text,
                         const std::vector<std::string>& protected_paths) {
  CheckWritable(path, protected_paths);
  const fs::path target(path);
  const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  const std::string temp = (dir / ("." + target.filename().string() + ".tmp." + std::to_string(::getpid()))).string();
  {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    if (!out) throw InputError(Concat(path, ": cannot write in ", dir.string(), ": ", std::strerror(errno)));
    out << text;
    out.flush();
    if (!out) {
      std::remove(temp.c_str());
      throw InputError(Concat(path, ": write failed: ", std::strerror(errno)));
    }
  }
  if (std::rename(temp.c_str(), path.c_str()) != 0) {
    const std::string reason = std::strerror(errno);
    std::remove(temp.c_str());
    throw InputError(Concat(path, ": cannot replace the file: ", reason));
  }
}

std::string ReadTextFile(const std::string& path, const std::string& what) {
  std::error_code ec;
  if (!fs::exists(path, ec)) throw InputError(Concat(path, ": ", what, " not found"));
  if (fs::is_directory(path, ec)) throw InputError(Concat(path, ": is a directory, expected a ", what));
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(Concat(path, ": cannot read the ", what, ": ", std::strerror(errno)));
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace mp
