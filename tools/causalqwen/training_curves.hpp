/// The training curves picture from the metrics log: three panels
///   1. loss parts: L_total, L_cls_mean, L_reg_eff (train solid, validation dashed), log scale
///   2. <NUM> accuracy and mean P(<NUM>) at <NUM> targets (train, validation)
///   3. regression MAE (train, validation) against the median baseline's MAE (passed in), log scale
#pragma once
#include "svg_plot.hpp"

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

namespace cqcli {

/// The series `key` of the records with "split" == split, against "step".
inline SvgSeries metric_series(const std::vector<nlohmann::json>& records, const std::string& split,
                               const std::string& key, std::string label, std::string color) {
  SvgSeries s;
  s.label = std::move(label);
  s.color = std::move(color);
  s.dashed = split != "train";
  for (const auto& r : records)
    if (r.value("split", "") == split && r.contains(key) && r[key].is_number()) {
      s.x.push_back(r["step"].get<double>());
      s.y.push_back(r[key].get<double>());
    }
  return s;
}

/// The three panels of the file comment; `baseline_mae` draws a reference line when given.
inline std::vector<SvgPanel> training_panels(const std::vector<nlohmann::json>& records,
                                             std::optional<double> baseline_mae) {
  std::vector<SvgPanel> panels(3);
  panels[0].title = "loss parts";
  panels[0].y_label = "loss";
  panels[0].log_y = true;
  panels[1].title = "<NUM> accuracy and P(<NUM>) at <NUM> targets";
  panels[1].y_label = "fraction";
  panels[2].title = "regression MAE at <NUM> targets";
  panels[2].y_label = "MAE";
  panels[2].log_y = true;
  for (const std::string split : {"train", "val"}) {
    const std::string tag = split == "train" ? " (train)" : " (val)";
    panels[0].series.push_back(metric_series(records, split, "L_total", "L_total" + tag, "#000000"));
    panels[0].series.push_back(metric_series(records, split, "L_cls_mean", "L_cls" + tag, "#1f77b4"));
    panels[0].series.push_back(metric_series(records, split, "L_reg_eff", "L_reg_eff" + tag, "#d62728"));
    panels[1].series.push_back(metric_series(records, split, "num_accuracy", "num acc" + tag, "#2ca02c"));
    panels[1].series.push_back(metric_series(records, split, "mean_P_num", "P(<NUM>)" + tag, "#9467bd"));
    panels[2].series.push_back(metric_series(records, split, "reg_mae", "reg MAE" + tag, "#d62728"));
  }
  for (auto& p : panels) std::erase_if(p.series, [](const SvgSeries& s) { return s.x.empty(); });
  if (baseline_mae) panels[2].references.push_back({"median baseline", "#555555", *baseline_mae});
  return panels;
}

}  // namespace cqcli
