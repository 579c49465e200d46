/// A batch given as JSON, the input of `causalqwen forward` and `report`:
///   {"input_ids": [[…]], "numeric_values": [[…]], "attention_mask": [[…]], "labels": [[…]],
///    "target_values": [[…]], "position_ids": [[…]] (optional, default 0…S−1),
///    "sampling": {"temperature": T, "uniform": [B][S][C]} (optional)}
/// Every [B][S] field must be rectangular with the input_ids' shape; errors name the file,
/// the field, the row and what was expected. Values are refused at the input rather than turned
/// into non-finite results: numbers that do not fit the element type T (1e308 as float32),
/// position ids outside [0, max_position_id), an attention mask other than 0/1 or a row of it
/// with no 1.
#pragma once
#include "causalqwen/core/error.hpp"
#include "causalqwen/text/labels.hpp"
#include "causalqwen/core/json.hpp"
#include "causalqwen/model/causal_qwen.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <string>
#include <vector>

namespace causalqwen::train {

/// Position ids must lie in [0, max_position_id): beyond it, even before any model limit, the
/// rotary angles position·θ lose every significant digit of the phase in float32.
inline constexpr std::int64_t max_position_id = std::int64_t{1} << 24;

/// The batch's storage ([B,S] row-major) and views of it.
template <class T>
struct BatchData {
  std::size_t batch = 0, seq = 0;
  std::vector<std::int64_t> input_ids, attention_mask, labels, position_ids;
  std::vector<T> numeric_values, target_values;
  bool has_sampling = false;
  T temperature = T(0);
  std::vector<T> uniform;  // [B,S,C]

