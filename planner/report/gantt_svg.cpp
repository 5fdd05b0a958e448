// GanttSvg: the simulator's timeline drawn as SVG. Layout, top to bottom:
// title, subtitle, legend, then per stage a compute row (F/B boxes on a grey
// band, so the bubble shows as grey) and a transfer sub-lane (activations in
// its upper half, gradients in its lower half: both may be in flight at
// once on different links), then the time axis. Times map linearly onto the
// plot; each box is inset half a pixel on both sides so back-to-back
// actions stay visibly separate and never overlap.
#include "planner/report/gantt_svg.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "common/error.h"
#include "common/xml_escape.h"
#include "planner/report/report_format.h"
#include "planner/report/report_tables.h"

namespace mp {
namespace {

constexpr double kWidth = 1200;
constexpr double kRightMargin = 36;
constexpr double kTop = 92;    // y of the first row
constexpr double kRowH = 26;   // compute row
constexpr double kLaneH = 12;  // transfer sub-lane
constexpr double kRowGap = 14;
constexpr double kCharW = 6.9;    // average advance of 12px sans text
constexpr size_t kMaxLabel = 34;  // code points in a row label

const char* kStyle = R"(<style>
text { font-family: 'DejaVu Sans', Helvetica, Arial, sans-serif; fill: #222222; }
.title { font-size: 16px; font-weight: bold; }
.sub { font-size: 12px; fill: #555555; }
.label { font-size: 12px; }
.lanelabel { font-size: 9px; fill: #888888; }
.legend { font-size: 11px; }
.tick { font-size: 11px; fill: #555555; }
.mb { font-size: 10px; }
.band { fill: #eceef1; }
.laneband { fill: #f7f8f9; }
.swatch { stroke: #9a9da3; stroke-width: 0.6; }
.fwd { fill: #9cc7f0; stroke: #3a78b5; stroke-width: 0.8; }
.bwd { fill: #f6c28b; stroke: #c47a25; stroke-width: 0.8; }
.wgt { fill: #c9e4b4; stroke: #5f9a3a; stroke-width: 0.8; }
.act { fill: #4f9a5e; }
.grad { fill: #a8659a; }
.allreduce { fill: #d5d0e6; stroke: #6c5fa7; stroke-width: 0.8; }
.optimizer { fill: #e8e1c4; stroke: #8a7a2e; stroke-width: 0.8; }
.grid { stroke: #d9dbdf; stroke-width: 1; }
.axis { stroke: #666666; stroke-width: 1; }
.end { stroke: #c0392b; stroke-width: 1.2; stroke-dasharray: 4 3; }
.stepband { fill: #c0392b; fill-opacity: 0.12; }
.endlabel { font-size: 11px; fill: #c0392b; }
</style>
)";

// Coordinates with at most two decimals, no trailing zeros.
std::string Num(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f", v);
  std::string out = text;
  while (out.back() == '0') out.pop_back();
  if (out.back() == '.') out.pop_back();
  return out == "-0" ? "0" : out;
}

// Cuts text to `max` code points, ending it with an ellipsis.
std::string Truncate(const std::string& text, size_t max) {
  if (DisplayWidth(text) <= max) return text;
  std::string out;
  size_t points = 0;
  for (char c : text) {
    if ((c & 0xC0) != 0x80 && ++points > max - 1) break;
    out += c;
  }
  return out + "\xE2\x80\xA6";
}

// A tick step of 1, 2, 2.5 or 5 times a power of ten giving at most ~10 ticks.
double TickStep(double span) {
  const double raw = span / 10;
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  for (double f : {1.0, 2.0, 2.5, 5.0, 10.0}) {
    if (f * magnitude >= raw) return f * magnitude;
  }
  return 10 * magnitude;
}

std::string TickText(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%.6g", v);
  return text;
}

std::string Rect(const std::string& cls, double x, double y, double w, double h, const std::string& title = "") {
  std::string out = "<rect class=\"" + cls + "\" x=\"" + Num(x) + "\" y=\"" + Num(y) + "\" width=\"" + Num(w) +
                    "\" height=\"" + Num(h) + "\"";
  if (title.empty()) return out + "/>\n";
  return out + "><title>" + XmlEscape(title) + "</title></rect>\n";
}

std::string Text(const std::string& cls, double x, double y, const std::string& text, const char* anchor = "start") {
  return "<text class=\"" + cls + "\" x=\"" + Num(x) + "\" y=\"" + Num(y) + "\" text-anchor=\"" + anchor + "\">" +
         XmlEscape(text) + "</text>\n";
}

std::string Span(double start, double end) { return FormatMs(start) + "\xE2\x80\x93" + FormatMs(end) + " ms"; }

}  // namespace

std::string GanttSvg(const Plan& plan, const SimResult& sim) {
  // One row per device (program): its stages' actions in the order it runs them.
  const int K = int(plan.programs.size());
  if (int(sim.timeline.size()) != K) {
    throw InputError(
        Concat("gantt: the simulation has ", sim.timeline.size(), " device timelines; the plan has ", K, " programs"));
  }
  const bool one_stage_each = K == int(plan.stages.size());
  std::vector<std::string> labels;
  size_t label_chars = 0;
  for (int p = 0; p < K; ++p) {
    std::string stages;
    for (const PlanStage& stage : plan.stages) {
      if (stage.program == p) stages += (stages.empty() ? "" : ",") + std::to_string(stage.id);
    }
    const PlanStage& stage = plan.stages[std::stoi(stages.substr(0, stages.find(',')))];
    // A long device name is cut before its " #id", which tells rows apart.
    const std::string device = DeviceLabel(plan, stage);
    const size_t id = std::min(device.rfind(" #"), device.size());
    const std::string stage_text =
        (stages.find(',') == std::string::npos ? "stage " : "stages ") + stages + " \xC2\xB7 ";
    const size_t room = kMaxLabel - std::min(kMaxLabel - 8, DisplayWidth(stage_text + device.substr(id)));
    labels.push_back(stage_text + Truncate(device.substr(0, id), room) + device.substr(id));
    label_chars = std::max(label_chars, DisplayWidth(labels.back()));
  }
  const double left = std::max(110.0, 24 + kCharW * double(label_chars));
  const double plot_w = kWidth - left - kRightMargin;
  // The plan's error band around the step's end, scaled to this replay.
  const bool banded = plan.predicted.step_ms > 0 && plan.predicted.step_high_ms > 0 && sim.step_ms > 0;
  const double band_low = banded ? sim.step_ms * plan.predicted.step_low_ms / plan.predicted.step_ms : 0;
  const double band_high = banded ? sim.step_ms * plan.predicted.step_high_ms / plan.predicted.step_ms : 0;
  const double span = sim.step_ms > 0 ? std::max(sim.step_ms, band_high) : 1;
  const double scale = plot_w / span;
  const double pitch = kRowH + kLaneH + kRowGap;
  const double axis_y = kTop + K * pitch - kRowGap + 6;
  const double height = axis_y + 48;
  auto X = [&](double ms) { return left + std::clamp(ms, 0.0, span) * scale; };

  // F, B or I, W, SEND_F, SEND_B, all-reduce, the optimizer's step
  bool has[7] = {false, false, false, false, false, false, false};
  for (double ms : sim.allreduce_ms) has[5] = has[5] || ms > 0;
  for (double ms : sim.optimizer_ms) has[6] = has[6] || ms > 0;
  for (const auto& row : sim.timeline) {
    for (const TimedAction& t : row) {
      const ActionKind k = t.action.kind;
      if (k == ActionKind::kForward) has[0] = true;
      if (IsBackward(k)) has[1] = true;
      if (k == ActionKind::kBackwardWeight) has[2] = true;
      if (k == ActionKind::kSendF && t.end_ms > t.start_ms) has[3] = true;
      if (k == ActionKind::kSendB && t.end_ms > t.start_ms) has[4] = true;
    }
  }

  std::ostringstream svg;
  svg << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << Num(kWidth) << "\" height=\"" << Num(height)
      << "\" viewBox=\"0 0 " << Num(kWidth) << " " << Num(height) << "\">\n"
      << kStyle << "<rect x=\"0\" y=\"0\" width=\"" << Num(kWidth) << "\" height=\"" << Num(height)
      << "\" fill=\"#ffffff\"/>\n";

  // Title, subtitle, legend.
  svg << Text("title", 20, 26,
              "Predicted step: " + Plural(K, "stage") + " \xC3\x97 " +
                  Plural(plan.microbatches, "micro-batch", "micro-batches") + " of " +
                  std::to_string(plan.microbatch_size) + ", " + ScheduleName(plan.schedule) + " \xE2\x80\x94 " +
                  FormatMs(sim.step_ms) + " ms");
  svg << Text("sub", 20, 46,
              PlanHeadline(plan) + " \xC2\xB7 partitioner " + plan.partitioner + " \xC2\xB7 bubble " +
                  FormatPercent(sim.bubble_fraction));
  const struct {
    const char* cls;
    const char* text;
    bool thin;
  } legend[] = {{"fwd", "forward (micro-batch no.)", false},
                {"bwd", has[2] ? "backward: input gradients (I)" : "backward", false},
                {"wgt", "backward: weight gradients (W)", false},
                {"act", "activations sent \xE2\x86\x92 next stage", true},
                {"grad", "gradients sent \xE2\x86\x90 previous stage", true},
                {"allreduce", "gradient all-reduce over the replicas", false},
                {"optimizer", "optimizer step", false},
                {"band", "idle", false},
                {"stepband", "error band of the step", false}};
  double lx = 20;
  const double ly = 62;
  for (int i = 0; i < 9; ++i) {
    if ((i < 7 && !has[i]) || (i == 8 && !banded)) continue;
    svg << Rect(std::string(legend[i].cls) + " swatch", lx, legend[i].thin ? ly + 3 : ly, 16, legend[i].thin ? 5 : 11);
    svg << Text("legend", lx + 21, ly + 10, legend[i].text);
    lx += 21 + 6.1 * double(DisplayWidth(legend[i].text)) + 18;
  }

  // Grid and axis under the boxes.
  const double tick = TickStep(span);
  svg << "<g id=\"axis\">\n";
  for (int i = 0; i * tick <= span * (1 + 1e-9); ++i) {
    const double x = X(i * tick);
    svg << "<line class=\"grid\" x1=\"" << Num(x) << "\" y1=\"" << Num(kTop - 4) << "\" x2=\"" << Num(x) << "\" y2=\""
        << Num(axis_y) << "\"/>\n";
    svg << Text("tick", x, axis_y + 16, TickText(i * tick), "middle");
  }
  svg << "<line class=\"axis\" x1=\"" << Num(left) << "\" y1=\"" << Num(axis_y) << "\" x2=\"" << Num(left + plot_w)
      << "\" y2=\"" << Num(axis_y) << "\"/>\n";
  svg << Text("tick", left + plot_w / 2, axis_y + 36, "time (ms)", "middle");
  svg << "</g>\n";

  for (int s = 0; s < K; ++s) {
    const double y = kTop + s * pitch;
    svg << Rect("band", left, y, plot_w, kRowH) << Rect("laneband", left, y + kRowH + 1, plot_w, kLaneH - 1);
  }
  if (banded) {
    svg << Rect("stepband", X(band_low), kTop - 14, X(band_high) - X(band_low), axis_y - kTop + 14,
                "error band of the step: " + Span(band_low, band_high));
  }
  for (int s = 0; s < K; ++s) {
    const double y = kTop + s * pitch;
    const double lane_y = y + kRowH + 1;
    svg << "<g id=\"stage-" << s << "\">\n";
    svg << Text("label", left - 10, y + kRowH / 2 + 4, labels[s], "end");
    svg << Text("lanelabel", left - 10, lane_y + kLaneH - 3, "transfers", "end");
    for (const TimedAction& t : sim.timeline[s]) {
      const ActionKind k = t.action.kind;
      const double x0 = X(t.start_ms), x1 = X(t.end_ms);
      if (IsCompute(k)) {
        const double x = x0 + 0.5, w = std::max(x1 - x0 - 1, 0.5);
        const std::string mb = std::to_string(t.action.microbatch);
        const char* cls = k == ActionKind::kForward ? "box fwd" : k == ActionKind::kBackwardWeight ? "box wgt" : "box bwd";
        svg << Rect(cls, x, y + 1, w, kRowH - 2,
                    FormatAction(t.action) + ": " + Span(t.start_ms, t.end_ms));
        if (w >= 6.4 * double(mb.size()) + 2) svg << Text("mb", x + w / 2, y + kRowH / 2 + 3.5, mb, "middle");
      } else if (IsSend(k) && t.end_ms > t.start_ms) {
        const bool act = k == ActionKind::kSendF;
        const double w = std::max(x1 - x0 - 0.5, 1.5);  // a fast link still shows
        const double x = std::min(x0 + 0.25, left + plot_w - w);
        svg << Rect(act ? "xfer act" : "xfer grad", x, act ? lane_y + 0.5 : lane_y + 5.75, w, 4.75,
                    FormatAction(t.action) + " to stage " + std::to_string(PeerStage(t.action)) + ": " +
                        Span(t.start_ms, t.end_ms));
      }
    }
    if (one_stage_each && s < int(sim.allreduce_ms.size()) && sim.allreduce_ms[s] > 0) {  // after the stage's last action
      double done = 0;
      for (const TimedAction& t : sim.timeline[s]) done = std::max(done, t.end_ms);
      const double x0 = X(done), x1 = X(done + sim.allreduce_ms[s]);
      svg << Rect("allreduce", x0 + 0.5, y + 1, std::max(x1 - x0 - 1, 0.5), kRowH - 2,
                  Concat("gradient all-reduce over ", plan.replicas, " replicas: ",
                         Span(done, done + sim.allreduce_ms[s])));
    }
    if (s < int(sim.optimizer_ms.size()) && sim.optimizer_ms[s] > 0) {  // after the device's list and all-reduces
      double done = 0;
      for (const TimedAction& t : sim.timeline[s]) done = std::max(done, t.end_ms);
      for (const PlanStage& stage : plan.stages) done += stage.program == s ? stage.allreduce_ms : 0;
      const double x0 = X(done), x1 = X(done + sim.optimizer_ms[s]);
      svg << Rect("optimizer", x0 + 0.5, y + 1, std::max(x1 - x0 - 1, 0.5), kRowH - 2,
                  Concat(plan.optimizer, " step on its parameters: ", Span(done, done + sim.optimizer_ms[s])));
    }
    svg << "</g>\n";
  }

  // The end of the step.
  const double end_x = X(sim.step_ms);
  svg << "<line class=\"end\" x1=\"" << Num(end_x) << "\" y1=\"" << Num(kTop - 14) << "\" x2=\"" << Num(end_x)
      << "\" y2=\"" << Num(axis_y) << "\"/>\n";
  const std::string band_text =
      banded ? " [" + FormatMs(band_low) + ", " + FormatMs(band_high) + "]" : std::string();
  svg << Text("endlabel", left + plot_w, kTop - 18, "step " + FormatMs(sim.step_ms) + " ms" + band_text, "end");
  svg << "</svg>\n";
  return svg.str();
}

}  // namespace mp
