/// Reading `.safetensors` files: an 8-byte little-endian header length N, N bytes of JSON
/// header `{"name": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, …,
/// "__metadata__": {string: string}}`, then the tensors' bytes (little-endian, row-major).
///
/// `SafetensorsFile::open` maps the file and validates the whole header before anything is
/// read, so a damaged file is refused with a FormatError naming the file, the tensor and the
/// field at fault, never read out of bounds.
#pragma once
#include "causalqwen/core/error.hpp"
#include "causalqwen/core/shape_string.hpp"
#include "causalqwen/format/dtype.hpp"
#include "causalqwen/format/half.hpp"
#include "causalqwen/format/mapped_file.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <bit>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace causalqwen::format {

static_assert(std::endian::native == std::endian::little,
              "causalqwen::format reads safetensors (little-endian) by copying bytes: a "
              "little-endian host is required");

/// One tensor's entry in a header. Offsets are bytes from the start of the data section.
struct TensorInfo {
  std::string name;
  Dtype dtype = Dtype::F32;
  std::vector<std::size_t> shape;
  std::size_t data_begin = 0;
  std::size_t data_end = 0;

  /// The product of the shape (1 for a scalar, shape []).
  std::size_t element_count() const {
    std::size_t n = 1;
    for (auto e : shape) n *= e;
    return n;
  }
  std::size_t byte_size() const { return data_end - data_begin; }
};

/// Element types that `read` converts floating dtypes into.
template <class T>
concept FloatElement = std::same_as<T, float> || std::same_as<T, double>;

namespace detail {

// Copies `count` elements of `dtype` at `src` (any alignment) to floats/doubles at `out`.
// An empty tensor copies nothing (`out` may then be null, which memcpy must never receive).
template <FloatElement T>
void convert_floating(Dtype dtype, const std::byte* src, std::size_t count, T* out) {
  if (count == 0) return;
  auto load = [src]<class S>(std::size_t i, S) {
    S v;
    std::memcpy(&v, src + i * sizeof(S), sizeof(S));
    return v;
  };
  switch (dtype) {
    case Dtype::F32:
      if constexpr (std::same_as<T, float>) std::memcpy(out, src, count * sizeof(float));
      else for (std::size_t i = 0; i < count; ++i) out[i] = load(i, float{});
      return;
    case Dtype::F64:
      if constexpr (std::same_as<T, double>) std::memcpy(out, src, count * sizeof(double));
      else for (std::size_t i = 0; i < count; ++i) out[i] = static_cast<T>(load(i, double{}));
      return;
    case Dtype::BF16:
      for (std::size_t i = 0; i < count; ++i) out[i] = bf16_to_float(load(i, std::uint16_t{}));
      return;
    case Dtype::F16:
      for (std::size_t i = 0; i < count; ++i) out[i] = f16_to_float(load(i, std::uint16_t{}));
      return;
    default: return;  // callers check is_floating first
  }
}

// Copies `count` integer (or BOOL) elements of `dtype` at `src` to int64 at `out`.
inline void convert_integer(Dtype dtype, const std::byte* src, std::size_t count,
                            std::int64_t* out) {
  auto widen = [&]<class S>(S) {
    for (std::size_t i = 0; i < count; ++i) {
      S v;
      std::memcpy(&v, src + i * sizeof(S), sizeof(S));
      out[i] = static_cast<std::int64_t>(v);
    }
  };
  switch (dtype) {
    case Dtype::I64: std::memcpy(out, src, count * sizeof(std::int64_t)); return;
    case Dtype::I32: widen(std::int32_t{}); return;
    case Dtype::I16: widen(std::int16_t{}); return;
    case Dtype::I8: widen(std::int8_t{}); return;
    case Dtype::U8: widen(std::uint8_t{}); return;
    case Dtype::BOOL:
      for (std::size_t i = 0; i < count; ++i) out[i] = src[i] != std::byte{0} ? 1 : 0;
      return;
    default: return;  // callers check !is_floating first
  }
}

}  // namespace detail

