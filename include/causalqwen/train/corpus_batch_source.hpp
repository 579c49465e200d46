/// Batches from a tokenized corpus, packed or padded, epoch after epoch, exactly resumable.
///
/// Epoch e visits every sequence once, in the order of a permutation drawn from
/// SplitMix64(splitmix64(seed) ^ splitmix64(e)) (or in corpus order when shuffle is off).
///
///   packed  The epochs' sequences (each ending in <|endoftext|>) form one endless token stream
///           t₀ t₁ t₂ …; window w is input_ids = t[wS, wS+S), labels[i] = t[wS+i+1] (the last
///           position's label is the first token of the next window), numeric_values[i] =
///           value(t[wS+i]), target_values[i] = value(t[wS+i+1]). No padding: attention_mask is
///           all 1, position_ids 0…S−1 (not reset at <|endoftext|>); a batch is B consecutive
///           windows. Every token is predicted exactly once per pass.
///   padded  Row r holds one sequence, cut to its first S tokens and padded on the right with
///           pad_id: attention_mask 1 on its tokens, labels[i] = the sequence's token i+1 when
///           it exists (the last kept position of a cut sequence still predicts the token after
///           the cut, whose value is known), −100 after the sequence's last token and on padding.
///
/// In both, labels[b,i] == <NUM> ⇔ target_values[b,i] is that number: position i predicts
/// token i+1 and its value. state() = {epoch, index of the next sequence in the epoch's order,
/// offset of the next token in it} plus the settings and the corpus fingerprint, so restore()
/// continues with the very batches an uninterrupted source would have given.
#pragma once
#include "causalqwen/core/checked_size.hpp"
#include "causalqwen/core/error.hpp"
#include "causalqwen/text/labels.hpp"
#include "causalqwen/train/batch_source.hpp"
#include "causalqwen/train/random.hpp"
#include "causalqwen/train/token_corpus.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace causalqwen::train {

enum class BatchLayout { packed, padded };

inline const char* layout_name(BatchLayout l) { return l == BatchLayout::packed ? "packed" : "padded"; }

/// Parses "packed" or "padded" (DomainError otherwise).
inline BatchLayout parse_layout(std::string_view name) {
  if (name == "packed") return BatchLayout::packed;
  if (name == "padded") return BatchLayout::padded;
  throw DomainError("causalqwen::train::parse_layout: expected \"packed\" or \"padded\", got \"" +
                    std::string(name) + "\"");
}

struct CorpusBatchOptions {
  std::size_t batch_size = 8;  ///< B
  std::size_t seq_len = 128;   ///< S
  BatchLayout layout = BatchLayout::packed;
  std::uint64_t seed = 0;      ///< the epochs' permutations
  bool shuffle = true;
};

namespace detail_corpus {

/// An empty [B,S] batch: padding everywhere (pad ids, mask 0, labels −100, values 0).
/// Bytes of a [rows,seq] batch (four int64 and two T arrays of B·S cells); SizeError when the
/// product overflows or passes the machine's memory, before anything is allocated.
template <class T>
std::size_t require_batch_memory(std::size_t rows, std::size_t seq) {
  const auto what = fmt::format("a [B,S] = [{},{}] batch", rows, seq);
  const std::size_t cells = checked_mul(rows, seq, what);
  return require_elements<char>(checked_mul(cells, 4 * sizeof(std::int64_t) + 2 * sizeof(T), what), what);
}

template <class T>
BatchData<T> empty_batch(std::size_t rows, std::size_t seq, TokenId pad_id) {
  require_batch_memory<T>(rows, seq);
  BatchData<T> b;
  b.batch = rows;
  b.seq = seq;
  b.input_ids.assign(rows * seq, pad_id);
  b.attention_mask.assign(rows * seq, 0);
  b.labels.assign(rows * seq, ignore_index);
  b.position_ids.resize(rows * seq);
  for (std::size_t i = 0; i < rows * seq; ++i) b.position_ids[i] = static_cast<std::int64_t>(i % seq);
  b.numeric_values.assign(rows * seq, T(0));
  b.target_values.assign(rows * seq, T(0));
  return b;
}

/// Writes row r from n ≤ S+1 consecutive tokens: input i = token i (i < min(n, S)), label i =
/// token i+1 with its value when i+1 < n, −100 otherwise; positions ≥ n stay padding.
template <class T>
void fill_window(BatchData<T>& b, std::size_t r, std::span<const TokenId> ids,
                 std::span<const double> values) {
  const std::size_t S = b.seq, n = ids.size();
  for (std::size_t i = 0; i < S && i < n; ++i) {
    const std::size_t at = r * S + i;
    b.input_ids[at] = ids[i];
    b.numeric_values[at] = static_cast<T>(values[i]);
    b.attention_mask[at] = 1;
    if (i + 1 < n) {
      b.labels[at] = ids[i + 1];
      b.target_values[at] = static_cast<T>(values[i + 1]);
    }
  }
}

}  // namespace detail_corpus

