/// A small SVG line-chart writer: panels stacked vertically, each with its own y axis (linear or
/// log10), series as polylines with a legend, and optional horizontal reference lines (e.g. the
/// median baseline's MAE). Non-finite points (and ≤ 0 on a log axis) are left out.
#pragma once
#include <causalqwen/format/atomic_file.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

namespace cqcli {

struct SvgSeries {
  std::string label, color = "#1f77b4";
  std::vector<double> x, y;
  bool dashed = false;
};

struct SvgReference {
  std::string label, color = "#555555";
  double y = 0;
};

struct SvgPanel {
  std::string title, y_label;
  bool log_y = false;
  std::vector<SvgSeries> series;
  std::vector<SvgReference> references;
};

namespace detail_svg {
inline std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '<') out += "&lt;";
    else if (c == '>') out += "&gt;";
    else if (c == '&') out += "&amp;";
    else out += c;
  }
  return out;
}
inline std::string tick(double v) { return fmt::format("{:.3g}", v); }
}  // namespace detail_svg

/// The panels as one SVG document `width` pixels wide, 260 pixels per panel, x label `x_label`.
inline std::string render_svg(const std::vector<SvgPanel>& panels, const std::string& title,
                              const std::string& x_label = "step", int width = 820) {
  using detail_svg::escape;
  constexpr int panel_h = 260, top = 40, left = 80, right = 190, pad = 40;
  const int height = top + static_cast<int>(panels.size()) * panel_h + 10;
  const int plot_w = width - left - right, plot_h = panel_h - pad - 30;
  std::string s = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" font-family=\"sans-serif\" "
      "font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      "<text x=\"{}\" y=\"24\" font-size=\"16\" text-anchor=\"middle\">{}</text>\n",
      width, height, width / 2, escape(title));
  for (std::size_t p = 0; p < panels.size(); ++p) {
    const auto& panel = panels[p];
    const int y0 = top + static_cast<int>(p) * panel_h + 20;  // top of the plot area
    auto usable = [&](double v) { return std::isfinite(v) && (!panel.log_y || v > 0); };
    auto ty = [&](double v) { return panel.log_y ? std::log10(v) : v; };
    double xmin = std::numeric_limits<double>::infinity(), xmax = -xmin, ymin = xmin, ymax = -xmin;
    for (const auto& sr : panel.series)
      for (std::size_t i = 0; i < std::min(sr.x.size(), sr.y.size()); ++i)
        if (std::isfinite(sr.x[i]) && usable(sr.y[i])) {
          xmin = std::min(xmin, sr.x[i]), xmax = std::max(xmax, sr.x[i]);
          ymin = std::min(ymin, ty(sr.y[i])), ymax = std::max(ymax, ty(sr.y[i]));
        }
    for (const auto& r : panel.references)
      if (usable(r.y)) ymin = std::min(ymin, ty(r.y)), ymax = std::max(ymax, ty(r.y));
    if (!(xmin <= xmax)) xmin = 0, xmax = 1;
    if (!(ymin <= ymax)) ymin = 0, ymax = 1;
    if (xmax == xmin) xmax = xmin + 1;
    if (ymax == ymin) ymin -= 0.5, ymax += 0.5;
    const double margin = 0.05 * (ymax - ymin);
    ymin -= margin, ymax += margin;
    auto px = [&](double x) { return left + (x - xmin) / (xmax - xmin) * plot_w; };
    auto py = [&](double y) { return y0 + plot_h - (ty(y) - ymin) / (ymax - ymin) * plot_h; };
    s += fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"13\" font-weight=\"bold\">{}</text>\n", left, y0 - 6,
                     escape(panel.title));
    s += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#999\"/>\n", left,
                     y0, plot_w, plot_h);
    for (int k = 0; k <= 4; ++k) {  // y ticks
      const double t = ymin + (ymax - ymin) * k / 4.0;
      const double yy = y0 + plot_h - plot_h * k / 4.0;
      const double label = panel.log_y ? std::pow(10.0, t) : t;
      s += fmt::format("<line x1=\"{}\" y1=\"{:.1f}\" x2=\"{}\" y2=\"{:.1f}\" stroke=\"#eee\"/>"
                       "<text x=\"{}\" y=\"{:.1f}\" text-anchor=\"end\">{}</text>\n",
                       left, yy, left + plot_w, yy, left - 4, yy + 4, detail_svg::tick(label));
    }
    for (int k = 0; k <= 4; ++k) {  // x ticks
      const double t = xmin + (xmax - xmin) * k / 4.0;
      s += fmt::format("<text x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n", px(t), y0 + plot_h + 14,
                       detail_svg::tick(t));
    }
    s += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n", left + plot_w / 2,
                     y0 + plot_h + 28, escape(x_label));
    s += fmt::format("<text x=\"16\" y=\"{}\" transform=\"rotate(-90 16 {})\" text-anchor=\"middle\">{}</text>\n",
                     y0 + plot_h / 2, y0 + plot_h / 2, escape(panel.y_label + (panel.log_y ? " (log)" : "")));
    int legend_y = y0 + 10;
    for (const auto& r : panel.references) {
      if (!usable(r.y)) continue;
      s += fmt::format("<line x1=\"{}\" y1=\"{:.1f}\" x2=\"{}\" y2=\"{:.1f}\" stroke=\"{}\" stroke-dasharray=\"2 3\"/>\n",
                       left, py(r.y), left + plot_w, py(r.y), r.color);
      s += fmt::format("<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"{}\" stroke-dasharray=\"2 3\"/>"
                       "<text x=\"{}\" y=\"{}\">{}</text>\n",
                       left + plot_w + 10, legend_y, left + plot_w + 30, legend_y, r.color, left + plot_w + 34,
                       legend_y + 4, escape(r.label));
      legend_y += 16;
    }
    for (const auto& sr : panel.series) {
      std::string points;
      for (std::size_t i = 0; i < std::min(sr.x.size(), sr.y.size()); ++i)
        if (std::isfinite(sr.x[i]) && usable(sr.y[i])) points += fmt::format("{:.1f},{:.1f} ", px(sr.x[i]), py(sr.y[i]));
      const char* dash = sr.dashed ? " stroke-dasharray=\"6 3\"" : "";
      s += fmt::format("<polyline fill=\"none\" stroke=\"{}\" stroke-width=\"1.5\"{} points=\"{}\"/>\n", sr.color,
                       dash, points);
      s += fmt::format("<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"{}\" stroke-width=\"2\"{}/>"
                       "<text x=\"{}\" y=\"{}\">{}</text>\n",
                       left + plot_w + 10, legend_y, left + plot_w + 30, legend_y, sr.color, dash,
                       left + plot_w + 34, legend_y + 4, escape(sr.label));
      legend_y += 16;
    }
  }
  s += "</svg>\n";
  return s;
}

/// Writes render_svg(…) to `path` atomically.
inline void write_svg(const std::filesystem::path& path, const std::vector<SvgPanel>& panels,
                      const std::string& title, const std::string& x_label = "step") {
  const std::string body = render_svg(panels, title, x_label);
  causalqwen::format::write_file_atomically(path, [&](causalqwen::format::AtomicFile& f) { f.write(body); });
}

}  // namespace cqcli
