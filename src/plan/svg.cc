#include "plan/svg.h"

#include "common/strings.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace gpufleet::plan {
namespace {

constexpr const char* kPalette[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                    "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};
constexpr int kLeft = 70, kRight = 180, kTop = 40, kBottom = 55;

std::string Num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", v);
  std::string s(buf);
  while (!s.empty() && s.back() == '0') s.pop_back();
  if (!s.empty() && s.back() == '.') s.pop_back();
  return s == "-0" ? "0" : s;
}
// Axis and bar labels: as written up to 9,999, then with k and M ("12.5k", "1.23M") rather than
// the exponent form %g falls to from a million.
std::string Label(double v) {
  char buf[32];
  const double a = std::fabs(v);
  if (a >= 1e6) {
    std::snprintf(buf, sizeof buf, "%.3gM", v / 1e6);
  } else if (a >= 1e4) {
    std::snprintf(buf, sizeof buf, "%.3gk", v / 1e3);
  } else {
    std::snprintf(buf, sizeof buf, "%g", a < 1e-12 ? 0.0 : v);
  }
  return buf;
}
const char* Color(size_t i) { return kPalette[i % (sizeof kPalette / sizeof *kPalette)]; }

// A "nice" step (1, 2 or 5 x 10^k) giving about `ticks` intervals over [lo, hi].
double NiceStep(double lo, double hi, int ticks) {
  const double raw = (hi - lo) / ticks;
  if (!(raw > 0)) return 1;
  const double mag = std::pow(10, std::floor(std::log10(raw)));
  const double f = raw / mag;
  return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * mag;
}

struct Axis {
  double lo, hi;  // data range mapped onto [pixel_lo, pixel_hi]
  double pixel_lo, pixel_hi;
  double operator()(double v) const { return pixel_lo + (v - lo) / (hi - lo) * (pixel_hi - pixel_lo); }
};

// The y range, widened to nice ticks and including zero; the plot ends `bottom` above the foot.
Axis YAxis(double lo, double hi, int height, int bottom = kBottom) {
  lo = std::min(lo, 0.0);
  hi = std::max(hi, lo + 1e-9);
  const double step = NiceStep(lo, hi, 5);
  return {std::floor(lo / step) * step, std::ceil(hi / step) * step, static_cast<double>(height - bottom),
          static_cast<double>(kTop)};
}

std::string Header(int width, int height, const std::string& title) {
  std::string s = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  s += "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + std::to_string(width) + "\" height=\"" +
       std::to_string(height) + "\" viewBox=\"0 0 " + std::to_string(width) + " " + std::to_string(height) +
       "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  s += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  s += "<text x=\"" + std::to_string(width / 2) + "\" y=\"22\" text-anchor=\"middle\" font-size=\"15\">" +
       EscapeXml(title) + "</text>\n";
  return s;
}

std::string YTicksAndLabel(const Axis& y, int width, const std::string& label) {
  std::string s;
  const double step = NiceStep(y.lo, y.hi, 5);
  for (double v = y.lo; v <= y.hi + step * 1e-6; v += step) {
    const std::string py = Num(y(v));
    s += "<line x1=\"" + std::to_string(kLeft) + "\" x2=\"" + std::to_string(width - kRight) + "\" y1=\"" + py +
         "\" y2=\"" + py + "\" stroke=\"#e0e0e0\"/>\n";
    s += "<text x=\"" + std::to_string(kLeft - 6) + "\" y=\"" + py + "\" dy=\"4\" text-anchor=\"end\">" +
         Label(v) + "</text>\n";
  }
  const std::string mid = Num((y.pixel_lo + y.pixel_hi) / 2);
  s += "<text transform=\"translate(16," + mid + ") rotate(-90)\" text-anchor=\"middle\">" + EscapeXml(label) +
       "</text>\n";
  return s;
}

std::string Legend(const std::vector<ChartSeries>& series, int width) {
  std::string s;
  for (size_t i = 0; i < series.size(); ++i) {
    const int y = kTop + 8 + static_cast<int>(i) * 18;
    const int x = width - kRight + 14;
    s += "<rect x=\"" + std::to_string(x) + "\" y=\"" + std::to_string(y - 9) +
         "\" width=\"12\" height=\"12\" fill=\"" + Color(i) + "\"/>\n";
    s += "<text x=\"" + std::to_string(x + 18) + "\" y=\"" + std::to_string(y + 1) + "\">" +
         EscapeXml(series[i].name) + "</text>\n";
  }
  return s;
}

Status CheckSize(int width, int height) {
  if (width < 200 || height < 150) return Status::InvalidArgument("chart: at least 200 x 150 pixels");
  return Status::Ok();
}

Status CheckValues(const ChartSeries& s, size_t n, bool non_negative) {
  if (s.values.size() != n) {
    return Status::InvalidArgument("chart: series '" + s.name + "' has " + std::to_string(s.values.size()) +
                                   " values, expected " + std::to_string(n));
  }
  for (double v : s.values) {
    if (!std::isfinite(v)) return Status::InvalidArgument("chart: series '" + s.name + "' has a non-finite value");
    if (non_negative && v < 0) return Status::InvalidArgument("chart: bar part '" + s.name + "' is negative");
  }
  return Status::Ok();
}

}  // namespace

