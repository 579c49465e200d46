/// A whole file's bytes, read-only: memory-mapped when the system allows it, otherwise read into
/// memory. Checkpoint tensors are converted straight out of the mapping into arenas, so a large
/// checkpoint is never copied whole.
#pragma once
#include "causalqwen/core/error.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <utility>

namespace causalqwen::format {

/// How `MappedFile::open` gets the bytes: `automatic` maps and falls back to reading when
/// mapping fails (special files, file systems without mmap); `read` always reads.
enum class LoadMode { automatic, read };

class MappedFile {
 public:
  MappedFile() = default;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  MappedFile(MappedFile&& other) noexcept { *this = std::move(other); }
  MappedFile& operator=(MappedFile&& other) noexcept {
    if (this != &other) {
      release();
      path_ = std::move(other.path_);
      mapping_ = std::exchange(other.mapping_, nullptr);
      buffer_ = std::move(other.buffer_);
      size_ = std::exchange(other.size_, 0);
    }
    return *this;
  }
  ~MappedFile() { release(); }

  /// Opens `path` read-only. Throws FormatError("<path>: cannot open: <reason>") when the file
  /// cannot be opened, is a directory, or cannot be read.
  static MappedFile open(const std::filesystem::path& path, LoadMode mode = LoadMode::automatic) {
    MappedFile file;
    file.path_ = path;
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) file.fail("cannot open", errno);
    struct Closer {
      int fd;
      ~Closer() { ::close(fd); }
    } closer{fd};
    struct stat st {};
    if (::fstat(fd, &st) != 0) file.fail("cannot stat", errno);
    if (S_ISDIR(st.st_mode)) file.fail("cannot open", EISDIR);
    file.size_ = static_cast<std::size_t>(st.st_size);
    if (mode == LoadMode::automatic && file.size_ > 0 && S_ISREG(st.st_mode)) {
      void* p = ::mmap(nullptr, file.size_, PROT_READ, MAP_PRIVATE, fd, 0);
      if (p != MAP_FAILED) {
        file.mapping_ = p;
        return file;
      }
    }
    file.read_all(fd);
    return file;
  }

  /// The file's bytes (valid while this object lives).
  std::span<const std::byte> bytes() const {
    if (mapping_) return {static_cast<const std::byte*>(mapping_), size_};
    return {buffer_.get(), size_};
  }
  std::size_t size() const { return size_; }
  const std::filesystem::path& path() const { return path_; }
  /// True when the bytes are a memory mapping rather than a copy.
  bool is_mapped() const { return mapping_ != nullptr; }

 private:
  [[noreturn]] void fail(const char* what, int error) const {
    throw FormatError(path_.string() + ": " + what + ": " + std::strerror(error));
  }

  // Reads to the end (also for files whose stat size is 0 or wrong, such as pipes).
  void read_all(int fd) {
    std::size_t capacity = size_ > 0 ? size_ : 4096, used = 0;
    buffer_ = std::make_unique<std::byte[]>(capacity);
    for (;;) {
      if (used == capacity) {
        auto bigger = std::make_unique<std::byte[]>(capacity * 2);
        std::memcpy(bigger.get(), buffer_.get(), used);
        buffer_ = std::move(bigger);
        capacity *= 2;
      }
      const ssize_t got = ::read(fd, buffer_.get() + used, capacity - used);
      if (got < 0) {
        if (errno == EINTR) continue;
        fail("cannot read", errno);
      }
      if (got == 0) break;
      used += static_cast<std::size_t>(got);
    }
    size_ = used;
  }

  void release() noexcept {
    if (mapping_) ::munmap(mapping_, size_);
    mapping_ = nullptr;
  }

  std::filesystem::path path_;
  void* mapping_ = nullptr;
  std::unique_ptr<std::byte[]> buffer_;
  std::size_t size_ = 0;
};

}  // namespace causalqwen::format
