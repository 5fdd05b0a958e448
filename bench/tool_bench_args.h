// What every bench that runs the mpplan and mpexec binaries takes:
// MODELS_DIR OUT_DIR [--quick] [--only SECTION,...], with the binaries
// found beside the bench's own (build/bench/../apps).
#pragma once

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

namespace mp::bench {

struct ToolBenchArgs {
  std::string models;  // the zoo: build/models
  std::string out;     // plans, profiles and logs go here
  bool quick = false;  // one small case per section (CTest's smoke run)
  std::vector<std::string> only;  // the sections to run; empty: all
  std::string mpplan, mpexec;

  bool Wants(const std::string& section) const {
    return only.empty() || std::find(only.begin(), only.end(), section) != only.end();
  }
};

// Prints the usage line and returns nothing when the arguments do not fit;
// otherwise creates OUT_DIR and line-buffers stdout, so each figure shows
// as soon as it is measured.
inline std::optional<ToolBenchArgs> ParseToolBenchArgs(int argc, char** argv, const char* name) {
  ToolBenchArgs args;
  bool ok = argc >= 3;
  for (int i = 3; ok && i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--quick") {
      args.quick = true;
    } else if (arg == "--only" && i + 1 < argc) {
      std::stringstream list(argv[++i]);
      for (std::string section; std::getline(list, section, ',');) args.only.push_back(section);
    } else {
      ok = false;
    }
  }
  if (!ok) {
    std::fprintf(stderr, "usage: %s MODELS_DIR OUT_DIR [--quick] [--only SECTION,...]\n", name);
    return std::nullopt;
  }
  args.models = argv[1];
  args.out = argv[2];
  const std::string apps = (std::filesystem::path(argv[0]).parent_path() / ".." / "apps").string();
  args.mpplan = apps + "/mpplan";
  args.mpexec = apps + "/mpexec";
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  std::filesystem::create_directories(args.out);
  return args;
}

}  // namespace mp::bench