/// A validated, memory-mapped safetensors file. Move-only; the bytes stay mapped while it lives.
class SafetensorsFile {
 public:
  /// Opens and validates `path`. Throws FormatError naming the file and what is wrong: a file
  /// shorter than 8 bytes, a header length past the end of the file, malformed JSON (with the
  /// parser's message), a header that is not an object, a duplicated key, an entry without
  /// `dtype`/`shape`/`data_offsets` or with wrong JSON types, an unknown dtype, a negative or
  /// overflowing shape, data offsets with begin > end or past the data section, a byte count
  /// that is not product(shape)·dtype size, two tensors whose bytes overlap, or a
  /// `__metadata__` that is not an object of strings.
  static SafetensorsFile open(const std::filesystem::path& path,
                              LoadMode mode = LoadMode::automatic) {
    SafetensorsFile file;
    file.file_ = MappedFile::open(path, mode);
    file.parse_header();
    return file;
  }

  const std::filesystem::path& path() const { return file_.path(); }
  /// True when the bytes are memory-mapped (false after the read fallback).
  bool is_mapped() const { return file_.is_mapped(); }
  /// N, the JSON header's length in bytes (padding included); data starts at 8 + N.
  std::size_t header_length() const { return header_length_; }

  /// The tensor names, sorted.
  std::vector<std::string> names() const {
    std::vector<std::string> out;
    out.reserve(tensors_.size());
    for (const auto& [name, info] : tensors_) out.push_back(name);
    return out;
  }
  std::size_t size() const { return tensors_.size(); }
  bool contains(std::string_view name) const { return tensors_.find(name) != tensors_.end(); }

  /// The entry of tensor `name`; FormatError("tensor 'x' not found in <file>") when absent.
  const TensorInfo& info(std::string_view name) const {
    auto it = tensors_.find(name);
    if (it == tensors_.end())
      throw FormatError(fmt::format("tensor '{}' not found in {}", name, path().string()));
    return it->second;
  }

  /// The `__metadata__` map (empty when the header has none).
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

  /// The tensor's bytes as stored (little-endian, row-major), inside the mapping.
  std::span<const std::byte> raw(std::string_view name) const {
    const TensorInfo& t = info(name);
    return file_.bytes().subspan(data_start() + t.data_begin, t.byte_size());
  }

  /// Converts tensor `name` (F32, F64, BF16 or F16) into `out`, whose size must be the
  /// tensor's element count. BF16/F16/F32 → float and anything → double are exact;
  /// F64 → float rounds to nearest. Throws FormatError for a missing tensor or an integer
  /// dtype, DomainError when `out` has the wrong size. Safe to call from several threads.
  template <FloatElement T>
  void read(std::string_view name, std::span<T> out) const {
    const TensorInfo& t = info(name);
    if (!is_floating(t.dtype))
      throw FormatError(fmt::format("{}: tensor '{}' has dtype {}, expected a floating dtype "
                                    "(F32, F64, BF16 or F16)",
                                    path().string(), name, dtype_name(t.dtype)));
    require_output_size(t, out.size(), "SafetensorsFile::read");
    detail::convert_floating(t.dtype, raw(name).data(), out.size(), out.data());
  }

  /// As `read`, after checking that the tensor's shape is `expected_shape`: FormatError
  /// "<file>: tensor 'x' has shape [..], expected [..]" otherwise.
  template <FloatElement T>
  void read(std::string_view name, std::span<const std::size_t> expected_shape,
            std::span<T> out) const {
    require_shape(info(name), expected_shape);
    read(name, out);
  }

  /// The tensor converted to a new vector of T.
  template <FloatElement T>
  std::vector<T> read_vector(std::string_view name) const {
    std::vector<T> out(info(name).element_count());
    read(name, std::span<T>(out));
    return out;
  }

  /// Converts an integer tensor (I64, I32, I16, I8, U8, or BOOL as 0/1) into `out`, whose size
  /// must be the tensor's element count. FormatError for a floating dtype.
  void read_int64(std::string_view name, std::span<std::int64_t> out) const {
    const TensorInfo& t = info(name);
    if (is_floating(t.dtype))
      throw FormatError(fmt::format("{}: tensor '{}' has dtype {}, expected an integer dtype "
                                    "(I64, I32, I16, I8, U8 or BOOL)",
                                    path().string(), name, dtype_name(t.dtype)));
    require_output_size(t, out.size(), "SafetensorsFile::read_int64");
    detail::convert_integer(t.dtype, raw(name).data(), out.size(), out.data());
  }

