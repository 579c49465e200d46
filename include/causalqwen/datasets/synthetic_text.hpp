/// Synthetic text with numbers, for validating the whole model on text whose answers are known:
/// seeded sentences in English and Chinese whose numbers are predictable from their context to a
/// stated degree.
///
/// Every number of every template has one of three predictabilities (SyntheticNumber):
///   exact          a function of the text before it (a copy, a conversion, a sum, a number
///                  word): an ideal model predicts it with error 0;
///   bounded        drawn uniformly from a small stated range [lo, hi] (the inputs of a
///                  conversion or a sum, the code to be copied): an ideal model predicts the
///                  range's median (lo+hi)/2, mean error ≈ (hi−lo)/4;
///   unpredictable  noise, labelled as such in the text ("A random number: 57.") or a wide
///                  draw (0–99, or 10⁶–10⁹ log-uniform): ideal = the law's median.
/// `ideal` holds that best prediction (the median of the number's law given the text before
/// it), so ideal_scores() gives the MAE an ideal model reaches next to the median baseline.
///
/// Families (EN and ZH, several wordings each; e.g. EN | ZH):
///   word_number     "In digits, forty-two is 42." | "四十二写成数字是42。"   42 exact (0–99, from words)
///   number_word     "The digits 42 spell forty-two." | "阿拉伯数字42读作四十二。"  42 unpredictable (0–99)
///   copy            "The code is 27. Repeat the code: 27. Once more: 27."   27 bounded (10–29), then 2× exact
///   conversion      "Convert: 3 weeks is 21 days." | "换算：3周是21天。"     3 bounded (1–9), 21 exact
///                   (×7 weeks→days, ×12 dozen→eggs, ×10 dollars→dimes and cm→mm, ×24 days→hours
///                   for 1–4, ×2 pairs→socks: every result ≤ 96)
///   relation        "Tom has 7 apples, gets 5 more and then has 12."        7, 5 bounded (1–9), 12 exact
///   relation_words  "seven apples and five more make 12 apples."            12 exact (4–18, from words)
///   noise           "A random number: 57." | "随机数：57。"                   57 unpredictable (0–99)
///   negative        "In digits, minus seven is -7." | "负七等于 -7。"  −7 exact (−99…−1)
///   decimal         "In digits, seven and a half is 7.5." | "七点五写成数字是7.5。"  7.5 exact (0.5–99.5)
///   large           "The population was 3,200,000; again: 3.2e6." / "Convert: 4 km is 4000 m."
///                   first number unpredictable (10⁶–10⁹ log-uniform; 1–9 bounded for km), second exact
///
/// Every number follows a cue that is always followed by a number (“is”, “:”, “make”, “has”,
/// “是”, “：”, “一共”…), so the <NUM> positions themselves are predictable; no sentence starts
/// with a number.
///
/// SyntheticMix::demo() — the mix the demo trains on — leaves out `large` (one 10⁹ target would
/// outweigh every other error) and keeps unpredictable numbers rare, so that the median
/// baseline's MAE is meaningful and an ideal model reaches a small fraction of it (a test
/// states the figure); SyntheticMix::full() adds `large`.
///
/// Splits: a sentence is in validation iff train::SplitRule::side_of(text) says so (a hash of the
/// text), so no validation text ever appears in training (the mix has about 5,700 distinct
/// texts; 10% of them are held out).
#pragma once
#include "causalqwen/core/checked_size.hpp"
#include "causalqwen/core/error.hpp"
#include "causalqwen/text/tokenizer.hpp"
#include "causalqwen/train/random.hpp"
#include "causalqwen/train/split.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace causalqwen::datasets {

enum class Predictability { exact, bounded, unpredictable };

enum class SyntheticFamily {
  word_number,
  number_word,
  copy,
  conversion,
  relation,
  relation_words,
  noise,
  negative,
  decimal,
  large,
};
inline constexpr std::size_t synthetic_family_count = 10;

enum class Language { en, zh };

inline const char* predictability_name(Predictability p) {
  switch (p) {
    case Predictability::exact: return "exact";
    case Predictability::bounded: return "bounded";
    default: return "unpredictable";
  }
}

inline const char* family_name(SyntheticFamily f) {
  static constexpr std::array<const char*, synthetic_family_count> names = {
      "word_number", "number_word", "copy", "conversion", "relation", "relation_words",
      "noise", "negative", "decimal", "large"};
  return names[static_cast<std::size_t>(f)];
}

