/// Lines of a file or of standard input, read with the two checks std::getline lacks: a read
/// error (EIO, a directory, …) is a FormatError naming the stream, never taken for the end of
/// the input, and a line longer than a limit (64 MiB by default; /dev/zero is one endless line)
/// is a FormatError naming the stream and the line number, found before more than the limit is
/// buffered.
///
///   LineReader in(path);
///   for (std::string line; in.next(line);) use(line, in.line_number());
#pragma once
#include "causalqwen/core/error.hpp"

#include <fmt/format.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>

namespace causalqwen {

/// The longest line a reader accepts unless told otherwise: 64 MiB.
inline constexpr std::size_t default_max_line_bytes = std::size_t{64} << 20;

class LineReader {
 public:
  /// Opens `path`; FormatError "<path>: cannot open the <what>: <reason>" when it cannot.
  explicit LineReader(const std::filesystem::path& path, std::size_t max_line_bytes = default_max_line_bytes,
                      const std::string& what = "file")
      : name_(path.string()), max_(max_line_bytes) {
    file_ = std::fopen(name_.c_str(), "rb");
    if (!file_) throw FormatError(fmt::format("{}: cannot open the {}: {}", name_, what, std::strerror(errno)));
    owned_ = true;
  }
  /// Reads `stream` (not closed here, e.g. stdin), called `name` in messages.
  LineReader(std::FILE* stream, std::string name, std::size_t max_line_bytes = default_max_line_bytes)
      : file_(stream), name_(std::move(name)), max_(max_line_bytes) {}
  LineReader(const LineReader&) = delete;
  LineReader& operator=(const LineReader&) = delete;
  ~LineReader() {
    if (owned_ && file_) std::fclose(file_);
  }

  /// The next line into `line`, without its '\n' and a '\r' before it; false at the end of the
  /// input. FormatError on a read error or a line longer than the limit.
  bool next(std::string& line) {
    line.clear();
    bool any = false;
    for (;;) {
      if (pos_ == end_ && !fill()) break;
      any = true;
      const char* begin = buffer_ + pos_;
      const auto* newline = static_cast<const char*>(std::memchr(begin, '\n', end_ - pos_));
      const std::size_t take = newline ? std::size_t(newline - begin) : end_ - pos_;
      if (line.size() + take > max_) too_long();
      line.append(begin, take);
      pos_ += take;
      if (newline) {
        ++pos_;
        break;
      }
    }
    if (!any) return false;
    ++number_;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    return true;
  }

  /// The 1-based number of the line next() returned last (0 before the first).
  std::size_t line_number() const { return number_; }
  const std::string& name() const { return name_; }
  std::size_t max_line_bytes() const { return max_; }

 private:
  /// Refills the buffer; false at the end of the input, FormatError on a read error.
  bool fill() {
    pos_ = 0;
    end_ = std::fread(buffer_, 1, sizeof buffer_, file_);
    if (end_ > 0) return true;
    if (std::ferror(file_))
      throw FormatError(fmt::format("{}: read error after line {}: {}", name_, number_, std::strerror(errno)));
    return false;
  }

  [[noreturn]] void too_long() const {
    const auto limit = max_ % (std::size_t{1} << 20) == 0 ? fmt::format("{} MiB", max_ >> 20) : fmt::format("{} bytes", max_);
    throw FormatError(fmt::format("{}:{}: the line is longer than {}, the limit of a line", name_, number_ + 1, limit));
  }

  std::FILE* file_ = nullptr;
  bool owned_ = false;
  std::string name_;
  std::size_t max_;
  std::size_t number_ = 0;
  char buffer_[1 << 16];
  std::size_t pos_ = 0, end_ = 0;
};

}  // namespace causalqwen
