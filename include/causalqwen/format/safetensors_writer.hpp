/// Writing `.safetensors` files, laid out as the Python `safetensors` library lays them out:
/// tensors ordered by descending dtype (so every tensor is aligned to its element size), then by
/// name; a compact JSON header with `__metadata__` first, padded with spaces to a multiple of 8
/// bytes; and written atomically (temporary file, fsync, rename, directory fsync).
#pragma once
#include "causalqwen/core/error.hpp"
#include "causalqwen/format/atomic_file.hpp"
#include "causalqwen/format/dtype.hpp"
#include "causalqwen/format/half.hpp"
#include "causalqwen/format/safetensors.hpp"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <functional>
#include <limits>
#include <map>
#include <set>
#include <span>
#include <string>
#include <vector>

namespace causalqwen::format {

/// Collects tensors and metadata, then writes them as one safetensors file. The writer keeps
/// only views of the data given to `add`: the data must stay alive and unchanged until `write`.
class SafetensorsWriter {
 public:
  /// Fills `out` with the stored bytes of elements [first, first + out.size()/dtype size).
  using Producer = std::function<void(std::size_t first_element, std::span<std::byte> out)>;

  /// Adds float data stored as F32 (default), F64, BF16 or F16 (rounded to nearest even).
  /// DomainError for a duplicate or reserved name, another stored dtype, or a data size that
  /// is not the product of the shape.
  SafetensorsWriter& add(std::string name, std::vector<std::size_t> shape,
                         std::span<const float> data, Dtype stored = Dtype::F32) {
    require(is_floating(stored), "SafetensorsWriter::add",
                    "tensor '{}': float data can be stored as F32, F64, BF16 or F16, not {}",
                    name, dtype_name(stored));
    require_size(name, shape, data.size());
    return add_produced(std::move(name), stored, std::move(shape),
                        [data, stored](std::size_t first, std::span<std::byte> out) {
                          encode_floats(data.subspan(first), stored, out);
                        });
  }

  /// Adds double data stored as F64 (default) or F32 (rounded to nearest).
  SafetensorsWriter& add(std::string name, std::vector<std::size_t> shape,
                         std::span<const double> data, Dtype stored = Dtype::F64) {
    require(stored == Dtype::F64 || stored == Dtype::F32, "SafetensorsWriter::add",
                    "tensor '{}': double data can be stored as F64 or F32, not {}", name,
                    dtype_name(stored));
    require_size(name, shape, data.size());
    return add_produced(std::move(name), stored, std::move(shape),
                        [data, stored](std::size_t first, std::span<std::byte> out) {
                          encode_floats(data.subspan(first), stored, out);
                        });
  }

  /// Adds int64 data stored as I64 (default) or I32 (every value must fit: DomainError).
  SafetensorsWriter& add(std::string name, std::vector<std::size_t> shape,
                         std::span<const std::int64_t> data, Dtype stored = Dtype::I64) {
    require(stored == Dtype::I64 || stored == Dtype::I32, "SafetensorsWriter::add",
                    "tensor '{}': int64 data can be stored as I64 or I32, not {}", name,
                    dtype_name(stored));
    require_size(name, shape, data.size());
    if (stored == Dtype::I32) {
      auto outside = std::find_if(data.begin(), data.end(), [](std::int64_t v) {
        return v < std::numeric_limits<std::int32_t>::min() ||
               v > std::numeric_limits<std::int32_t>::max();
      });
      require(outside == data.end(), "SafetensorsWriter::add",
                      "tensor '{}': value {} does not fit I32", name,
                      outside == data.end() ? 0 : *outside);
    }
    return add_produced(std::move(name), stored, std::move(shape),
                        [data, stored](std::size_t first, std::span<std::byte> out) {
                          const std::size_t n = out.size() / dtype_size(stored);
                          if (stored == Dtype::I64) {
                            std::memcpy(out.data(), data.data() + first, out.size());
                            return;
                          }
                          for (std::size_t i = 0; i < n; ++i) {
                            const auto v = static_cast<std::int32_t>(data[first + i]);
                            std::memcpy(out.data() + 4 * i, &v, 4);
                          }
                        });
  }

  /// Adds bytes already in the stored form of `dtype` (little-endian, row-major), of any dtype.
  SafetensorsWriter& add_bytes(std::string name, Dtype dtype, std::vector<std::size_t> shape,
                               std::span<const std::byte> bytes) {
    require(bytes.size() % dtype_size(dtype) == 0, "SafetensorsWriter::add_bytes",
                    "tensor '{}': {} bytes is not a whole number of {} elements", name,
                    bytes.size(), dtype_name(dtype));
    require_size(name, shape, bytes.size() / dtype_size(dtype));
    return add_produced(std::move(name), dtype, std::move(shape),
                        [bytes, dtype](std::size_t first, std::span<std::byte> out) {
                          std::memcpy(out.data(), bytes.data() + first * dtype_size(dtype),
                                      out.size());
                        });
  }

