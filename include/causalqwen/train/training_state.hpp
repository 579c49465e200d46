/// Crash-safe training checkpoints. Layout under the run's output directory:
///
///   <out>/checkpoints/step-00000120/   one complete checkpoint:
///       config.json, model.safetensors      the model (Learner::save_model; loadable as a model)
///       optimizer.safetensors               AdamW moments "adam.m.<slot>", "adam.v.<slot>" (T's dtype;
///                                           BF16 for StreamingAdamW's bfloat16 moments)
///       trainer_state.json                  {"format": "causalqwen-trainer-1", "step", "adam_steps",
///                                            "rng" (mt19937_64 state), "data" (sources' state()),
///                                            "tokens_seen", "seconds", "run" (the run's settings)}
///   <out>/checkpoints/LATEST               the name of the newest complete checkpoint
///
/// Writing: the step directory is (re)created and filled (each file atomically), the directory
/// is synced, then LATEST is replaced atomically (temporary + fsync + rename + directory fsync),
/// and only then are older step directories removed. A crash at any moment leaves LATEST naming
/// a complete checkpoint (the previous one until the new one is committed).
#pragma once
#include "causalqwen/core/error.hpp"
#include "causalqwen/core/json.hpp"
#include "causalqwen/core/line_reader.hpp"
#include "causalqwen/format/atomic_file.hpp"
#include "causalqwen/format/safetensors.hpp"
#include "causalqwen/format/safetensors_writer.hpp"
#include "causalqwen/optim/adamw.hpp"
#include "causalqwen/optim/streaming_adamw.hpp"
#include "causalqwen/train/learner.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <random>
#include <sstream>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace causalqwen::train {

inline constexpr const char* trainer_state_format = "causalqwen-trainer-1";

/// What a checkpoint holds besides the parameters and moments.
struct TrainerState {
  std::uint64_t step = 0;        // optimiser updates done
  std::uint64_t adam_steps = 0;  // AdamW's t
  std::string rng;               // std::mt19937_64 state as written by operator<<
  nlohmann::json data = nlohmann::json::object();
  double tokens_seen = 0, seconds = 0;
  nlohmann::json run = nlohmann::json::object();

  nlohmann::json to_json() const {
    return {{"format", trainer_state_format}, {"step", step}, {"adam_steps", adam_steps}, {"rng", rng},
            {"data", data}, {"tokens_seen", tokens_seen}, {"seconds", seconds}, {"run", run}};
  }
  /// FormatError naming `file` when a field is missing or of the wrong type.
  static TrainerState from_json(const nlohmann::json& j, const std::filesystem::path& file) {
    const std::string source = file.string();
    return json::guarded(source, [&] {
      if (json::field<std::string>(j, "format", source) != trainer_state_format)
        throw FormatError(fmt::format("{}: field 'format' must be \"{}\"", source, trainer_state_format));
      TrainerState s;
      s.step = json::field<std::uint64_t>(j, "step", source);
      s.adam_steps = json::field<std::uint64_t>(j, "adam_steps", source);
      s.rng = json::field<std::string>(j, "rng", source);
      s.data = json::field<nlohmann::json>(j, "data", source);
      s.tokens_seen = json::field<double>(j, "tokens_seen", source);
      s.seconds = json::field<double>(j, "seconds", source);
      s.run = json::field_or(j, "run", nlohmann::json::object(), source);
      return s;
    });
  }
};

/// The RNG's complete state as text, and back (exact).
inline std::string rng_state(const std::mt19937_64& rng) {
  std::ostringstream os;
  os << rng;
  return os.str();
}
inline void restore_rng(std::mt19937_64& rng, const std::string& text) {
  std::istringstream is(text);
  is >> rng;
  if (!is) throw FormatError("trainer state: field 'rng' is not an mt19937_64 state");
}

inline std::filesystem::path checkpoints_dir(const std::filesystem::path& out) { return out / "checkpoints"; }
inline std::string checkpoint_name(std::uint64_t step) { return fmt::format("step-{:08}", step); }