/// One number of a synthetic sentence, in order of appearance.
struct SyntheticNumber {
  double value = 0;
  Predictability predictability = Predictability::exact;
  double ideal = 0;   ///< the best prediction from the text before it (median of its law)
  double lo = 0, hi = 0;  ///< the range of its law (lo = hi = value when exact)
};

struct SyntheticSentence {
  std::string text;
  SyntheticFamily family = SyntheticFamily::word_number;
  Language language = Language::en;
  std::vector<SyntheticNumber> numbers;
};

/// Relative weights of the families (any non-negative numbers; not all zero) and the share of
/// Chinese sentences.
struct SyntheticMix {
  std::array<double, synthetic_family_count> weights{};
  double chinese_share = 0.5;

  /// The demo's mix: no `large`, 3% noise and 2% number_word (see the top of this file).
  static SyntheticMix demo() {
    SyntheticMix m;
    m.weights = {0.30, 0.01, 0.14, 0.16, 0.08, 0.14, 0.02, 0.07, 0.08, 0.0};
    return m;
  }
  /// Every family, `large` included.
  static SyntheticMix full() {
    SyntheticMix m = demo();
    m.weights[static_cast<std::size_t>(SyntheticFamily::large)] = 0.06;
    return m;
  }
  /// Only one family (for tests and studies).
  static SyntheticMix only(SyntheticFamily f, double chinese_share = 0.5) {
    SyntheticMix m;
    m.weights[static_cast<std::size_t>(f)] = 1.0;
    m.chinese_share = chinese_share;
    return m;
  }
};

