/// Writing a file atomically: the bytes go to a temporary file in the destination's directory,
/// which is flushed to disk (fsync), renamed over the destination, and the directory is synced.
/// Readers see the old file or the complete new one, never a part; a failure (an exception
/// while writing, a full disk) leaves the destination untouched and removes the temporary.
#pragma once
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

namespace causalqwen::format {

/// A temporary file that becomes `destination` on `commit()`. Destroyed without a commit, it
/// removes the temporary. I/O failures throw std::system_error naming the file.
class AtomicFile {
 public:
  /// Creates the temporary `<dir>/.<name>.tmp-<pid>-<n>` beside `destination`.
  explicit AtomicFile(std::filesystem::path destination)
      : destination_(std::move(destination)) {
    static std::atomic<unsigned> counter{0};
    if (destination_.filename().empty())
      throw std::system_error(std::make_error_code(std::errc::is_a_directory),
                              destination_.string() + ": not a file name");
    temporary_ = destination_;
    temporary_.replace_filename(fmt::format(".{}.tmp-{}-{}", destination_.filename().string(),
                                            ::getpid(), counter.fetch_add(1)));
    fd_ = ::open(temporary_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd_ < 0) fail("cannot create temporary file", temporary_);
    buffer_.reserve(buffer_capacity);
  }
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;
  ~AtomicFile() {
    if (fd_ >= 0) ::close(fd_);
    if (!committed_) ::unlink(temporary_.c_str());
  }

  /// Appends bytes (buffered).
  void write(std::span<const std::byte> bytes) {
    if (buffer_.size() + bytes.size() > buffer_capacity) flush_buffer();
    if (bytes.size() >= buffer_capacity) {
      write_fully(bytes);
    } else {
      buffer_.insert(buffer_.end(), bytes.begin(), bytes.end());
    }
  }
  void write(std::string_view text) { write(std::as_bytes(std::span(text.data(), text.size()))); }

  /// Flushes, fsyncs and closes the temporary, renames it over the destination, and fsyncs the
  /// destination's directory.
  void commit() {
    flush_buffer();
    if (::fsync(fd_) != 0) fail("cannot sync", temporary_);
    const int fd = std::exchange(fd_, -1);
    if (::close(fd) != 0) fail("cannot close", temporary_);
    if (::rename(temporary_.c_str(), destination_.c_str()) != 0)
      fail("cannot rename the temporary file over", destination_);
    committed_ = true;
    std::filesystem::path dir = destination_.parent_path();
    if (dir.empty()) dir = ".";
    const int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir_fd >= 0) {  // best effort: some file systems refuse to sync directories
      ::fsync(dir_fd);
      ::close(dir_fd);
    }
  }

  const std::filesystem::path& destination() const { return destination_; }
  const std::filesystem::path& temporary_path() const { return temporary_; }

 private:
  static constexpr std::size_t buffer_capacity = std::size_t{1} << 20;

  [[noreturn]] static void fail(const char* what, const std::filesystem::path& path) {
    throw std::system_error(errno, std::generic_category(), path.string() + ": " + what);
  }

  void flush_buffer() {
    write_fully(buffer_);
    buffer_.clear();
  }

  void write_fully(std::span<const std::byte> bytes) {
    while (!bytes.empty()) {
      const ssize_t n = ::write(fd_, bytes.data(), bytes.size());
      if (n < 0) {
        if (errno == EINTR) continue;
        fail("cannot write", temporary_);
      }
      bytes = bytes.subspan(static_cast<std::size_t>(n));
    }
  }

  std::filesystem::path destination_;
  std::filesystem::path temporary_;
  int fd_ = -1;
  bool committed_ = false;
  std::vector<std::byte> buffer_;
};

/// Writes `destination` atomically: `body(AtomicFile&)` writes the bytes, then the file is
/// committed. If `body` throws, the destination is untouched and the exception propagates.
template <class Body>
void write_file_atomically(const std::filesystem::path& destination, Body&& body) {
  AtomicFile file(destination);
  std::forward<Body>(body)(file);
  file.commit();
}

}  // namespace causalqwen::format