std::string EscapeXml(std::string_view text) { return XmlEscape(text); }

Result<std::string> RenderLineChart(const LineChart& chart) {
  GF_RETURN_IF_ERROR(CheckSize(chart.width, chart.height));
  if (chart.series.empty()) return Status::InvalidArgument("chart '" + chart.title + "': no series to draw");
  if (chart.x.empty()) return Status::InvalidArgument("chart '" + chart.title + "': no data points");
  for (double v : chart.x) {
    if (!std::isfinite(v)) return Status::InvalidArgument("chart: a non-finite x value");
  }
  double lo = 0, hi = 0;
  for (const ChartSeries& s : chart.series) {
    GF_RETURN_IF_ERROR(CheckValues(s, chart.x.size(), false));
    for (double v : s.values) {
      lo = std::min(lo, v);
      hi = std::max(hi, v);
    }
  }
  const auto [xmin_it, xmax_it] = std::minmax_element(chart.x.begin(), chart.x.end());
  const double xmin = *xmin_it, xmax = *xmax_it > *xmin_it ? *xmax_it : *xmin_it + 1;
  const Axis x{xmin, xmax, static_cast<double>(kLeft), static_cast<double>(chart.width - kRight)};
  const Axis y = YAxis(lo, hi, chart.height);

  std::string s = Header(chart.width, chart.height, chart.title);
  s += YTicksAndLabel(y, chart.width, chart.y_label);
  const double xstep = NiceStep(xmin, xmax, 8);
  for (double v = std::ceil(xmin / xstep) * xstep; v <= xmax + xstep * 1e-6; v += xstep) {
    s += "<text x=\"" + Num(x(v)) + "\" y=\"" + std::to_string(chart.height - kBottom + 16) +
         "\" text-anchor=\"middle\">" + Label(v) + "</text>\n";
  }
  s += "<text x=\"" + Num((x.pixel_lo + x.pixel_hi) / 2) + "\" y=\"" + std::to_string(chart.height - 12) +
       "\" text-anchor=\"middle\">" + EscapeXml(chart.x_label) + "</text>\n";
  s += "<line x1=\"" + std::to_string(kLeft) + "\" x2=\"" + std::to_string(chart.width - kRight) + "\" y1=\"" +
       Num(y(0)) + "\" y2=\"" + Num(y(0)) + "\" stroke=\"black\"/>\n";

  // Areas first, so that lines stay visible on top of them.
  for (int pass = 0; pass < 2; ++pass) {
    for (size_t i = 0; i < chart.series.size(); ++i) {
      const ChartSeries& ser = chart.series[i];
      const bool area = ser.style == SeriesStyle::kArea;
      if ((pass == 0) != area) continue;
      std::string points;
      for (size_t j = 0; j < chart.x.size(); ++j) {
        if (ser.style == SeriesStyle::kStep && j > 0) {
          points += Num(x(chart.x[j])) + "," + Num(y(ser.values[j - 1])) + " ";
        }
        points += Num(x(chart.x[j])) + "," + Num(y(ser.values[j])) + " ";
      }
      s += "<g><title>" + EscapeXml(ser.name) + "</title>";
      if (area) {
        s += "<polygon points=\"" + Num(x(chart.x.front())) + "," + Num(y(0)) + " " + points +
             Num(x(chart.x.back())) + "," + Num(y(0)) + "\" fill=\"" + Color(i) + "\" fill-opacity=\"0.35\"/>";
      } else {
        s += "<polyline points=\"" + points + "\" fill=\"none\" stroke=\"" + Color(i) + "\" stroke-width=\"1.8\"/>";
      }
      s += "</g>\n";
    }
  }
  s += Legend(chart.series, chart.width);
  s += "</svg>\n";
  return s;
}