/// Every batch of one pass over `corpus`, in corpus order (for evaluation): padded, one
/// sequence per row (the last batch may have fewer rows); or packed, the corpus as one stream
/// cut into S-token windows (the last window padded, the stream's last token unlabelled).
template <class T>
std::vector<BatchData<T>> evaluation_batches(const TokenCorpus& corpus, std::size_t batch_size,
                                                 std::size_t seq_len,
                                                 BatchLayout layout = BatchLayout::padded) {
  detail::require(batch_size > 0 && seq_len > 0, "train::evaluation_batches",
                  "batch_size and seq_len must be > 0, got {} and {}", batch_size, seq_len);
  std::vector<BatchData<T>> out;
  {  // every batch is held at once: the pass's rows times S, checked before the first is made
    const std::size_t rows = layout == BatchLayout::padded
                                 ? corpus.size()
                                 : corpus.token_count() / seq_len + (corpus.token_count() % seq_len != 0);
    detail_corpus::require_batch_memory<T>(rows, seq_len);
  }
  if (layout == BatchLayout::padded) {
    for (std::size_t k = 0; k < corpus.size(); k += batch_size) {
      const std::size_t rows = std::min(batch_size, corpus.size() - k);
      auto b = detail_corpus::empty_batch<T>(rows, seq_len, corpus.pad_id);
      for (std::size_t r = 0; r < rows; ++r) {
        const auto ids = corpus.ids_of(k + r);
        const auto values = corpus.values_of(k + r);
        const std::size_t n = std::min(ids.size(), seq_len + 1);
        detail_corpus::fill_window(b, r, ids.first(n), values.first(n));
      }
      out.push_back(std::move(b));
    }
    return out;
  }
  const std::size_t total = corpus.token_count();
  const std::size_t windows = total / seq_len + (total % seq_len != 0);  // the last token needs no window
  for (std::size_t w = 0; w < windows; w += batch_size) {
    const std::size_t rows = std::min(batch_size, windows - w);
    auto b = detail_corpus::empty_batch<T>(rows, seq_len, corpus.pad_id);
    for (std::size_t r = 0; r < rows; ++r) {
      const std::size_t begin = (w + r) * seq_len;
      const std::size_t n = std::min(seq_len + 1, total - begin);
      detail_corpus::fill_window(b, r, std::span(corpus.ids).subspan(begin, n),
                                 std::span(corpus.values).subspan(begin, n));
    }
    out.push_back(std::move(b));
  }
  return out;
}

/// The training source over a corpus (see the top of this file).
template <class T>
class CorpusBatchSource final : public TokenBatchSource<T> {
 public:
  CorpusBatchSource(std::shared_ptr<const TokenCorpus> corpus, CorpusBatchOptions options)
      : corpus_(std::move(corpus)), options_(options) {
    detail::require(corpus_ != nullptr, "train::CorpusBatchSource", "corpus must not be null");
    detail::require(corpus_->size() > 0 && corpus_->token_count() > 0, "train::CorpusBatchSource",
                    "the corpus is empty ({} sequences, {} tokens)", corpus_->size(),
                    corpus_->token_count());
    detail::require(options_.batch_size > 0 && options_.seq_len > 0, "train::CorpusBatchSource",
                    "batch_size and seq_len must be > 0, got {} and {}", options_.batch_size,
                    options_.seq_len);
    detail_corpus::require_batch_memory<T>(options_.batch_size, options_.seq_len);
    fingerprint_ = fmt::format("{:016x}", corpus_->fingerprint());
  }

  /// The next [B,S] batch.
  BatchData<T> next() override {
    const std::size_t B = options_.batch_size, S = options_.seq_len;
    auto b = detail_corpus::empty_batch<T>(B, S, corpus_->pad_id);
    if (options_.layout == BatchLayout::packed) {
      for (std::size_t r = 0; r < B; ++r) {
        window_ids_.clear();
        window_values_.clear();
        Cursor look = cursor_;
        walk(look, S + 1, [&](TokenId id, double v) {
          window_ids_.push_back(id);
          window_values_.push_back(v);
        });
        detail_corpus::fill_window(b, r, window_ids_, window_values_);
        walk(cursor_, S, [](TokenId, double) {});
      }
    } else {
      for (std::size_t r = 0; r < B; ++r) {
        const std::size_t k = sequence_at(cursor_.epoch, cursor_.index);
        const auto ids = corpus_->ids_of(k);
        const auto values = corpus_->values_of(k);
        const std::size_t n = std::min(ids.size(), S + 1);
        detail_corpus::fill_window(b, r, ids.first(n), values.first(n));
        step_sequence(cursor_);
      }
    }
    ++batches_;
    return b;
  }

