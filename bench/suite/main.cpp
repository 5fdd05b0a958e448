// bench_suite: every comparison of docs/BENCHMARKS.md's "Against what users
// would do" in one command. Writes OUT_DIR/results.json (every row of every
// section), OUT_DIR/SECTION.csv, SVG plots and the plans, profiles and raw
// mpexec / peer output they came from, and prints the summary table last
// (also OUT_DIR/summary.md).
//
// Usage: bench_suite MODELS_DIR OUT_DIR [--smoke] [--only SECTION,...]
//   --smoke  tiny sizes, one turn each: seconds, what CI runs
#include <array>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <set>
#include <sstream>
#include <utility>

#include "bench/suite/process.h"

namespace {

using mp::bench::Section;
using mp::bench::Suite;

struct Entry {
  const char* name;
  Section (*run)(const Suite&);
};

const Entry kSections[] = {{"tutorial_resnet50", mp::bench::TutorialResNet},
                           {"tutorial_convnet", mp::bench::TutorialConvNet},
                           {"peers", mp::bench::Peers},
                           {"partitioners", mp::bench::Partitioners},
                           {"fidelity", mp::bench::Fidelity},
                           {"planner_speed", mp::bench::PlannerSpeed}};

std::string CsvField(const nlohmann::json& v) {
  if (v.is_null()) return "";
  if (!v.is_string()) return v.dump();
  const std::string s = v.get<std::string>();
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string quoted = "\"";
  for (char c : s) quoted += c == '"' ? std::string("\"\"") : std::string(1, c);
  return quoted + "\"";
}

std::string Csv(const nlohmann::json& rows) {
  std::set<std::string> keys;
  for (const auto& row : rows) {
    for (const auto& [key, value] : row.items()) keys.insert(key);
  }
  std::ostringstream csv;
  std::string sep;
  for (const auto& key : keys) csv << std::exchange(sep, ",") << key;
  csv << "\n";
  for (const auto& row : rows) {
    sep.clear();
    for (const auto& key : keys) csv << std::exchange(sep, ",") << (row.contains(key) ? CsvField(row[key]) : "");
    csv << "\n";
  }
  return csv.str();
}

// The summary as a Markdown table, columns padded.
std::string SummaryTable(const std::vector<Section>& sections) {
  std::vector<std::array<std::string, 4>> lines = {{"what", "measured", "predicted", "reading"}};
  for (const auto& s : sections) {
    for (const auto& l : s.summary) lines.push_back({l.what, l.measured, l.predicted, l.reading});
  }
  std::array<size_t, 4> width{};
  for (const auto& l : lines) {
    for (size_t c = 0; c < 4; ++c) width[c] = std::max(width[c], l[c].size());
  }
  std::ostringstream table;
  for (size_t i = 0; i < lines.size(); ++i) {
    for (size_t c = 0; c < 4; ++c) table << "| " << lines[i][c] << std::string(width[c] - lines[i][c].size() + 1, ' ');
    table << "|\n";
    if (i == 0) {
      for (size_t c = 0; c < 4; ++c) table << "|" << std::string(width[c] + 2, '-');
      table << "|\n";
    }
  }
  return table.str();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: bench_suite MODELS_DIR OUT_DIR [--smoke] [--only SECTION,...]\n");
    return 2;
  }
  Suite suite;
  suite.models = std::filesystem::absolute(argv[1]).string();
  suite.out = std::filesystem::absolute(argv[2]).string();
  std::set<std::string> only;
  for (int i = 3; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--smoke") {
      suite.smoke = true;
    } else if (arg == "--only" && i + 1 < argc) {
      std::stringstream list(argv[++i]);
      for (std::string name; std::getline(list, name, ',');) only.insert(name);
    } else {
      std::fprintf(stderr, "bench_suite: unknown argument '%s'\n", arg.c_str());
      return 2;
    }
  }
  for (const auto& name : only) {
    bool known = false;
    for (const auto& e : kSections) known |= name == e.name;
    if (!known) {
      std::fprintf(stderr, "bench_suite: --only: unknown section '%s'\n", name.c_str());
      return 2;
    }
  }
  const auto apps = std::filesystem::absolute(argv[0]).parent_path() / ".." / "apps";
  suite.mpplan = (apps / "mpplan").lexically_normal().string();
  suite.mpexec = (apps / "mpexec").lexically_normal().string();
  suite.python = MP_PYTHON;
  suite.peer = MP_PEER_SCRIPT;
  std::filesystem::create_directories(suite.out);

  std::vector<Section> sections;
  int failed = 0;
  nlohmann::json results = {{"smoke", suite.smoke}, {"sections", nlohmann::json::object()}};
  for (const auto& entry : kSections) {
    if (!only.empty() && !only.count(entry.name)) continue;
    std::printf("== %s\n", entry.name);
    std::fflush(stdout);
    const auto start = std::chrono::steady_clock::now();
    try {
      sections.push_back(entry.run(suite));
    } catch (const std::exception& e) {
      std::fprintf(stderr, "bench_suite: %s: %s\n", entry.name, e.what());
      ++failed;
      continue;
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const Section& s = sections.back();
    results["sections"][s.name] = {{"seconds", seconds}, {"rows", s.rows}};
    mp::bench::WriteResult(suite, s.name + ".csv", Csv(s.rows));
    for (const auto& l : s.summary) {
      std::printf("   %s: %s%s%s\n", l.what.c_str(), l.measured.c_str(),
                  l.predicted.empty() ? "" : (", predicted " + l.predicted).c_str(),
                  l.reading.empty() ? "" : (", " + l.reading).c_str());
    }
    std::printf("   (%.0f s)\n", seconds);
  }
  mp::bench::WriteResult(suite, "results.json", results.dump(2) + "\n");
  const std::string table = SummaryTable(sections);
  mp::bench::WriteResult(suite, "summary.md", table);
  std::printf("\nSummary (%s run; files under %s)\n\n%s", suite.smoke ? "smoke" : "full", suite.out.c_str(),
              table.c_str());
  return failed ? 1 : 0;
}
