/// The causalqwen program's picture of a calibration report (eval/calibration.hpp), drawn by
/// `eval --plot`: plain SVG text, no script, two panels side by side,
///   left   the empirical coverage of the central intervals loc ± scale·tan(π·p/2) against the
///          nominal level p, with the diagonal coverage = p and, at each level, the band
///          p ± 2·√(p(1 − p)/n) inside which the verdict is "calibrated"; the overall points
///          carry their value, and each group (up to six) is drawn as a line of its own colour;
///   right  the histogram of the PIT u = F_Y(y) over 10 equal bins as fractions of the targets,
///          with the line 1/10 that a calibrated model's histogram scatters around;
/// and under them one line per level with the coverage and its verdict.
#pragma once
#include <causalqwen/eval/calibration.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

namespace cqcli {

namespace detail_calibration_svg {

using namespace causalqwen::eval;  // the report's types and levels

inline constexpr double panel_width = 460, panel_height = 380, verdict_line_height = 18;
inline constexpr std::array<const char*, 6> group_colours{"#d95f02", "#1b9e77", "#7570b3", "#e7298a", "#66a61e", "#a6761d"};
inline constexpr const char* overall_colour = "#1f4e9c";
inline constexpr const char* bar_colour = "#9dbbe3";

/// `text` with &, <, >, " and ' written as XML entities.
inline std::string xml_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default: out += c;
    }
  }
  return out;
}

/// The plot area of a panel, in pixels, and the data ranges it shows:
/// pixel_x(v) = left + width·(v − x_min)/(x_max − x_min), pixel_y likewise from the bottom.
struct PlotArea {
  double left = 0, top = 0, width = 0, height = 0;
  double x_min = 0, x_max = 1, y_min = 0, y_max = 1;

  double pixel_x(double v) const { return left + width * (v - x_min) / (x_max - x_min); }
  double pixel_y(double v) const { return top + height * (1 - (v - y_min) / (y_max - y_min)); }
  double bottom() const { return top + height; }
  double right() const { return left + width; }
};

/// One tick: its position on the axis and its label.
struct Tick {
  double value;
  std::string label;
};

/// A number with at most `digits` significant digits, as a person writes it (0.95, 0.8, 12.5).
inline std::string short_number(double value, int digits = 3) { return fmt::format("{:.{}g}", value, digits); }

