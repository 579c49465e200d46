/// A progress display for training (and any other long loop). On a terminal: one line redrawn in place,
///   [########------------]  120/400 loss 2.3411 acc 0.612 reg MAE 1.83 5,210 tok/s ETA 0:41
/// Elsewhere (a pipe, a file, CI logs): the same fields as plain lines, about 20 per run.
#pragma once
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <utility>

namespace cqcli {

/// "m:ss" or "h:mm:ss".
inline std::string format_duration(double seconds) {
  if (!(seconds >= 0) || seconds > 1e7) return "?";
  const auto s = static_cast<long>(seconds + 0.5);
  if (s >= 3600) return fmt::format("{}:{:02}:{:02}", s / 3600, (s / 60) % 60, s % 60);
  return fmt::format("{}:{:02}", s / 60, s % 60);
}

class Progress {
 public:
  enum class Style { automatic, bar, lines, off };

  /// Shows steps (first, total] on `out`; Style::automatic picks the bar when `out` is a terminal.
  Progress(std::size_t total, std::size_t first = 0, std::FILE* out = stdout, Style style = Style::automatic)
      : total_(total), first_(first), out_(out), start_(clock::now()) {
    if (style == Style::automatic) style = ::isatty(::fileno(out)) ? Style::bar : Style::lines;
    style_ = style;
    every_ = std::max<std::size_t>(1, total / 20);
  }

  /// Reports that `step` (1-based) is done, with its loss, accuracy, reg MAE and tokens/s.
  void update(std::size_t step, double loss, double accuracy, double reg_mae, double tokens_per_s) {
    show(step, fmt::format("loss {:.4f} acc {:.3f} reg MAE {:.4g} {:.0f} tok/s", loss, accuracy, reg_mae, tokens_per_s));
  }

  /// Reports that `step` (1-based) is done: "step/total <details> ETA m:ss".
  void show(std::size_t step, const std::string& details) {
    if (style_ == Style::off) return;
    const double elapsed = std::chrono::duration<double>(clock::now() - start_).count();
    const double done = static_cast<double>(step - first_);
    const double eta = done > 0 ? elapsed / done * static_cast<double>(total_ - step) : -1;
    const std::string fields = fmt::format("{:>{}}/{} {} ETA {}", step, digits(total_), total_, details, format_duration(eta));
    if (style_ == Style::bar) {
      constexpr std::size_t width = 24;
      const std::size_t filled = total_ ? width * step / total_ : width;
      fmt::print(out_, "\r[{}{}] {}\x1b[K", std::string(filled, '#'), std::string(width - filled, '-'), fields);
      drawn_ = true;
    } else if (step % every_ == 0 || step == total_ || step == first_ + 1) {
      fmt::print(out_, "{} {}\n", label_, fields);
    }
    std::fflush(out_);
  }

  /// The word before each plain line ("step" by default).
  void set_label(std::string label) { label_ = std::move(label); }

  /// Prints a line of its own (e.g. a validation result) without garbling the bar.
  void message(const std::string& text) {
    if (style_ == Style::off) return;
    if (drawn_) fmt::print(out_, "\r\x1b[K");
    fmt::print(out_, "{}\n", text);
    drawn_ = false;
    std::fflush(out_);
  }

  /// Ends the bar's line.
  void finish() {
    if (drawn_) fmt::print(out_, "\n");
    drawn_ = false;
    std::fflush(out_);
  }

 private:
  using clock = std::chrono::steady_clock;
  static int digits(std::size_t n) { return static_cast<int>(fmt::format("{}", n).size()); }
  std::size_t total_, first_, every_ = 1;
  std::FILE* out_;
  clock::time_point start_;
  Style style_ = Style::lines;
  bool drawn_ = false;
  std::string label_ = "step";
};

}  // namespace cqcli
