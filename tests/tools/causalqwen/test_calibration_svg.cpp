// tools/causalqwen/calibration_svg.hpp: the calibration report's picture is one well-formed SVG
// with both panels, the levels, the axis titles and the verdicts, group names escaped and no
// "nan"; a report of no targets says so in both panels.
#include "calibration_svg.hpp"
#include "../../support/calibration_samples.hpp"

#include <causalqwen/eval/calibration.hpp>
#include <doctest/doctest.h>

#include <cstddef>
#include <sstream>
#include <string>
#include <vector>

namespace ce = causalqwen::eval;

namespace {

using cqtest::NumberSample;

std::size_t occurrences(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + what.size())) ++n;
  return n;
}

}  // namespace

TEST_CASE("the report as SVG shows both panels with the levels") {
  ce::GroupedCalibration grouped(7, 2.5);
  const std::vector<NumberSample> samples = cqtest::grouped_samples();
  cqtest::add_grouped_samples(grouped, samples);
  const auto report = grouped.report();

  std::ostringstream svg_stream;
  cqcli::write_calibration_svg(report, svg_stream);
  const std::string svg = svg_stream.str();
  CHECK(svg.rfind("<svg xmlns=\"http://www.w3.org/2000/svg\"", 0) == 0);
  CHECK(svg.ends_with("</svg>\n"));
  CHECK(occurrences(svg, "<svg") == 1);
  CHECK(occurrences(svg, "<g class=\"panel\"") == 2);
  CHECK(occurrences(svg, "<g ") == occurrences(svg, "</g>"));
  CHECK(occurrences(svg, "<text") == occurrences(svg, "</text>"));
  for (const char* level : {">0.5<", ">0.8<", ">0.9<", ">0.95<"}) CHECK(svg.find(level) != std::string::npos);
  CHECK(svg.find("nominal level p") != std::string::npos);
  CHECK(svg.find("empirical coverage") != std::string::npos);
  CHECK(svg.find("PIT histogram") != std::string::npos);
  CHECK(svg.find("uniform 1/10") != std::string::npos);
  CHECK(svg.find(std::string(ce::verdict_name(*report.overall.numbers.intervals[0].verdict))) != std::string::npos);
  CHECK(svg.find("a&lt;b &amp; &quot;c&quot;") != std::string::npos);  // the group name, escaped
  CHECK(svg.find("a<b") == std::string::npos);
  CHECK(svg.find("nan") == std::string::npos);
}

TEST_CASE("the SVG of a report of no targets says so") {
  ce::GroupedCalibration empty(7, 1.0);
  const auto report = empty.report();
  std::ostringstream svg;
  cqcli::write_calibration_svg(report, svg);
  CHECK(svg.str().find("no &lt;NUM&gt; targets") != std::string::npos);
  CHECK(svg.str().find("p = 0.95: no targets") != std::string::npos);
}
