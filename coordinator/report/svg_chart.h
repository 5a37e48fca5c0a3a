#ifndef TESSERA_COORDINATOR_REPORT_SVG_CHART_H_
#define TESSERA_COORDINATOR_REPORT_SVG_CHART_H_

#include <string>
#include <utility>
#include <vector>

namespace tessera {

// A line chart written as a standalone SVG file: no plotting library, and
// every browser shows it. Good for a handful of series of up to a few
// thousand points (training curves).
class SvgChart {
 public:
  SvgChart(std::string title, std::string x_label, std::string y_label)
      : title_(std::move(title)),
        x_label_(std::move(x_label)),
        y_label_(std::move(y_label)) {}

  void AddSeries(std::string name, std::vector<std::pair<double, double>> xy);

  // The chart as SVG text; axes span the data with ticks at round values.
  std::string Render() const;

 private:
  struct Series {
    std::string name;
    std::vector<std::pair<double, double>> xy;
  };
  std::string title_, x_label_, y_label_;
  std::vector<Series> series_;
};

}  // namespace tessera

#endif  // TESSERA_COORDINATOR_REPORT_SVG_CHART_H_