Result<std::string> RenderStackedBarChart(const BarChart& chart) {
  GF_RETURN_IF_ERROR(CheckSize(chart.width, chart.height));
  if (chart.stacks.empty()) return Status::InvalidArgument("chart '" + chart.title + "': no series to draw");
  if (chart.categories.empty()) return Status::InvalidArgument("chart '" + chart.title + "': no bars");
  std::vector<double> totals(chart.categories.size(), 0);
  for (const ChartSeries& s : chart.stacks) {
    GF_RETURN_IF_ERROR(CheckValues(s, chart.categories.size(), true));
    for (size_t j = 0; j < totals.size(); ++j) totals[j] += s.values[j];
  }
  // Category names are written slanted under their bars, so that long ones do not run into each
  // other; the chart grows downwards by the room they take, the plot keeps its size.
  size_t longest = 0;
  for (const std::string& c : chart.categories) longest = std::max(longest, c.size());
  const int bottom = std::max(kBottom, 24 + static_cast<int>(std::lround(static_cast<double>(longest) * 3.6)));
  const int height = chart.height + bottom - kBottom;
  const Axis y = YAxis(0, *std::max_element(totals.begin(), totals.end()), height, bottom);
  std::string s = Header(chart.width, height, chart.title);
  s += YTicksAndLabel(y, chart.width, chart.y_label);
  const double plot_w = chart.width - kLeft - kRight;
  const double slot = plot_w / static_cast<double>(chart.categories.size());
  const double bar_w = slot * 0.6;
  for (size_t j = 0; j < chart.categories.size(); ++j) {
    const double x0 = kLeft + slot * static_cast<double>(j) + (slot - bar_w) / 2;
    double base = 0;
    for (size_t i = 0; i < chart.stacks.size(); ++i) {
      const double v = chart.stacks[i].values[j];
      const double top = y(base + v), bottom = y(base);
      s += "<rect x=\"" + Num(x0) + "\" y=\"" + Num(top) + "\" width=\"" + Num(bar_w) + "\" height=\"" +
           Num(bottom - top) + "\" fill=\"" + Color(i) + "\"><title>" + EscapeXml(chart.stacks[i].name) + ": " +
           Label(v) + "</title></rect>\n";
      base += v;
    }
    s += "<text x=\"" + Num(x0 + bar_w / 2) + "\" y=\"" + Num(y(totals[j]) - 4) + "\" text-anchor=\"middle\">" +
         Label(totals[j]) + "</text>\n";
    s += "<text transform=\"translate(" + Num(x0 + bar_w / 2) + "," + std::to_string(height - bottom + 14) +
         ") rotate(-30)\" text-anchor=\"end\">" + EscapeXml(chart.categories[j]) + "</text>\n";
  }
  s += "<line x1=\"" + std::to_string(kLeft) + "\" x2=\"" + std::to_string(chart.width - kRight) + "\" y1=\"" +
       Num(y(0)) + "\" y2=\"" + Num(y(0)) + "\" stroke=\"black\"/>\n";
  s += Legend(chart.stacks, chart.width);
  s += "</svg>\n";
  return s;
}

}  // namespace gpufleet::plan
