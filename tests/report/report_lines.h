// Helpers for reading reports in tests: split into lines, find the lines of
// a titled section, write a file for an external checker.
#pragma once

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace mp::testing {

inline std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// Whitespace-separated words.
inline std::vector<std::string> Words(const std::string& text) {
  std::vector<std::string> words;
  std::istringstream in(text);
  for (std::string word; in >> word;) words.push_back(word);
  return words;
}

inline bool StartsWith(const std::string& text, const std::string& prefix) {
  return text.compare(0, prefix.size(), prefix) == 0;
}

inline bool Contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// The lines after the one starting with `title` (blank lines right after it
// skipped), up to the next blank line.
inline std::vector<std::string> SectionLines(const std::string& text, const std::string& title) {
  std::vector<std::string> out;
  bool in = false;
  for (const std::string& line : Lines(text)) {
    if (in && line.empty() && out.empty()) continue;
    if (in && line.empty()) break;
    if (in) out.push_back(line);
    if (!in && StartsWith(line, title)) in = true;
  }
  return out;
}

// The number of times `part` occurs in `text`.
inline int Count(const std::string& text, const std::string& part) {
  int n = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + part.size())) ++n;
  return n;
}

inline void WriteFile(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

// MP_REPORT_DUMP=<dir>: tests write what they render there, to look at.
inline void Dump(const std::string& name, const std::string& text) {
  if (const char* dir = std::getenv("MP_REPORT_DUMP")) WriteFile(std::string(dir) + "/" + name, text);
}

}  // namespace mp::testing
