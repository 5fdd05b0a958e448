// Cell text shared by every plan report (terminal, Markdown, SVG, DOT): how
// a time, a fraction, a count or a ratio is written, so that the same number
// reads the same everywhere. Pure functions of their arguments.
#pragma once

#include <cstdint>
#include <string>

namespace mp {

// Milliseconds without the unit, precision by magnitude: "0.042", "12.31",
// "412.3", "1203".
std::string FormatMs(double ms);

// A rate with three or four significant digits: "3.71", "59.1", "1204",
// then human units: "12.3K".
std::string FormatRate(double per_s);

// A fraction as a percentage with one decimal: 0.143 -> "14.3%".
std::string FormatPercent(double fraction);

// A count in human units: 950 -> "950", 12'345 -> "12.3K", 25'557'032 -> "25.6M".
std::string FormatCount(int64_t count);

// A ratio with two decimals: 1.234 -> "1.23x".
std::string FormatRatio(double ratio);

// A relative difference with a sign: 0.031 -> "+3.1%", -0.2 -> "-20.0%".
std::string FormatDelta(double fraction);

// "1 stage", "4 stages": the count and its noun, singular when the count is
// 1, else `plural` (or the singular with an "s" when `plural` is empty).
std::string Plural(int64_t count, const std::string& singular, const std::string& plural = "");

// Terminal columns taken by UTF-8 text: one per code point (no wide glyphs
// are used in reports).
size_t DisplayWidth(const std::string& utf8);

}  // namespace mp
