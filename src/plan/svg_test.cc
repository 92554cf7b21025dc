#include "plan/svg.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <regex>

namespace gpufleet::plan {
namespace {

// A small well-formedness check: tags nest and close, one root, entities are known ones.
// Returns "" when well formed, else what is wrong.
std::string WellFormed(const std::string& xml) {
  std::vector<std::string> open;
  int roots = 0;
  for (size_t i = 0; i < xml.size();) {
    if (xml[i] == '&') {
      static const std::regex kEntity("^&(amp|lt|gt|quot|apos);");
      if (!std::regex_search(xml.substr(i, 8), kEntity)) return "bad entity at " + std::to_string(i);
      ++i;
      continue;
    }
    if (xml[i] == '>') return "stray '>' at " + std::to_string(i);
    if (xml[i] != '<') {
      ++i;
      continue;
    }
    const size_t end = xml.find('>', i);
    if (end == std::string::npos) return "unclosed tag at " + std::to_string(i);
    std::string tag = xml.substr(i + 1, end - i - 1);
    if (tag.find('<') != std::string::npos) return "'<' inside a tag at " + std::to_string(i);
    for (size_t q = tag.find('&'); q != std::string::npos; q = tag.find('&', q + 1)) {
      static const std::regex kEntity("^&(amp|lt|gt|quot|apos);");
      if (!std::regex_search(tag.substr(q, 8), kEntity)) return "bad entity in tag at " + std::to_string(i);
    }
    i = end + 1;
    if (tag.front() == '?') continue;
    if (tag.front() == '/') {
      if (open.empty() || open.back() != tag.substr(1)) return "mismatched </" + tag.substr(1) + ">";
      open.pop_back();
      continue;
    }
    const std::string name = tag.substr(0, tag.find_first_of(" \n/"));
    if (open.empty()) ++roots;
    if (tag.back() != '/') open.push_back(name);
  }
  if (!open.empty()) return "unclosed <" + open.back() + ">";
  if (roots != 1) return std::to_string(roots) + " root elements";
  return "";
}

// Where python3 is installed, its XML parser has the last word.
void ExpectPythonParses(const std::string& svg, const std::string& name) {
  const std::string path = ::testing::TempDir() + "/" + name + ".svg";
  std::ofstream(path) << svg;
  const std::string cmd = "python3 -c 'import sys, xml.dom.minidom; xml.dom.minidom.parse(sys.argv[1])' " + path;
  if (std::system("python3 -c 'import xml.dom.minidom' 2>/dev/null") != 0) return;
  EXPECT_EQ(std::system(cmd.c_str()), 0) << path;
}

LineChart WeekChart() {
  LineChart c;
  c.title = "Demand & reserved <A100>";
  c.x_label = "hour of week";
  c.y_label = "GPUs";
  for (int h = 0; h < 168; ++h) c.x.push_back(h);
  ChartSeries demand{"forecast demand", {}, SeriesStyle::kArea};
  ChartSeries reserved{"reserved \"R\"", {}, SeriesStyle::kStep};
  ChartSeries upper{"P90 band", {}, SeriesStyle::kLine};
  for (int h = 0; h < 168; ++h) {
    demand.values.push_back(10 + (h % 24 >= 9 && h % 24 < 18 ? 8 : 0));
    reserved.values.push_back(12);
    upper.values.push_back(demand.values.back() * 1.2);
  }
  c.series = {demand, reserved, upper};
  return c;
}

TEST(SvgTest, LineChartIsWellFormedAndNamesItsSeries) {
  // Given a week of demand (area), reserved capacity (step) and a band (line), expect well-formed
  // XML with the escaped title and every series name in the legend.
  auto svg = RenderLineChart(WeekChart());
  ASSERT_TRUE(svg.ok()) << svg.status().ToString();
  EXPECT_EQ(WellFormed(*svg), "");
  EXPECT_NE(svg->find("Demand &amp; reserved &lt;A100&gt;"), std::string::npos);
  EXPECT_NE(svg->find(">forecast demand</text>"), std::string::npos);
  EXPECT_NE(svg->find(">reserved &quot;R&quot;</text>"), std::string::npos);
  EXPECT_NE(svg->find(">P90 band</text>"), std::string::npos);
  EXPECT_NE(svg->find("<polygon"), std::string::npos);   // the area
  EXPECT_NE(svg->find(">hour of week</text>"), std::string::npos);
  ExpectPythonParses(*svg, "week");
}

TEST(SvgTest, StackedBarsShowEachMarketAndTheTotals) {
  // Given plan and baselines by market, expect a rect per part, the category names and totals.
  BarChart c;
  c.title = "Weekly cost by market";
  c.y_label = "USD";
  c.categories = {"plan", "all on-demand", "reserve peak"};
  c.stacks = {{"reserved", {1000, 0, 2400}}, {"on-demand", {300, 2000, 0}}, {"spot", {150, 0, 0}}};
  auto svg = RenderStackedBarChart(c);
  ASSERT_TRUE(svg.ok()) << svg.status().ToString();
  EXPECT_EQ(WellFormed(*svg), "");
  for (const char* text : {">plan</text>", ">all on-demand</text>", ">reserve peak</text>", ">reserved</text>",
                           ">on-demand</text>", ">spot</text>", ">1450</text>", ">2400</text>"}) {
    EXPECT_NE(svg->find(text), std::string::npos) << text;
  }
  size_t rects = 0;
  for (size_t p = svg->find("<rect x="); p != std::string::npos; p = svg->find("<rect x=", p + 1)) ++rects;
  EXPECT_EQ(rects, 9u + 3u);  // 3 bars x 3 parts + 3 legend swatches
  EXPECT_NE(svg->find("rotate(-30)\" text-anchor=\"end\">all on-demand</text>"), std::string::npos);
  ExpectPythonParses(*svg, "bars");
}

TEST(SvgTest, LargeTotalsAreWrittenWithKAndMAndLongNamesMakeRoom) {
  // Given dollar totals in the millions and long category names, expect "1.23M" and "12.5k" (not
  // 1.23023e+06) and a chart taller than asked by the room the slanted names take.
  BarChart c;
  c.categories = {"plan", "all spot (on-demand fallback)"};
  c.stacks = {{"reserved", {1'230'231, 12'500}}};
  auto svg = RenderStackedBarChart(c);
  ASSERT_TRUE(svg.ok()) << svg.status().ToString();
  EXPECT_EQ(WellFormed(*svg), "");
  EXPECT_NE(svg->find(">1.23M</text>"), std::string::npos);
  EXPECT_NE(svg->find(">12.5k</text>"), std::string::npos);
  EXPECT_EQ(svg->find("e+0"), std::string::npos);
  EXPECT_EQ(svg->find("height=\"420\""), std::string::npos);
}

TEST(SvgTest, EmptyOrInconsistentDataIsAnError) {
  // Given no series, no points, a short series, NaN or a negative bar, expect InvalidArgument.
  LineChart none = WeekChart();
  none.series.clear();
  EXPECT_EQ(RenderLineChart(none).status().code(), StatusCode::kInvalidArgument);
  LineChart no_x = WeekChart();
  no_x.x.clear();
  EXPECT_FALSE(RenderLineChart(no_x).ok());
  LineChart short_series = WeekChart();
  short_series.series[1].values.pop_back();
  auto bad = RenderLineChart(short_series);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("reserved \"R\""), std::string::npos);
  LineChart nan = WeekChart();
  nan.series[0].values[3] = std::nan("");
  EXPECT_FALSE(RenderLineChart(nan).ok());
  BarChart negative;
  negative.categories = {"plan"};
  negative.stacks = {{"spot", {-1}}};
  EXPECT_FALSE(RenderStackedBarChart(negative).ok());
  BarChart empty;
  EXPECT_FALSE(RenderStackedBarChart(empty).ok());
}

TEST(SvgTest, SinglePointAndFlatZeroSeriesStillDraw) {
  // Given one SLO point with zero cost, expect a well-formed chart rather than a division by zero.
  LineChart c;
  c.title = "cost vs SLO";
  c.x = {1};
  c.series = {{"plan", {0}}};
  auto svg = RenderLineChart(c);
  ASSERT_TRUE(svg.ok());
  EXPECT_EQ(WellFormed(*svg), "");
  EXPECT_EQ(svg->find("nan"), std::string::npos);
  EXPECT_EQ(svg->find("inf"), std::string::npos);
}

TEST(SvgTest, EscapeXmlReplacesMarkupAndDropsControlCharacters) {
  EXPECT_EQ(EscapeXml("a<b>&\"c'\x01"), "a&lt;b&gt;&amp;&quot;c&apos;");
}

}  // namespace
}  // namespace gpufleet::plan