/// True for the names checkpoint_name() writes: "step-" followed by digits only (so LATEST
/// cannot point outside the checkpoints directory).
inline bool is_checkpoint_name(std::string_view name) {
  constexpr std::string_view prefix = "step-";
  if (!name.starts_with(prefix) || name.size() == prefix.size()) return false;
  return std::all_of(name.begin() + prefix.size(), name.end(), [](char c) { return c >= '0' && c <= '9'; });
}

/// The names of the step directories in `out`/checkpoints, in order (none when it is absent).
inline std::vector<std::string> checkpoint_names(const std::filesystem::path& out) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(checkpoints_dir(out), ec))
    if (entry.is_directory() && is_checkpoint_name(entry.path().filename().string()))
      names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

/// The longest line LATEST may hold: a checkpoint's name is "step-" and its digits.
inline constexpr std::size_t latest_max_line_bytes = 4096;

/// The newest complete checkpoint's directory, if LATEST exists; nullopt for a run with no
/// checkpoint at all (nothing to resume). FormatError naming LATEST when it cannot be read or
/// holds anything but the name of a complete checkpoint ("step-<digits>" with a state file), and
/// naming the checkpoints directory when it holds step directories but no LATEST (resuming
/// from step 0 would overwrite them).
inline std::optional<std::filesystem::path> latest_checkpoint(const std::filesystem::path& out) {
  const auto latest = checkpoints_dir(out) / "LATEST";
  std::error_code ec;
  if (!std::filesystem::exists(latest, ec)) {
    const auto found = checkpoint_names(out);
    if (found.empty()) return std::nullopt;
    throw FormatError(fmt::format("{}: holds {} checkpoint directories ({}{}) but no LATEST naming the newest complete "
                                  "one: write the name to resume from into LATEST, or give another --out",
                                  checkpoints_dir(out).string(), found.size(), found.back(),
                                  found.size() > 1 ? fmt::format(" the newest, {} the oldest", found.front()) : ""));
  }
  // its first line, through the line reader: a read error (LATEST a directory, EIO) or a line
  // past latest_max_line_bytes is refused naming the file, never taken for an empty name
  std::string name;
  LineReader in(latest, latest_max_line_bytes, "file naming the newest checkpoint");
  in.next(name);
  if (name.size() > 80) name.resize(80);
  if (!is_checkpoint_name(name))
    throw FormatError(fmt::format("{}: names '{}', expected a checkpoint name such as step-00000120",
                                  latest.string(), name.substr(0, 80)));
  const auto dir = checkpoints_dir(out) / name;
  if (!std::filesystem::exists(dir / "trainer_state.json"))
    throw FormatError(fmt::format("{}: names '{}', which is not a complete checkpoint", latest.string(), name));
  return dir;
}

namespace detail_state {
inline void sync_directory(const std::filesystem::path& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}
}  // namespace detail_state

/// Test hook between "files written" and "LATEST replaced" (see Trainer: env variables).
using CheckpointHook = std::function<void(const std::filesystem::path& step_dir)>;

namespace detail_state {
/// Each slot of the bfloat16 arena `moment` (laid out like the parameters) as a BF16 tensor
/// "<prefix><slot>".
inline void add_bf16_slots(format::SafetensorsWriter& w, const Arena<std::uint16_t>& moment, const std::string& prefix) {
  for (const auto& s : moment.layout().slots())
    w.add_bytes(prefix + s.name, format::Dtype::BF16, s.shape,
                std::as_bytes(std::span<const std::uint16_t>(moment.data() + s.offset, s.size)));
}

/// add_moments of an optimiser whose moments are laid out like the parameters.
template <class Optimizer>
void add_whole_moments(format::SafetensorsWriter& w, Optimizer& adam) {
  if (adam.moment_storage() == optim::MomentStorage::full) {
    detail_learner::add_slots(w, adam.first_moment(), "adam.m.");
    detail_learner::add_slots(w, adam.second_moment(), "adam.v.");
  } else {
    add_bf16_slots(w, adam.first_moment_bf16(), "adam.m.");
    add_bf16_slots(w, adam.second_moment_bf16(), "adam.v.");
  }
}
}  // namespace detail_state