namespace detail_synth {

inline std::string en_words(int n) {
  static constexpr std::array<const char*, 20> small = {
      "zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
      "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen",
      "nineteen"};
  static constexpr std::array<const char*, 10> tens = {"", "", "twenty", "thirty", "forty",
                                                       "fifty", "sixty", "seventy", "eighty", "ninety"};
  if (n < 20) return small[n];
  return std::string(tens[n / 10]) + (n % 10 ? std::string("-") + small[n % 10] : std::string());
}

inline std::string zh_words(int n) {
  static constexpr std::array<const char*, 10> d = {"零", "一", "二", "三", "四",
                                                    "五", "六", "七", "八", "九"};
  if (n < 10) return d[n];
  const std::string unit = n % 10 ? d[n % 10] : "";
  if (n < 20) return std::string("十") + unit;
  return std::string(d[n / 10]) + "十" + unit;
}

inline SyntheticNumber exact(double v) { return {v, Predictability::exact, v, v, v}; }
inline SyntheticNumber uniform_int(double v, double lo, double hi, Predictability p) {
  return {v, p, (lo + hi) / 2, lo, hi};
}

template <std::size_t N>
const char* pick(train::SplitMix64& rng, const std::array<const char*, N>& options) {
  return options[rng.below(N)];
}

/// A value of 10⁶–10⁹, log-uniform, rounded to two significant digits.
inline double large_value(train::SplitMix64& rng) {
  const double x = std::pow(10.0, 6.0 + 3.0 * rng.uniform());
  const double unit = std::pow(10.0, std::floor(std::log10(x)) - 1);
  return std::round(x / unit) * unit;
}

/// 3200000 as "3,200,000", or as "3.2e6".
inline std::string spell_large(double v, bool scientific) {
  const auto n = static_cast<long long>(v);
  if (scientific) {
    const int e = static_cast<int>(std::floor(std::log10(v)));
    const double m = v / std::pow(10.0, e);
    return fmt::format("{}e{}", fmt::format("{:.1f}", m).back() == '0' ? fmt::format("{:.0f}", m)
                                                                       : fmt::format("{:.1f}", m), e);
  }
  std::string digits = std::to_string(n), out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

struct Conversion {
  const char *en_from, *en_from_plural, *en_to, *en_to_plural, *zh_from, *zh_to;
  int factor, kmax;
};
inline constexpr std::array<Conversion, 6> conversions = {{
    {"week", "weeks", "day", "days", "周", "天", 7, 9},
    {"dozen", "dozen", "egg", "eggs", "打", "个鸡蛋", 12, 8},
    {"dollar", "dollars", "dime", "dimes", "元", "角", 10, 9},
    {"centimetre", "centimetres", "millimetre", "millimetres", "厘米", "毫米", 10, 9},
    {"day", "days", "hour", "hours", "天", "小时", 24, 4},
    {"pair", "pairs", "sock", "socks", "双袜子", "只袜子", 2, 9},
}};

inline SyntheticSentence draw(train::SplitMix64& rng, SyntheticFamily family, Language lang) {
  SyntheticSentence s;
  s.family = family;
  s.language = lang;
  const bool zh = lang == Language::zh;
  auto& nums = s.numbers;
  switch (family) {
    case SyntheticFamily::word_number: {
      const int n = static_cast<int>(rng.between(0, 99));
      if (zh) {
        static constexpr std::array<const char*, 3> t = {"{w}写成数字是{n}。", "数字{w}就是{n}。",
                                                         "汉字{w}表示{n}。"};
        s.text = fmt::format(fmt::runtime(pick(rng, t)), fmt::arg("w", zh_words(n)), fmt::arg("n", n));
      } else {
        static constexpr std::array<const char*, 3> t = {
            "In digits, {w} is {n}.", "The word {w} is {n}.", "The number {w} is {n}."};
        s.text = fmt::format(fmt::runtime(pick(rng, t)), fmt::arg("w", en_words(n)), fmt::arg("n", n));
      }
      nums.push_back(exact(n));
      break;
    }
    case SyntheticFamily::number_word: {
      const int n = static_cast<int>(rng.between(0, 99));
      s.text = zh ? fmt::format("阿拉伯数字{}读作{}。", n, zh_words(n))
                  : fmt::format("The digits {} spell {}.", n, en_words(n));
      nums.push_back(uniform_int(n, 0, 99, Predictability::unpredictable));
      break;
    }
    case SyntheticFamily::copy: {
      const int n = static_cast<int>(rng.between(10, 29));
      if (zh) {
        static constexpr std::array<const char*, 6> objs = {"密码", "房间号", "座位号", "柜子号", "票号", "订单号"};
        const char* o = pick(rng, objs);
        s.text = fmt::format("{0}是{1}。重复{0}：{1}。再说一遍：{1}。", o, n);
      } else {
        static constexpr std::array<const char*, 6> objs = {"code", "room number", "seat number",
                                                            "locker number", "ticket number", "order number"};
        const char* o = pick(rng, objs);
        s.text = fmt::format("The {0} is {1}. Repeat the {0}: {1}. Once more: {1}.", o, n);
      }
      nums.push_back(uniform_int(n, 10, 29, Predictability::bounded));
      nums.push_back(exact(n));
      nums.push_back(exact(n));
      break;
    }
    case SyntheticFamily::conversion: {
      const Conversion& c = conversions[rng.below(conversions.size())];
      const int k = static_cast<int>(rng.between(1, c.kmax));
      const int r = k * c.factor;
      s.text = zh ? fmt::format("换算：{}{}是{}{}。", k, c.zh_from, r, c.zh_to)
                  : fmt::format("Convert: {} {} is {} {}.", k, k == 1 ? c.en_from : c.en_from_plural, r,
                                c.en_to_plural);
      nums.push_back(uniform_int(k, 1, c.kmax, Predictability::bounded));
      nums.push_back(exact(r));
      break;
    }
    case SyntheticFamily::relation: {
      const int a = static_cast<int>(rng.between(1, 9)), b = static_cast<int>(rng.between(1, 9));
      if (zh) {
        static constexpr std::array<const char*, 4> names = {"小明", "小红", "老王", "阿美"};
        static constexpr std::array<const char*, 4> objs = {"苹果", "杯子", "橘子", "本子"};
        s.text = fmt::format("{}有{}个{}，又买了{}个，一共有{}个。", pick(rng, names), a, pick(rng, objs), b, a + b);
      } else {
        static constexpr std::array<const char*, 4> names = {"Tom", "Anna", "Li", "Sara"};
        static constexpr std::array<const char*, 5> objs = {"apples", "books", "coins", "pens", "cups"};
        s.text = fmt::format("{} has {} {}, gets {} more and then has {}.", pick(rng, names), a,
                             pick(rng, objs), b, a + b);
      }
      nums.push_back(uniform_int(a, 1, 9, Predictability::bounded));
      nums.push_back(uniform_int(b, 1, 9, Predictability::bounded));
      nums.push_back(exact(a + b));
      break;
    }
    case SyntheticFamily::relation_words: {
      const int a = static_cast<int>(rng.between(2, 9)), b = static_cast<int>(rng.between(2, 9));
      if (zh) {
        static constexpr std::array<const char*, 4> objs = {"苹果", "杯子", "橘子", "本子"};
        const char* o = pick(rng, objs);
        s.text = fmt::format("{}个{}加{}个{}，一共{}个。", zh_words(a), o, zh_words(b), o, a + b);
      } else {
        static constexpr std::array<const char*, 5> objs = {"apples", "books", "coins", "pens", "cups"};
        const char* o = pick(rng, objs);
        s.text = fmt::format("Here {0} {2} and {1} more make {3} {2}.", en_words(a), en_words(b), o, a + b);
      }
      nums.push_back(exact(a + b));
      break;
    }
    case SyntheticFamily::noise: {
      const int n = static_cast<int>(rng.between(0, 99));
      if (zh) {
        static constexpr std::array<const char*, 2> t = {"随机数：{}。", "抽签结果：{}。"};
        s.text = fmt::format(fmt::runtime(pick(rng, t)), n);
      } else {
        static constexpr std::array<const char*, 2> t = {"A random number: {}.", "Lottery draw: {}."};
        s.text = fmt::format(fmt::runtime(pick(rng, t)), n);
      }
      nums.push_back(uniform_int(n, 0, 99, Predictability::unpredictable));
      break;
    }
    case SyntheticFamily::negative: {
      const int n = static_cast<int>(rng.between(1, 99));
      s.text = zh ? fmt::format("负{}等于 -{}。", zh_words(n), n)
                  : fmt::format("In digits, minus {} is -{}.", en_words(n), n);
      nums.push_back(exact(-n));
      break;
    }
    case SyntheticFamily::decimal: {
      const int n = static_cast<int>(rng.between(0, 99));
      s.text = zh ? fmt::format("{}点五写成数字是{}.5。", zh_words(n), n)
                  : fmt::format("In digits, {} and a half is {}.5.", en_words(n), n);
      nums.push_back(exact(n + 0.5));
      break;
    }
    case SyntheticFamily::large: {
      if (rng.chance(0.5)) {
        const double v = large_value(rng);
        const std::string first = spell_large(v, rng.chance(0.5)), second = spell_large(v, rng.chance(0.5));
        s.text = zh ? fmt::format("人口是{}，再说一遍：{}。", first, second)
                    : fmt::format("The population was {}; again: {}.", first, second);
        nums.push_back({v, Predictability::unpredictable, std::sqrt(1e6 * 1e9), 1e6, 1e9});
        nums.push_back(exact(v));
      } else {
        const int k = static_cast<int>(rng.between(1, 9));
        s.text = zh ? fmt::format("换算：{}公里是{}米。", k, 1000 * k)
                    : fmt::format("Convert: {} km is {} m.", k, 1000 * k);
        nums.push_back(uniform_int(k, 1, 9, Predictability::bounded));
        nums.push_back(exact(1000.0 * k));
      }
      break;
    }
  }
  return s;
}

}  // namespace detail_synth

/// One sentence: family drawn by mix.weights, language by mix.chinese_share, then the
/// template's wording and parameters, all from `rng`.
inline SyntheticSentence draw_synthetic_sentence(train::SplitMix64& rng, const SyntheticMix& mix) {
  double total = 0;
  for (double w : mix.weights) {
    detail::require(w >= 0 && std::isfinite(w), "datasets::draw_synthetic_sentence",
                    "family weights must be finite and ≥ 0, got {}", w);
    total += w;
  }
  detail::require(total > 0, "datasets::draw_synthetic_sentence", "every family weight is 0");
  double u = rng.uniform() * total;
  std::size_t f = synthetic_family_count;
  for (std::size_t k = 0; k < synthetic_family_count && f == synthetic_family_count; ++k) {
    if (mix.weights[k] > 0 && u < mix.weights[k]) f = k;
    u -= mix.weights[k];
  }
  if (f == synthetic_family_count)  // rounding at the top end: the last family with weight
    for (std::size_t k = 0; k < synthetic_family_count; ++k)
      if (mix.weights[k] > 0) f = k;
  const Language lang = rng.chance(mix.chinese_share) ? Language::zh : Language::en;
  return detail_synth::draw(rng, static_cast<SyntheticFamily>(f), lang);
}

struct SyntheticTextOptions {
  SyntheticMix mix = SyntheticMix::demo();
  train::SplitRule split{0.1, "causalqwen-synthetic"};
};

/// `count` sentences of `side`: sentences drawn from train::SplitMix64(splitmix64(seed)) one after another,
/// kept when split.side_of(text) == side. Both sides follow the mix's law restricted to their
/// texts (a text may occur more than once, as it would in training). Deterministic in (side,
/// count, seed, options). DomainError when no draw lands on `side` (e.g. validation_fraction 0).
inline std::vector<SyntheticSentence> synthetic_sentences(train::DataSplit side, std::size_t count,
                                                          std::uint64_t seed,
                                                          const SyntheticTextOptions& options = {}) {
  {  // a sentence holds its record, its text and its numbers: at least 256 bytes, checked first
    const auto what = fmt::format("{} synthetic sentences", count);
    require_memory(checked_mul(count, 256, what), what);
  }
  train::SplitMix64 rng(splitmix64(seed));
  std::vector<SyntheticSentence> out;
  out.reserve(count);
  const std::size_t max_draws = checked_add(checked_mul(1000, count, "synthetic_sentences: draws"), 100000, "synthetic_sentences: draws");
  for (std::size_t draws = 0; out.size() < count; ++draws) {
    if (draws == max_draws)
      throw DomainError(fmt::format("causalqwen::datasets::synthetic_sentences: found only {} of {} {} "
                                    "sentences in {} draws (does the split leave this side empty?)",
                                    out.size(), count, train::split_name(side), draws));
    SyntheticSentence s = draw_synthetic_sentence(rng, options.mix);
    if (options.split.side_of(s.text) != side) continue;
    out.push_back(std::move(s));
  }
  return out;
}

/// The texts of `sentences`.
inline std::vector<std::string> texts_of(std::span<const SyntheticSentence> sentences) {
  std::vector<std::string> t;
  t.reserve(sentences.size());
  for (const auto& s : sentences) t.push_back(s.text);
  return t;
}

/// A held-out sentence with its encoding: encoding.spans[j] is numbers[j] (its <NUM>
/// position, byte span and value), for showing predictions next to the truth.
struct HeldOutSentence {
  SyntheticSentence sentence;
  text::NumericEncoding encoding;
};

/// Encodes each sentence with numbers; DomainError if the tokenizer does not find exactly the
/// sentence's numbers with their values (a template whose numbers the library would misread).
inline std::vector<HeldOutSentence> encode_held_out(const text::Tokenizer& tokenizer,
                                                    std::span<const SyntheticSentence> sentences) {
  std::vector<HeldOutSentence> out;
  out.reserve(sentences.size());
  for (const auto& s : sentences) {
    HeldOutSentence h{s, tokenizer.encode_with_numbers(s.text)};
    bool ok = h.encoding.spans.size() == s.numbers.size();
    for (std::size_t j = 0; ok && j < s.numbers.size(); ++j) ok = h.encoding.spans[j].value == s.numbers[j].value;
    if (!ok)
      throw DomainError(fmt::format("causalqwen::datasets::encode_held_out: \"{}\" reads as {} numbers, "
                                    "the template wrote {}", s.text, h.encoding.spans.size(), s.numbers.size()));
    out.push_back(std::move(h));
  }
  return out;
}

/// MAE of an ideal model (predicting each number's `ideal`) and of the median baseline
/// (predicting the median of the training sentences' numbers) on the validation numbers.
struct IdealScores {
  double train_median = 0, median_baseline_mae = 0, ideal_mae = 0;
  std::size_t numbers = 0;
  double ratio() const { return median_baseline_mae > 0 ? ideal_mae / median_baseline_mae : 0.0; }
};

/// The median of every number of `sentences` (mean of the two middle values for an even count).
inline double median_of_numbers(std::span<const SyntheticSentence> sentences) {
  std::vector<double> v;
  for (const auto& s : sentences)
    for (const auto& n : s.numbers) v.push_back(n.value);
  detail::require(!v.empty(), "datasets::median_of_numbers", "the sentences hold no number");
  std::sort(v.begin(), v.end());
  const std::size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}

/// See IdealScores.
inline IdealScores ideal_scores(std::span<const SyntheticSentence> train,
                                std::span<const SyntheticSentence> validation) {
  IdealScores r;
  r.train_median = median_of_numbers(train);
  for (const auto& s : validation)
    for (const auto& n : s.numbers) {
      r.median_baseline_mae += std::fabs(n.value - r.train_median);
      r.ideal_mae += std::fabs(n.value - n.ideal);
      ++r.numbers;
    }
  if (r.numbers) {
    r.median_baseline_mae /= static_cast<double>(r.numbers);
    r.ideal_mae /= static_cast<double>(r.numbers);
  }
  return r;
}

}  // namespace causalqwen::datasets