/// The frame of a panel: the box, ticks with their labels and grid lines, the axis labels and
/// the title above the box.
inline void write_frame(std::ostream& out, const PlotArea& a, const std::vector<Tick>& x_ticks,
                        const std::vector<Tick>& y_ticks, std::string_view x_label, std::string_view y_label,
                        std::string_view title) {
  out << fmt::format(R"(<rect x="{:.1f}" y="{:.1f}" width="{:.1f}" height="{:.1f}" fill="white" stroke="#444"/>)",
                     a.left, a.top, a.width, a.height)
      << '\n';
  for (const auto& t : x_ticks) {
    const double x = a.pixel_x(t.value);
    out << fmt::format(R"(<line x1="{0:.1f}" y1="{1:.1f}" x2="{0:.1f}" y2="{2:.1f}" stroke="#ddd"/>)", x, a.top, a.bottom())
        << '\n'
        << fmt::format(R"(<text x="{:.1f}" y="{:.1f}" text-anchor="middle">{}</text>)", x, a.bottom() + 16,
                       xml_escape(t.label))
        << '\n';
  }
  for (const auto& t : y_ticks) {
    const double y = a.pixel_y(t.value);
    out << fmt::format(R"(<line x1="{0:.1f}" y1="{2:.1f}" x2="{1:.1f}" y2="{2:.1f}" stroke="#ddd"/>)", a.left, a.right(), y)
        << '\n'
        << fmt::format(R"(<text x="{:.1f}" y="{:.1f}" text-anchor="end">{}</text>)", a.left - 6, y + 4,
                       xml_escape(t.label))
        << '\n';
  }
  out << fmt::format(R"(<text x="{:.1f}" y="{:.1f}" text-anchor="middle">{}</text>)", a.left + a.width / 2,
                     a.bottom() + 38, xml_escape(x_label))
      << '\n'
      << fmt::format(R"svg(<text x="{0:.1f}" y="{1:.1f}" text-anchor="middle" transform="rotate(-90 {0:.1f} {1:.1f})">{2}</text>)svg",
                     a.left - 44, a.top + a.height / 2, xml_escape(y_label))
      << '\n'
      << fmt::format(R"(<text x="{:.1f}" y="{:.1f}" text-anchor="middle" font-weight="bold">{}</text>)",
                     a.left + a.width / 2, a.top - 14, xml_escape(title))
      << '\n';
}

/// A "no <NUM> targets" note in the middle of the plot area.
inline void write_no_targets(std::ostream& out, const PlotArea& a) {
  out << fmt::format(R"(<text x="{:.1f}" y="{:.1f}" text-anchor="middle" fill="#888">no &lt;NUM&gt; targets</text>)",
                     a.left + a.width / 2, a.top + a.height / 2)
      << '\n';
}

/// The points (p, coverage_p) of one set of targets joined by a line; with `labelled`, each
/// point carries its coverage.
inline void write_coverage_series(std::ostream& out, const PlotArea& a, const NumberCalibrationReport& numbers,
                                  const char* colour, double line_width, bool labelled) {
  if (numbers.numbers == 0) return;
  std::string points;
  for (const auto& c : numbers.intervals)
    points += fmt::format("{:.1f},{:.1f} ", a.pixel_x(c.nominal), a.pixel_y(*c.coverage));
  out << fmt::format(R"(<polyline points="{}" fill="none" stroke="{}" stroke-width="{}"/>)", points, colour, line_width)
      << '\n';
  for (const auto& c : numbers.intervals) {
    const double x = a.pixel_x(c.nominal), y = a.pixel_y(*c.coverage);
    out << fmt::format(R"(<circle cx="{:.1f}" cy="{:.1f}" r="{}" fill="{}"/>)", x, y, line_width + 1.5, colour) << '\n';
    if (labelled)
      out << fmt::format(R"(<text x="{:.1f}" y="{:.1f}" fill="{}" font-size="11">{}</text>)", x + 6, y + 14, colour,
                         fmt::format("{:.3f}", *c.coverage))
          << '\n';
  }
}

/// The left panel (see the file comment).
inline void write_coverage_panel(std::ostream& out, const CalibrationReport& report) {
  const auto& numbers = report.overall.numbers;
  // x from 0.3: the strip left of the lowest level holds no point, and the legend sits there
  const PlotArea a{70, 50, panel_width - 100, panel_height - 110, 0.3, 1.0, 0.0, 1.0};
  std::vector<Tick> x_ticks, y_ticks;
  for (double p : coverage_levels) x_ticks.push_back({p, short_number(p)});
  for (int i = 0; i <= 5; ++i) y_ticks.push_back({0.2 * i, short_number(0.2 * i)});
  out << R"(<g class="panel" id="coverage">)" << '\n';
  write_frame(out, a, x_ticks, y_ticks, "nominal level p", "empirical coverage",
              fmt::format("Interval coverage (n = {})", numbers.numbers));
  out << fmt::format(R"(<line x1="{:.1f}" y1="{:.1f}" x2="{:.1f}" y2="{:.1f}" stroke="#888" stroke-dasharray="5,4"/>)",
                     a.pixel_x(a.x_min), a.pixel_y(a.x_min), a.pixel_x(a.x_max), a.pixel_y(a.x_max))
      << '\n';
  if (numbers.numbers == 0) {
    write_no_targets(out, a);
    out << "</g>\n";
    return;
  }
  for (const auto& c : numbers.intervals) {  // the band of the "calibrated" verdict, p ± 2·se
    const double x = a.pixel_x(c.nominal);
    const double low = std::max(a.y_min, c.nominal - 2 * *c.standard_error);
    const double high = std::min(a.y_max, c.nominal + 2 * *c.standard_error);
    out << fmt::format(R"(<rect x="{:.1f}" y="{:.1f}" width="8" height="{:.1f}" fill="#bbb" opacity="0.6"/>)", x - 4,
                       a.pixel_y(high), std::max(1.0, a.pixel_y(low) - a.pixel_y(high)))
        << '\n';
  }
  std::size_t drawn = 0;
  for (const auto& [name, statistics] : report.groups) {
    if (drawn == group_colours.size()) break;
    write_coverage_series(out, a, statistics.numbers, group_colours[drawn], 1.0, false);
    ++drawn;
  }
  write_coverage_series(out, a, numbers, overall_colour, 2.0, true);
  // the legend, in the upper left corner
  double y = a.top + 16;
  auto legend = [&](const char* colour, const std::string& text) {
    out << fmt::format(R"(<rect x="{:.1f}" y="{:.1f}" width="12" height="3" fill="{}"/>)", a.left + 10, y - 5, colour)
        << fmt::format(R"(<text x="{:.1f}" y="{:.1f}" font-size="11">{}</text>)", a.left + 28, y, xml_escape(text)) << '\n';
    y += 14;
  };
  legend(overall_colour, "all targets");
  drawn = 0;
  for (const auto& [name, statistics] : report.groups) {
    if (drawn == group_colours.size()) {
      legend("#fff", fmt::format("(+{} groups not drawn)", report.groups.size() - drawn));
      break;
    }
    legend(group_colours[drawn], fmt::format("{} (n = {})", name, statistics.numbers.numbers));
    ++drawn;
  }
  out << "</g>\n";
}

/// The right panel (see the file comment).
inline void write_pit_panel(std::ostream& out, const CalibrationReport& report, double offset_x) {
  const auto& numbers = report.overall.numbers;
  const double n = static_cast<double>(numbers.numbers);
  double largest = 0;
  for (auto count : numbers.pit_counts) largest = std::max(largest, n > 0 ? static_cast<double>(count) / n : 0.0);
  const double y_max = std::max(0.2, std::ceil(largest * 1.1 * 20) / 20);  // a multiple of 0.05 above every bar
  const PlotArea a{offset_x + 70, 50, panel_width - 100, panel_height - 110, 0.0, 1.0, 0.0, y_max};
  std::vector<Tick> x_ticks, y_ticks;
  for (int i = 0; i <= 5; ++i) x_ticks.push_back({0.2 * i, short_number(0.2 * i)});
  const double y_step = y_max <= 0.3 ? 0.05 : 0.1;
  for (double v = 0; v <= y_max + 1e-9; v += y_step) y_ticks.push_back({v, short_number(v)});
  out << R"(<g class="panel" id="pit">)" << '\n';
  const std::string title = numbers.pit_chi_square
                                ? fmt::format("PIT histogram (chi-square {:.3g}, 9 d.o.f.)", *numbers.pit_chi_square)
                                : std::string("PIT histogram");
  write_frame(out, a, x_ticks, y_ticks, "PIT u = F_Y(y)", "fraction of targets", title);
  if (numbers.numbers == 0) {
    write_no_targets(out, a);
    out << "</g>\n";
    return;
  }
  const double bin_width = 1.0 / static_cast<double>(pit_bin_count);
  for (std::size_t b = 0; b < pit_bin_count; ++b) {
    const double fraction = static_cast<double>(numbers.pit_counts[b]) / n;
    const double x0 = a.pixel_x(static_cast<double>(b) * bin_width), x1 = a.pixel_x(static_cast<double>(b + 1) * bin_width);
    out << fmt::format(R"(<rect x="{:.1f}" y="{:.1f}" width="{:.1f}" height="{:.1f}" fill="{}" stroke="{}"/>)", x0,
                       a.pixel_y(fraction), x1 - x0, a.bottom() - a.pixel_y(fraction), bar_colour, overall_colour)
        << '\n';
  }
  const double uniform = a.pixel_y(bin_width);
  out << fmt::format(R"(<line x1="{0:.1f}" y1="{2:.1f}" x2="{1:.1f}" y2="{2:.1f}" stroke="#c00" stroke-width="1.5" stroke-dasharray="6,4"/>)",
                     a.left, a.right(), uniform)
      << '\n'
      << fmt::format(R"(<text x="{:.1f}" y="{:.1f}" text-anchor="end" fill="#c00" font-size="11">uniform 1/10</text>)",
                     a.right() - 4, uniform - 4)
      << '\n';
  out << "</g>\n";
}

}  // namespace detail_calibration_svg

/// Writes `report` as a stand-alone SVG picture to `out` (see the file comment).
inline void write_calibration_svg(const causalqwen::eval::CalibrationReport& report, std::ostream& out) {
  using namespace detail_calibration_svg;
  const auto& numbers = report.overall.numbers;
  const double width = 2 * panel_width;
  const double height = panel_height + verdict_line_height * static_cast<double>(coverage_levels.size()) + 10;
  out << fmt::format(R"(<svg xmlns="http://www.w3.org/2000/svg" width="{0}" height="{1}" viewBox="0 0 {0} {1}" )"
                     R"(font-family="sans-serif" font-size="12">)",
                     width, height)
      << '\n'
      << "<title>Calibration of the Cauchy predictions of numbers</title>\n"
      << fmt::format(R"(<rect width="{}" height="{}" fill="white"/>)", width, height) << '\n';
  write_coverage_panel(out, report);
  write_pit_panel(out, report, panel_width);
  out << R"(<g class="verdicts">)" << '\n';
  double y = panel_height;
  for (const auto& c : numbers.intervals) {
    const std::string line =
        c.coverage ? fmt::format("p = {0}: coverage {1:.3f} against {0} ± {2:.3f} (2 standard errors), median width {3:.4g}: {4}",
                                 short_number(c.nominal), *c.coverage, 2 * *c.standard_error, *c.median_width,
                                 verdict_name(*c.verdict))
                   : fmt::format("p = {}: no targets", short_number(c.nominal));
    out << fmt::format(R"(<text x="70" y="{:.1f}">{}</text>)", y, xml_escape(line)) << '\n';
    y += verdict_line_height;
  }
  out << "</g>\n</svg>\n";
}

}  // namespace cqcli
