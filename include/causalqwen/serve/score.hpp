/// One text scored teacher-forced, as `causalqwen eval` scores each of its texts
/// (train::evaluate, one forward pass with the deterministic action): for every number of the
/// text but a leading one (no token predicts it), the prediction made at the token before it,
/// Y ~ Cauchy(loc, scale), and how the number as written fares under it:
///   PIT = F_Y(y) = cauchy::cdf(y, loc, scale)
///   NLL = −log f_Y(y) = log(π·scale) + log(1 + z²),  z = (y − loc)/scale
///   P(<NUM>) at that position; the central intervals at the levels asked (number_report.hpp)
/// The offsets are bytes of the text (text::NumberSpan).
#pragma once
#include "causalqwen/cauchy/distribution.hpp"
#include "causalqwen/serve/number_report.hpp"
#include "causalqwen/train/corpus_batch_source.hpp"
#include "causalqwen/train/evaluate.hpp"
#include "causalqwen/train/token_corpus.hpp"

#include <cmath>
#include <numbers>
#include <span>
#include <string>
#include <vector>

namespace causalqwen::serve {

struct ScoredNumber {
  std::size_t text_offset = 0;
  std::string text;
  double value = 0, loc = 0, scale = 0, p_num = 0, pit = 0, nll = 0;
  std::vector<std::pair<double, std::array<double, 2>>> intervals;
};

struct TextScore {
  std::size_t tokens = 0;
  std::vector<ScoredNumber> numbers;
};

/// −log of the Cauchy(loc, scale) density at y.
inline double cauchy_nll(double y, double loc, double scale) {
  const double z = (y - loc) / scale;
  return std::log(std::numbers::pi * scale) + std::log1p(z * z);
}

/// The numbers of `text` scored by `model` (see the file comment); a text of more than
/// `max_tokens` tokens is refused (DomainError).
template <class T>
TextScore score_text(model::CausalQwen<T>& model, const text::Tokenizer& tok, const std::string& text,
                     std::span<const double> levels, std::size_t max_tokens,
                     const eval::IntervalCalibration* calibration = nullptr) {
  TextScore out;
  const auto enc = tok.encode_with_numbers(text);
  out.tokens = enc.input_ids.size();
  detail::require(out.tokens <= max_tokens, "score", "the text has {} tokens, more than the {} a slot holds", out.tokens,
                  max_tokens);
  if (out.tokens < 2) return out;
  const std::vector<std::string> texts{text};
  const auto corpus = train::encode_corpus(tok, texts);
  const auto batches = train::evaluation_batches<T>(corpus, 1, corpus.length(0) - 1, train::BatchLayout::padded);
  std::vector<train::NumberPrediction> predictions;
  (void)train::evaluate(model, batches, [&](const train::NumberPrediction& p) { predictions.push_back(p); });
  for (const auto& p : predictions) {
    const std::size_t at = p.position + 1;  // the token predicted
    for (const auto& span : enc.spans) {
      if (span.token_index != at) continue;
      ScoredNumber s;
      s.text_offset = span.begin;
      s.text = span.spelling;
      s.value = span.value;
      s.loc = p.loc;
      s.scale = p.scale;
      s.p_num = p.p_num;
      s.pit = cdf(p.target, p.loc, p.scale);
      s.nll = cauchy_nll(p.target, p.loc, p.scale);
      s.intervals = central_intervals(p.loc, p.scale, levels, calibration);
      out.numbers.push_back(std::move(s));
    }
  }
  return out;
}

}  // namespace causalqwen::serve