  /// Adds a tensor whose bytes `produce` writes during `write`, a chunk at a time (for data
  /// converted on the fly). If `produce` throws, `write` leaves the destination untouched.
  SafetensorsWriter& add_produced(std::string name, Dtype dtype, std::vector<std::size_t> shape,
                                  Producer produce) {
    require(!name.empty(), "SafetensorsWriter::add", "tensor names must not be empty");
    require(name != "__metadata__", "SafetensorsWriter::add",
                    "'__metadata__' is reserved for the metadata and cannot name a tensor");
    require(!names_.contains(name), "SafetensorsWriter::add",
                    "tensor '{}' added twice", name);
    names_.insert(name);
    entries_.push_back(Entry{std::move(name), dtype, std::move(shape), std::move(produce)});
    return *this;
  }

  /// Sets a `__metadata__` entry (replacing an earlier value of the same key).
  SafetensorsWriter& set_metadata(std::string key, std::string value) {
    metadata_[std::move(key)] = std::move(value);
    return *this;
  }

  std::size_t size() const { return entries_.size(); }

  /// The 8-byte length and the padded JSON header of the file `write` would write.
  std::string header() const {
    std::string json = "{";
    if (!metadata_.empty()) json += "\"__metadata__\":" + nlohmann::json(metadata_).dump();
    std::size_t offset = 0;
    for (const Entry* e : ordered()) {
      const std::size_t bytes = e->byte_size();
      if (json.size() > 1) json += ',';
      json += fmt::format("{}:{{\"dtype\":\"{}\",\"shape\":[{}],\"data_offsets\":[{},{}]}}",
                          nlohmann::json(e->name).dump(), dtype_name(e->dtype),
                          fmt::join(e->shape, ","), offset, offset + bytes);
      offset += bytes;
    }
    json += '}';
    json.append((8 - json.size() % 8) % 8, ' ');
    std::string out(8, '\0');
    const std::uint64_t n = json.size();
    std::memcpy(out.data(), &n, 8);
    return out + json;
  }

  /// Writes the file atomically (see atomic_file.hpp): on any failure, including a Producer
  /// that throws, `path` keeps its previous content (or stays absent). I/O errors throw
  /// std::system_error naming the file.
  void write(const std::filesystem::path& path) const {
    write_file_atomically(path, [&](AtomicFile& file) {
      file.write(header());
      std::vector<std::byte> chunk;
      for (const Entry* e : ordered()) {
        const std::size_t element = dtype_size(e->dtype);
        const std::size_t per_chunk = std::max<std::size_t>(1, chunk_bytes / element);
        const std::size_t count = e->byte_size() / element;
        for (std::size_t first = 0; first < count; first += per_chunk) {
          const std::size_t n = std::min(per_chunk, count - first);
          chunk.resize(n * element);
          e->produce(first, chunk);
          file.write(chunk);
        }
      }
    });
  }

 private:
  static constexpr std::size_t chunk_bytes = std::size_t{1} << 20;

  struct Entry {
    std::string name;
    Dtype dtype;
    std::vector<std::size_t> shape;
    Producer produce;
    std::size_t byte_size() const {
      std::size_t n = dtype_size(dtype);
      for (auto e : shape) n *= e;
      return n;
    }
  };

  template <class T>
  static void encode_floats(std::span<const T> data, Dtype stored, std::span<std::byte> out) {
    const std::size_t n = out.size() / dtype_size(stored);
    auto store = [&]<class S>(std::size_t i, S v) {
      std::memcpy(out.data() + i * sizeof(S), &v, sizeof(S));
    };
    for (std::size_t i = 0; i < n; ++i) {
      switch (stored) {
        case Dtype::F32: store(i, static_cast<float>(data[i])); break;
        case Dtype::F64: store(i, static_cast<double>(data[i])); break;
        case Dtype::BF16: store(i, float_to_bf16(static_cast<float>(data[i]))); break;
        case Dtype::F16: store(i, float_to_f16(static_cast<float>(data[i]))); break;
        default: break;
      }
    }
  }

  template <class... Args>
  static void require(bool ok, const char* fn, fmt::format_string<Args...> what, Args&&... args) {
    causalqwen::detail::require(ok, fn, what, std::forward<Args>(args)...);
  }

  static void require_size(const std::string& name, const std::vector<std::size_t>& shape,
                           std::size_t size) {
    std::size_t n = 1;
    for (auto e : shape) n *= e;
    require(n == size, "SafetensorsWriter::add",
                    "tensor '{}': shape {} has {} elements, the data {}", name,
                    shape_text(shape), n, size);
  }

  // The file order of the Python library: descending dtype rank, then name.
  std::vector<const Entry*> ordered() const {
    std::vector<const Entry*> out;
    for (const auto& e : entries_) out.push_back(&e);
    std::sort(out.begin(), out.end(), [](const Entry* a, const Entry* b) {
      if (a->dtype != b->dtype) return safetensors_rank(a->dtype) > safetensors_rank(b->dtype);
      return a->name < b->name;
    });
    return out;
  }

  std::vector<Entry> entries_;
  std::set<std::string> names_;
  std::map<std::string, std::string> metadata_;
};

}  // namespace causalqwen::format
