// A Gantt chart of one predicted pipeline step, as a standalone SVG file.
#pragma once

#include <string>

#include "planner/plan/plan.h"

namespace mp {

// `sim` is the plan's step replayed (SimulatePlan(plan)): one timeline per
// stage. Draws one row per stage, labelled "stage 0 · <device>", with a box
// per forward (class "box fwd") and backward (class "box bwd") labelled with
// its micro-batch number where the number fits, and under it a thin sub-lane
// with a box per SEND that takes time (class "xfer act" for activations to
// the next stage, "xfer grad" for gradients to the previous one). Above: a
// title with K, M, the schedule and the step time, and a legend; below: a
// time axis in ms. Where the plan has an error band (step_low_ms,
// step_high_ms), it is shaded (class "stepband") across the rows around the
// step's end, scaled to this replay's step, and the axis reaches its top.
// Every box has a <title> tooltip. 1200 px wide; every element lies inside
// the viewBox; boxes on one row do not overlap.
// Throws InputError when sim has not one timeline per plan stage.
std::string GanttSvg(const Plan& plan, const SimResult& sim);

}  // namespace mp