  model::Batch<T> view() const {
    const Shape<2> s{batch, seq};
    return {{input_ids.data(), s},
            {numeric_values.data(), s},
            {attention_mask.data(), s},
            {labels.data(), s},
            {target_values.data(), s},
            {position_ids.data(), s}};
  }
};

namespace detail_batch {

template <class V>
std::vector<V> matrix(const nlohmann::json& j, const std::filesystem::path& file, const std::string& key,
                      std::size_t& B, std::size_t& S, bool required, V fallback) {
  std::vector<V> out;
  if (!j.contains(key)) {
    if (required) throw FormatError(fmt::format("{}: field '{}' is missing (a [B][S] array was expected)", file.string(), key));
    out.assign(B * S, fallback);
    return out;
  }
  const auto& rows = j.at(key);
  if (!rows.is_array() || rows.empty())
    throw FormatError(fmt::format("{}: field '{}' must be a non-empty array of rows", file.string(), key));
  if (B == 0) {
    B = rows.size();
    S = rows[0].is_array() ? rows[0].size() : 0;
    if (S == 0) throw FormatError(fmt::format("{}: field '{}' row 0 must be a non-empty array", file.string(), key));
  }
  if (rows.size() != B)
    throw FormatError(fmt::format("{}: field '{}' has {} rows, expected {} (as input_ids)", file.string(), key, rows.size(), B));
  out.reserve(B * S);
  for (std::size_t b = 0; b < B; ++b) {
    const auto& row = rows[b];
    if (!row.is_array() || row.size() != S)
      throw FormatError(fmt::format("{}: field '{}' row {} must be an array of {} values", file.string(), key, b, S));
    for (std::size_t s = 0; s < S; ++s) {
      const auto& v = row[s];
      if constexpr (std::is_integral_v<V>) {
        if (!v.is_number_integer())
          throw FormatError(fmt::format("{}: field '{}' row {} must hold integers, got {}", file.string(), key, b, v.dump()));
        out.push_back(json::as<V>(v, file.string(), fmt::format("field '{}' [{}][{}]", key, b, s)));
      } else {
        if (!v.is_number())
          throw FormatError(fmt::format("{}: field '{}' row {} must hold numbers, got {}", file.string(), key, b, v.dump()));
        const double value = v.get<double>();
        if (!(std::fabs(value) <= static_cast<double>(std::numeric_limits<V>::max())))
          throw FormatError(fmt::format("{}: field '{}' [{}][{}] = {} does not fit the model's {}-bit floats "
                                        "(|value| <= {:g} expected)",
                                        file.string(), key, b, s, v.dump(), 8 * sizeof(V), std::numeric_limits<V>::max()));
        out.push_back(static_cast<V>(value));
      }
    }
  }
  return out;
}

}  // namespace detail_batch

namespace detail_batch {
/// read_batch_json after the parse.
template <class T>
BatchData<T> read_batch_fields(const nlohmann::json& j, const std::filesystem::path& file, std::size_t causal_size) {
  if (!j.is_object()) throw FormatError(fmt::format("{}: expected a JSON object at the top level", file.string()));
  BatchData<T> b;
  using detail_batch::matrix;
  b.input_ids = matrix<std::int64_t>(j, file, "input_ids", b.batch, b.seq, true, 0);
  b.numeric_values = matrix<T>(j, file, "numeric_values", b.batch, b.seq, false, T(0));
  b.attention_mask = matrix<std::int64_t>(j, file, "attention_mask", b.batch, b.seq, false, 1);
  for (std::size_t r = 0; r < b.batch; ++r) {
    bool any = false;
    for (std::size_t t = 0; t < b.seq; ++t) {
      const std::int64_t m = b.attention_mask[r * b.seq + t];
      if (m != 0 && m != 1)
        throw FormatError(fmt::format("{}: field 'attention_mask' [{}][{}] = {} must be 0 or 1", file.string(), r, t, m));
      any = any || m == 1;
    }
    if (!any)
      throw FormatError(fmt::format("{}: field 'attention_mask' row {} is all 0 (each row needs at least one token "
                                    "to attend to)", file.string(), r));
  }
  b.labels = matrix<std::int64_t>(j, file, "labels", b.batch, b.seq, false, ignore_index);
  b.target_values = matrix<T>(j, file, "target_values", b.batch, b.seq, false, T(0));
  if (j.contains("position_ids")) {
    b.position_ids = matrix<std::int64_t>(j, file, "position_ids", b.batch, b.seq, true, 0);
    for (std::size_t i = 0; i < b.position_ids.size(); ++i)
      if (b.position_ids[i] < 0 || b.position_ids[i] >= max_position_id)
        throw FormatError(fmt::format("{}: field 'position_ids' [{}][{}] = {} must lie in [0, {})", file.string(),
                                      i / b.seq, i % b.seq, b.position_ids[i], max_position_id));
  } else {
    b.position_ids.resize(b.batch * b.seq);
    for (std::size_t i = 0; i < b.position_ids.size(); ++i) b.position_ids[i] = static_cast<std::int64_t>(i % b.seq);
  }
  if (j.contains("sampling")) {
    const auto& s = j["sampling"];
    if (!s.is_object() || !s.contains("temperature") || !s["temperature"].is_number() || !s.contains("uniform"))
      throw FormatError(fmt::format("{}: field 'sampling' must be {{\"temperature\": T, \"uniform\": [B][S][C]}}", file.string()));
    b.has_sampling = true;
    b.temperature = json::as<T>(s["temperature"], file.string(), "field 'sampling.temperature'");
    if (!(b.temperature >= T(0) && std::isfinite(b.temperature)))
      throw FormatError(fmt::format("{}: field 'sampling.temperature' must be a finite number >= 0", file.string()));
    const auto& u = s["uniform"];
    const std::string where = fmt::format("{}: field 'sampling.uniform'", file.string());
    if (!u.is_array() || u.size() != b.batch) throw FormatError(fmt::format("{} must have {} rows", where, b.batch));
    for (std::size_t i = 0; i < b.batch; ++i) {
      if (!u[i].is_array() || u[i].size() != b.seq) throw FormatError(fmt::format("{} row {} must have {} positions", where, i, b.seq));
      for (std::size_t t = 0; t < b.seq; ++t) {
        const auto& cell = u[i][t];
        if (!cell.is_array() || cell.size() != causal_size)
          throw FormatError(fmt::format("{} [{}][{}] must hold C = {} numbers", where, i, t, causal_size));
        for (const auto& v : cell) {
          if (!v.is_number() || !(v.get<double>() > 0 && v.get<double>() < 1))
            throw FormatError(fmt::format("{} [{}][{}] must hold numbers in (0, 1), got {}", where, i, t, v.dump()));
          b.uniform.push_back(v.get<T>());
        }
      }
    }
  }
  return b;
}
}  // namespace detail_batch

/// Reads a batch file; `causal_size` is C, the last extent of sampling.uniform.
template <class T>
BatchData<T> read_batch_json(const std::filesystem::path& file, std::size_t causal_size) {
  const nlohmann::json j = json::parse_file(file);
  return json::guarded(file.string(), [&] { return detail_batch::read_batch_fields<T>(j, file, causal_size); });
}

}  // namespace causalqwen::train