/// The optimiser moments as tensors "adam.m.<slot>", "adam.v.<slot>" (T, or BF16 for bfloat16
/// moments).
template <class T>
void add_moments(format::SafetensorsWriter& w, optim::AdamW<T>& adam) {
  detail::require(adam.owns_all(), "add_moments",
                  "this optimiser holds one shard of the moments; gather them into one that owns every element first "
                  "(the data-parallel trainer does)");
  detail_state::add_whole_moments(w, adam);
}
template <class T>
void add_moments(format::SafetensorsWriter& w, optim::StreamingAdamW<T>& adam) {
  detail_state::add_whole_moments(w, adam);
}

namespace detail_state {
/// Throws unless tensor `name` of optimizer.safetensors is stored as `expected` (a checkpoint
/// of another optimiser's moments is refused rather than converted).
inline void require_moment_dtype(const format::SafetensorsFile& f, const std::string& name, format::Dtype expected) {
  const auto stored = f.info(name).dtype;
  if (stored != expected)
    throw FormatError(fmt::format("{}: tensor '{}' is {}, expected {} (the checkpoint was written with other "
                                  "optimiser moments than this run's: see --moments)",
                                  f.path().string(), name, format::dtype_name(stored), format::dtype_name(expected)));
}

/// Reads the elements `part` (parameter indices) of the moment tensor `name` of `slot` into
/// `out`: T values (Bits = T, stored as F32/F64), or bfloat16 bits (Bits = uint16_t, stored as
/// BF16), exactly. `scratch` holds a whole slot when only a part of it is wanted.
template <class T, class Bits>
void read_moment_part(const format::SafetensorsFile& f, const std::string& name, const Layout::Slot& slot,
                      ElementRange part, Bits* out, std::vector<T>& scratch) {
  constexpr bool bf16 = std::is_same_v<Bits, std::uint16_t>;
  const format::Dtype expected = bf16 ? format::Dtype::BF16 : std::is_same_v<T, float> ? format::Dtype::F32 : format::Dtype::F64;
  require_moment_dtype(f, name, expected);
  const std::size_t first = part.begin - slot.offset;
  if constexpr (!bf16) {
    if (part.size() == slot.size) return f.template read<T>(name, std::span<T>(out, slot.size));
  }
  scratch.resize(slot.size);
  f.template read<T>(name, std::span<T>(scratch));
  for (std::size_t i = 0; i < part.size(); ++i) {
    if constexpr (bf16)  // exact: every value is a bfloat16
      out[i] = static_cast<std::uint16_t>(std::bit_cast<std::uint32_t>(static_cast<float>(scratch[first + i])) >> 16);
    else
      out[i] = scratch[first + i];
  }
}

/// The moments of the parameter elements `owned` from "adam.m.<slot>" / "adam.v.<slot>" into
/// m and v (element i of m is parameter element owned.begin + i).
template <class T, class Bits>
void read_moment_range(const format::SafetensorsFile& f, const Layout& layout, ElementRange owned, Bits* m, Bits* v) {
  std::vector<T> scratch;
  for (Bits* out : {m, v})
    for (const auto& s : layout.slots()) {
      const ElementRange r = owned.intersect(s.offset, s.size);
      if (r.size() > 0)
        read_moment_part<T>(f, (out == m ? "adam.m." : "adam.v.") + s.name, s, r, out + (r.begin - owned.begin), scratch);
    }
}
}  // namespace detail_state