  /// The integer tensor converted to a new vector of int64.
  std::vector<std::int64_t> read_int64_vector(std::string_view name) const {
    std::vector<std::int64_t> out(info(name).element_count());
    read_int64(name, out);
    return out;
  }

  /// FormatError "<file>: tensor 'x' has shape [..], expected [..]" unless equal.
  void require_shape(const TensorInfo& t, std::span<const std::size_t> expected) const {
    if (!std::equal(t.shape.begin(), t.shape.end(), expected.begin(), expected.end()))
      throw FormatError(fmt::format("{}: tensor '{}' has shape {}, expected {}",
                                    path().string(), t.name, shape_text(t.shape),
                                    shape_text(expected)));
  }

 private:
  using json = nlohmann::json;

  SafetensorsFile() = default;  // made by open()

  std::size_t data_start() const { return 8 + header_length_; }

  void require_output_size(const TensorInfo& t, std::size_t size, const char* fn) const {
    causalqwen::detail::require(size == t.element_count(), fn,
                                "tensor '{}' in {} has {} elements (shape {}), the output {}",
                                t.name, path().string(), t.element_count(),
                                shape_text(t.shape), size);
  }

  template <class... Args>
  [[noreturn]] void fail(fmt::format_string<Args...> what, Args&&... args) const {
    throw FormatError(path().string() + ": " + fmt::format(what, std::forward<Args>(args)...));
  }

  void parse_header() {
    const auto bytes = file_.bytes();
    if (bytes.size() < 8)
      fail("file is {} bytes, shorter than the 8-byte header length of a safetensors file",
           bytes.size());
    std::uint64_t n = 0;
    std::memcpy(&n, bytes.data(), 8);
    if (n > bytes.size() - 8)
      fail("header length {} is larger than the {} bytes that follow it (file of {} bytes)", n,
           bytes.size() - 8, bytes.size());
    header_length_ = static_cast<std::size_t>(n);
    const std::size_t data_size = bytes.size() - 8 - header_length_;
    const auto* text = reinterpret_cast<const char*>(bytes.data() + 8);

    json header;
    try {
      header = json::parse(text, text + header_length_, duplicate_key_check());
    } catch (const json::exception& e) {
      fail("JSON header malformed: {}", e.what());
    }
    if (!header.is_object()) fail("JSON header is a {}, expected an object", header.type_name());

    std::vector<const TensorInfo*> by_offset;
    for (auto& [name, entry] : header.items()) {
      if (name == "__metadata__") {
        parse_metadata(entry);
        continue;
      }
      TensorInfo t = parse_entry(name, entry, data_size);
      tensors_.emplace(name, std::move(t));
    }
    for (const auto& [name, t] : tensors_)
      if (t.byte_size() > 0) by_offset.push_back(&t);
    std::sort(by_offset.begin(), by_offset.end(),
              [](auto* a, auto* b) { return a->data_begin < b->data_begin; });
    for (std::size_t i = 1; i < by_offset.size(); ++i) {
      const TensorInfo& a = *by_offset[i - 1];
      const TensorInfo& b = *by_offset[i];
      if (b.data_begin < a.data_end)
        fail("tensors '{}' (bytes [{},{})) and '{}' (bytes [{},{})) overlap", a.name,
             a.data_begin, a.data_end, b.name, b.data_begin, b.data_end);
    }
  }

  // A parser callback refusing duplicated keys (nlohmann would silently keep the last).
  json::parser_callback_t duplicate_key_check() const {
    struct State {
      std::vector<std::set<std::string>> open_objects;
      std::string current_tensor;
    };
    auto state = std::make_shared<State>();
    return [this, state](int depth, json::parse_event_t event, json& parsed) {
      switch (event) {
        case json::parse_event_t::object_start: state->open_objects.emplace_back(); break;
        case json::parse_event_t::object_end: state->open_objects.pop_back(); break;
        case json::parse_event_t::key: {
          const auto& key = parsed.get_ref<const std::string&>();
          if (depth == 1) state->current_tensor = key;
          if (!state->open_objects.back().insert(key).second) {
            if (depth == 1) fail("the header names '{}' twice", key);
            fail("key '{}' appears twice in the entry of '{}'", key, state->current_tensor);
          }
          break;
        }
        default: break;
      }
      return true;
    };
  }