  /// {"source": "corpus", layout, batch_size, seq_len, seed, shuffle, fingerprint, epoch,
  ///  index, offset, batches}.
  nlohmann::json state() const override {
    return {{"source", "corpus"},
            {"layout", layout_name(options_.layout)},
            {"batch_size", options_.batch_size},
            {"seq_len", options_.seq_len},
            {"seed", fmt::format("{}", options_.seed)},
            {"shuffle", options_.shuffle},
            {"fingerprint", fingerprint_},
            {"epoch", cursor_.epoch},
            {"index", cursor_.index},
            {"offset", cursor_.offset},
            {"batches", batches_}};
  }

  /// Continues from state(); FormatError naming the field that does not fit this source.
  void restore(const nlohmann::json& s) override {
    const auto fail = [](const std::string& what) {
      return FormatError("causalqwen::train::CorpusBatchSource::restore: " + what);
    };
    if (!s.is_object() || s.value("source", std::string()) != "corpus")
      throw fail("not a corpus source state: " + s.dump().substr(0, 200));
    const auto expect = [&](const char* key, const nlohmann::json& want) {
      if (!s.contains(key) || s[key] != want)
        throw fail(fmt::format("field '{}' is {}, this source has {}", key,
                               s.contains(key) ? s[key].dump() : std::string("missing"), want.dump()));
    };
    expect("layout", layout_name(options_.layout));
    expect("batch_size", options_.batch_size);
    expect("seq_len", options_.seq_len);
    expect("seed", fmt::format("{}", options_.seed));
    expect("shuffle", options_.shuffle);
    expect("fingerprint", fingerprint_);
    Cursor c;
    for (const char* key : {"epoch", "index", "offset", "batches"})
      if (!s.contains(key) || !s[key].is_number_integer() || s[key].get<std::int64_t>() < 0)
        throw fail(fmt::format("field '{}' must be a non-negative integer", key));
    c.epoch = s["epoch"].get<std::uint64_t>();
    c.index = s["index"].get<std::size_t>();
    c.offset = s["offset"].get<std::size_t>();
    if (c.index >= corpus_->size()) throw fail(fmt::format("index {} ≥ {} sequences", c.index, corpus_->size()));
    if (c.offset >= std::max<std::size_t>(1, corpus_->length(sequence_at(c.epoch, c.index))))
      throw fail(fmt::format("offset {} lies beyond its sequence", c.offset));
    cursor_ = c;
    batches_ = s["batches"].get<std::uint64_t>();
  }

  /// The epoch of the next token (0-based) and the batches given so far.
  std::uint64_t epoch() const { return cursor_.epoch; }
  std::uint64_t batches() const { return batches_; }
  const TokenCorpus& corpus() const { return *corpus_; }
  const CorpusBatchOptions& options() const { return options_; }

 private:
  struct Cursor {
    std::uint64_t epoch = 0;
    std::size_t index = 0, offset = 0;
  };

  /// The corpus index of the index-th sequence of epoch e.
  std::size_t sequence_at(std::uint64_t e, std::size_t index) {
    if (!options_.shuffle) return index;
    for (auto& [epoch, order] : orders_)
      if (epoch == e && !order.empty()) return order[index];
    SplitMix64 rng(splitmix64(options_.seed) ^ splitmix64(e + 0x5EED));
    auto& slot = orders_[next_slot_];
    next_slot_ ^= 1;
    slot = {e, random_permutation(corpus_->size(), rng)};
    return slot.second[index];
  }

  void step_sequence(Cursor& c) {
    c.offset = 0;
    if (++c.index == corpus_->size()) {
      c.index = 0;
      ++c.epoch;
    }
  }

  /// Moves c over n stream tokens, calling emit(id, value) for each.
  template <class Emit>
  void walk(Cursor& c, std::size_t n, Emit&& emit) {
    while (n > 0) {
      const std::size_t k = sequence_at(c.epoch, c.index);
      const std::size_t len = corpus_->length(k);
      const std::size_t take = std::min(n, len - c.offset);
      const std::size_t base = corpus_->offsets[k] + c.offset;
      for (std::size_t i = 0; i < take; ++i) emit(corpus_->ids[base + i], corpus_->values[base + i]);
      n -= take;
      c.offset += take;
      if (c.offset == len) step_sequence(c);
    }
  }

  std::shared_ptr<const TokenCorpus> corpus_;
  CorpusBatchOptions options_;
  std::string fingerprint_;
  Cursor cursor_;
  std::uint64_t batches_ = 0;
  std::pair<std::uint64_t, std::vector<std::size_t>> orders_[2];
  int next_slot_ = 0;
  std::vector<TokenId> window_ids_;
  std::vector<double> window_values_;
};

}  // namespace causalqwen::train
