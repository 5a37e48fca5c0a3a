#include "coordinator/report/svg_chart.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace tessera {
namespace {

constexpr double kWidth = 640, kHeight = 400;
constexpr double kLeft = 70, kRight = 150, kTop = 40, kBottom = 50;
constexpr const char* kColors[] = {"#1f77b4", "#d62728", "#2ca02c",
                                   "#ff7f0e", "#9467bd", "#8c564b"};

// A "nice" tick step (1, 2 or 5 times a power of ten) for a span.
double TickStep(double span) {
  if (span <= 0) return 1;
  const double raw = span / 5;
  const double p = std::pow(10, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0}) {
    if (raw <= m * p) return m * p;
  }
  return 10 * p;
}

std::string Escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '&':
        out += "&amp;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

}  // namespace

void SvgChart::AddSeries(std::string name,
                         std::vector<std::pair<double, double>> xy) {
  series_.push_back({std::move(name), std::move(xy)});
}

std::string SvgChart::Render() const {
  double x0 = std::numeric_limits<double>::infinity(), x1 = -x0;
  double y0 = x0, y1 = -x0;
  for (const Series& s : series_) {
    for (const auto& [x, y] : s.xy) {
      x0 = std::min(x0, x);
      x1 = std::max(x1, x);
      y0 = std::min(y0, y);
      y1 = std::max(y1, y);
    }
  }
  if (!(x0 <= x1)) x0 = 0, x1 = 1, y0 = 0, y1 = 1;
  if (x1 == x0) x1 = x0 + 1;
  if (y1 == y0) y1 = y0 + 1;
  const double ystep = TickStep(y1 - y0);
  y0 = std::floor(y0 / ystep) * ystep;
  y1 = std::ceil(y1 / ystep) * ystep;
  // Epochs and steps are whole numbers: no ticks between them.
  const double xstep = std::max(1.0, TickStep(x1 - x0));
  const double pw = kWidth - kLeft - kRight, ph = kHeight - kTop - kBottom;
  auto px = [&](double x) { return kLeft + (x - x0) / (x1 - x0) * pw; };
  auto py = [&](double y) { return kTop + (1 - (y - y0) / (y1 - y0)) * ph; };

  std::string svg = absl::StrFormat(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" "
      "height=\"%.0f\" font-family=\"sans-serif\" font-size=\"12\">\n"
      "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n"
      "<text x=\"%.0f\" y=\"22\" font-size=\"15\">%s</text>\n",
      kWidth, kHeight, kLeft, Escape(title_));
  for (double y = y0; y <= y1 + ystep / 2; y += ystep) {
    absl::StrAppendFormat(
        &svg,
        "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
        "stroke=\"#ddd\"/><text x=\"%.1f\" y=\"%.1f\" "
        "text-anchor=\"end\">%g</text>\n",
        kLeft, py(y), kLeft + pw, py(y), kLeft - 6, py(y) + 4, y);
  }
  for (double x = std::ceil(x0 / xstep) * xstep; x <= x1 + xstep / 2;
       x += xstep) {
    absl::StrAppendFormat(&svg,
                          "<text x=\"%.1f\" y=\"%.1f\" "
                          "text-anchor=\"middle\">%g</text>\n",
                          px(x), kTop + ph + 18, x);
  }
  absl::StrAppendFormat(
      &svg,
      "<rect x=\"%.0f\" y=\"%.0f\" width=\"%.0f\" height=\"%.0f\" "
      "fill=\"none\" stroke=\"#333\"/>\n"
      "<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"middle\">%s</text>\n"
      "<text x=\"16\" y=\"%.0f\" text-anchor=\"middle\" "
      "transform=\"rotate(-90 16 %.0f)\">%s</text>\n",
      kLeft, kTop, pw, ph, kLeft + pw / 2, kHeight - 10, Escape(x_label_),
      kTop + ph / 2, kTop + ph / 2, Escape(y_label_));
  for (size_t i = 0; i < series_.size(); ++i) {
    const Series& s = series_[i];
    const char* color = kColors[i % (sizeof(kColors) / sizeof(kColors[0]))];
    std::string points;
    for (const auto& [x, y] : s.xy) {
      absl::StrAppendFormat(&points, "%.1f,%.1f ", px(x), py(y));
      absl::StrAppendFormat(&svg,
                            "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" "
                            "fill=\"%s\"/>\n",
                            px(x), py(y), color);
    }
    absl::StrAppendFormat(&svg,
                          "<polyline points=\"%s\" fill=\"none\" "
                          "stroke=\"%s\" stroke-width=\"2\"/>\n"
                          "<text x=\"%.0f\" y=\"%.0f\" fill=\"%s\">%s</text>\n",
                          points, color, kLeft + pw + 10, kTop + 16 + 18 * i,
                          color, Escape(s.name));
  }
  svg += "</svg>\n";
  return svg;
}

}  // namespace tessera