/// Reads the moments written by add_moments back (bit for bit): those of the elements the
/// optimiser owns (all of them, or one process's shard; a checkpoint written by any number of
/// processes holds every element's).
template <class T>
void read_moments(const format::SafetensorsFile& f, optim::AdamW<T>& adam) {
  if (adam.moment_storage() == optim::MomentStorage::full)
    detail_state::read_moment_range<T>(f, adam.layout(), adam.owned(), adam.first_moment().data(),
                                       adam.second_moment().data());
  else
    detail_state::read_moment_range<T>(f, adam.layout(), adam.owned(), adam.first_moment_bf16().data(),
                                       adam.second_moment_bf16().data());
}
template <class T>
void read_moments(const format::SafetensorsFile& f, optim::StreamingAdamW<T>& adam) {
  const ElementRange all{0, adam.gradients().size()};
  const auto& layout = adam.gradients().layout();
  if (adam.moment_storage() == optim::MomentStorage::full)
    detail_state::read_moment_range<T>(f, layout, all, adam.first_moment().data(), adam.second_moment().data());
  else
    detail_state::read_moment_range<T>(f, layout, all, adam.first_moment_bf16().data(),
                                       adam.second_moment_bf16().data());
}

/// Writes a complete checkpoint for `state.step` as in the file comment and commits it.
/// `Optimizer` is optim::AdamW<T> or optim::StreamingAdamW<T>.
template <class T, class Optimizer>
std::filesystem::path write_checkpoint(const std::filesystem::path& out, const Learner<T>& learner,
                                       Optimizer& adam, const TrainerState& state,
                                       const CheckpointHook& before_commit = {}) {
  const auto root = checkpoints_dir(out);
  const auto dir = root / checkpoint_name(state.step);
  std::filesystem::create_directories(root);
  std::filesystem::remove_all(dir);  // leftovers of a crashed write of the same step
  std::filesystem::create_directories(dir);
  learner.save_model(dir);
  format::SafetensorsWriter w;
  w.set_metadata("producer", "causalqwen trainer");
  add_moments(w, adam);
  w.write(dir / "optimizer.safetensors");
  const std::string text = state.to_json().dump(2) + "\n";
  format::write_file_atomically(dir / "trainer_state.json", [&](format::AtomicFile& f) { f.write(text); });
  detail_state::sync_directory(dir);
  if (before_commit) before_commit(dir);
  format::write_file_atomically(root / "LATEST", [&](format::AtomicFile& f) { f.write(checkpoint_name(state.step) + "\n"); });
  for (const auto& entry : std::filesystem::directory_iterator(root))
    if (entry.is_directory() && entry.path().filename() != dir.filename() &&
        entry.path().filename().string().starts_with("step-"))
      std::filesystem::remove_all(entry.path());
  return dir;
}

/// The trainer state in `file` (a checkpoint's trainer_state.json); FormatError naming the file
/// (and the field) when it cannot be read, is not JSON or a field is missing or of the wrong type.
inline TrainerState read_trainer_state(const std::filesystem::path& file) {
  return TrainerState::from_json(json::parse_file(file), file);
}

/// Loads parameters, moments and the trainer state from checkpoint `dir`.
/// FormatError unless the state's step is the one its directory's name states (step-00000020/
/// holds step 20).
inline void require_step_of_directory(const TrainerState& state, const std::filesystem::path& dir) {
  const std::string name = dir.filename().string();
  if (!is_checkpoint_name(name) || checkpoint_name(state.step) != name)
    throw FormatError(fmt::format("{}: field 'step' is {}, but the checkpoint's directory is {}",
                                  (dir / "trainer_state.json").string(), state.step, name));
}

template <class T, class Optimizer>
TrainerState read_checkpoint(const std::filesystem::path& dir, Learner<T>& learner, Optimizer& adam) {
  auto state = read_trainer_state(dir / "trainer_state.json");
  require_step_of_directory(state, dir);
  learner.load_params(dir);
  read_moments(format::SafetensorsFile::open(dir / "optimizer.safetensors"), adam);
  adam.set_steps(state.adam_steps);
  return state;
}

}  // namespace causalqwen::train