  void parse_metadata(const json& entry) {
    if (!entry.is_object())
      fail("__metadata__ is a {}, expected an object of strings", entry.type_name());
    for (const auto& [key, value] : entry.items()) {
      if (!value.is_string())
        fail("__metadata__ value of '{}' is a {}, expected a string", key, value.type_name());
      metadata_.emplace(key, value.get<std::string>());
    }
  }

  // A non-negative integer that fits size_t, or a FormatError naming the field.
  std::size_t parse_count(const json& value, std::string_view name, std::string_view field) const {
    if (value.is_number_unsigned()) return value.get<std::size_t>();
    if (value.is_number_integer())
      fail("tensor '{}': {} entry {} is negative", name, field, value.get<std::int64_t>());
    fail("tensor '{}': {} entry {} is a {}, expected a non-negative integer", name, field,
         value.dump(), value.type_name());
  }

  TensorInfo parse_entry(const std::string& name, const json& entry, std::size_t data_size) {
    if (!entry.is_object())
      fail("tensor '{}': entry is a {}, expected an object with dtype, shape and data_offsets",
           name, entry.type_name());
    for (const char* field : {"dtype", "shape", "data_offsets"})
      if (!entry.contains(field)) fail("tensor '{}': missing field '{}'", name, field);

    TensorInfo t;
    t.name = name;
    const json& dtype = entry["dtype"];
    if (!dtype.is_string())
      fail("tensor '{}': dtype is a {}, expected a string", name, dtype.type_name());
    auto parsed = parse_dtype(dtype.get_ref<const std::string&>());
    if (!parsed)
      fail("tensor '{}': unknown dtype '{}' (known: {})", name,
           dtype.get_ref<const std::string&>(), known_dtype_names());
    t.dtype = *parsed;

    const json& shape = entry["shape"];
    if (!shape.is_array())
      fail("tensor '{}': shape is a {}, expected an array of non-negative integers", name,
           shape.type_name());
    std::size_t elements = 1;
    for (const json& e : shape) {
      t.shape.push_back(parse_count(e, name, "shape"));
      if (__builtin_mul_overflow(elements, t.shape.back(), &elements))
        fail("tensor '{}': shape {} overflows the element count", name, shape.dump());
    }
    std::size_t expected_bytes = 0;
    if (__builtin_mul_overflow(elements, dtype_size(t.dtype), &expected_bytes))
      fail("tensor '{}': shape {} overflows the byte count", name, shape.dump());

    const json& offsets = entry["data_offsets"];
    if (!offsets.is_array() || offsets.size() != 2)
      fail("tensor '{}': data_offsets is {}, expected an array [begin, end]", name,
           offsets.dump());
    t.data_begin = parse_count(offsets[0], name, "data_offsets");
    t.data_end = parse_count(offsets[1], name, "data_offsets");
    if (t.data_begin > t.data_end)
      fail("tensor '{}': data_offsets [{},{}] begin after they end", name, t.data_begin,
           t.data_end);
    if (t.data_end > data_size)
      fail("tensor '{}': data_offsets [{},{}] extend past the data section ({} bytes)", name,
           t.data_begin, t.data_end, data_size);
    if (t.byte_size() != expected_bytes)
      fail("tensor '{}': data_offsets [{},{}] hold {} bytes, but shape {} of {} needs {}", name,
           t.data_begin, t.data_end, t.byte_size(), shape_text(t.shape), dtype_name(t.dtype),
           expected_bytes);
    return t;
  }

  MappedFile file_;
  std::size_t header_length_ = 0;
  std::map<std::string, TensorInfo, std::less<>> tensors_;
  std::map<std::string, std::string> metadata_;
};

}  // namespace causalqwen::format
