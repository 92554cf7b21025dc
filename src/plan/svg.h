// SVG charts for planning reports, with no dependency: a line chart (lines, steps and filled
// areas over a shared x axis) and a stacked bar chart, each with title, axis labels, ticks and a
// legend. Enough for demand against reserved capacity over a week, cost by market for a plan and
// its baselines, and cost against SLO. Text is XML-escaped; numbers are printed in the "C" locale.
//
// Thread-safety: free functions over values; no shared state.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace gpufleet::plan {

enum class SeriesStyle {
  kLine,
  kStep,  // held from each x to the next (capacity that changes hourly)
  kArea,  // filled from zero, drawn under the lines
};

struct ChartSeries {
  std::string name;
  std::vector<double> values;
  SeriesStyle style = SeriesStyle::kLine;
};

struct LineChart {
  std::string title, x_label, y_label;
  std::vector<double> x;            // increasing; each series has one value per x
  std::vector<ChartSeries> series;
  int width = 900, height = 420;
};

struct BarChart {
  std::string title, y_label;
  std::vector<std::string> categories;  // one bar each ("plan", "all on-demand", ...)
  std::vector<ChartSeries> stacks;      // one value (>= 0) per category, stacked in this order
  int width = 700, height = 420;
};

// InvalidArgument for no series, no x values, a series whose length differs from x (or from the
// categories), a non-finite value, a negative bar part, or a chart smaller than 200 x 150.
Result<std::string> RenderLineChart(const LineChart& chart);
Result<std::string> RenderStackedBarChart(const BarChart& chart);

// &, <, >, " and ' as entities; other control characters than tab and newline dropped.
std::string EscapeXml(std::string_view text);

}  // namespace gpufleet::plan
