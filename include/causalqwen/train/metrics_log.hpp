/// The training log: one JSON object per line (JSONL), written and flushed line by line.
///   {"split": "train", "step": s, "L_total": …, "L_cls_mean": …, "L_reg_eff": …, "reg_mae": …,
///    "units_mean_loc": …, "units_mean_scale": …, "ovr_prob_sum": …, "accuracy": …,
///    "num_accuracy": …, "mean_P_num": …, "valid_count": …, "num_count": …, "lr": …, "alpha": …, "lambda": …,
///    "grad_norm": …, "tokens": …, "tokens_per_s": …, "seconds": …}
///   {"split": "val", "step": s, the same metrics (no lr/grad_norm/timing)}
/// `step` counts optimiser updates (1 = after the first). Numbers are written with round-trip
/// precision, so equal lines mean bit-equal values.
#pragma once
#include "causalqwen/core/line_reader.hpp"
#include "causalqwen/format/atomic_file.hpp"
#include "causalqwen/model/causal_head.hpp"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <filesystem>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

namespace causalqwen::train {

/// The HeadMetrics fields as a JSON object (names as in the struct).
inline nlohmann::json metrics_json(const model::HeadMetrics& m) {
  return {{"L_total", m.L_total},         {"L_cls_mean", m.L_cls_mean},
          {"L_reg_eff", m.L_reg_eff},     {"reg_mae", m.reg_mae},
          {"units_mean_loc", m.units_mean_loc}, {"units_mean_scale", m.units_mean_scale},
          {"ovr_prob_sum", m.ovr_prob_sum}, {"accuracy", m.accuracy},
          {"num_accuracy", m.num_accuracy}, {"mean_P_num", m.mean_P_num},
          {"valid_count", m.valid_count}, {"num_count", m.num_count}};
}

/// Reads a JSONL metrics file through the line reader; a line that does not parse (e.g. the
/// half-written last line of a killed run) is skipped. A missing file gives an empty list; a
/// file that cannot be opened or read, or a line longer than 64 MiB, is a FormatError naming the
/// file (and the line).
inline std::vector<nlohmann::json> read_metrics(const std::filesystem::path& path) {
  std::vector<nlohmann::json> out;
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return out;
  LineReader in(path, default_max_line_bytes, "metrics file");
  std::string line;
  while (in.next(line)) {
    if (line.empty()) continue;
    auto j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_object()) out.push_back(std::move(j));
  }
  return out;
}

/// Rewrites `path` atomically keeping only the complete lines whose "step" ≤ last_step (what a
/// resumed run from the checkpoint at last_step must continue from).
inline void truncate_metrics(const std::filesystem::path& path, std::uint64_t last_step) {
  if (!std::filesystem::exists(path)) return;
  const auto records = read_metrics(path);
  format::write_file_atomically(path, [&](format::AtomicFile& f) {
    for (const auto& r : records)
      if (r.contains("step") && r["step"].is_number_unsigned() && r["step"].get<std::uint64_t>() <= last_step)
        f.write(r.dump() + "\n");
  });
}

/// An append-only JSONL writer; each line is flushed to the OS as soon as it is written.
class MetricsLog {
 public:
  MetricsLog() = default;
  /// Opens `path` for appending (append = false truncates it first). Creates the parent directory.
  explicit MetricsLog(const std::filesystem::path& path, bool append = true) {
    if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path());
    file_ = std::fopen(path.c_str(), append ? "a" : "w");
    if (!file_) throw std::system_error(errno, std::generic_category(), path.string() + ": cannot open");
  }
  MetricsLog(const MetricsLog&) = delete;
  MetricsLog& operator=(const MetricsLog&) = delete;
  MetricsLog(MetricsLog&& o) noexcept : file_(std::exchange(o.file_, nullptr)) {}
  MetricsLog& operator=(MetricsLog&& o) noexcept {
    if (this != &o) {
      if (file_) std::fclose(file_);
      file_ = std::exchange(o.file_, nullptr);
    }
    return *this;
  }
  ~MetricsLog() {
    if (file_) std::fclose(file_);
  }
  bool is_open() const { return file_ != nullptr; }

  /// Appends one record as one line.
  void write(const nlohmann::json& record) {
    if (!file_) return;
    const std::string line = record.dump() + "\n";
    std::fwrite(line.data(), 1, line.size(), file_);
    std::fflush(file_);
  }

 private:
  std::FILE* file_ = nullptr;
};

}  // namespace causalqwen::train
