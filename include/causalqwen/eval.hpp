/// Umbrella header of the evaluation layer: proper scores of number forecasts (the closed-form
/// Cauchy and Gaussian CRPS, interval score, pinball loss, NLL), their summaries and skill
/// against a baseline, per group and overall; and the conformal or temperature recalibration of
/// the intervals, stored with the model as calibration.json; the risk–coverage curve of selective
/// prediction; the calibration report of a teacher-forced evaluation (coverage, PIT, reliability).
#pragma once
#include "causalqwen/eval/aggregate.hpp"
#include "causalqwen/eval/calibration.hpp"
#include "causalqwen/eval/forecast.hpp"
#include "causalqwen/eval/interval_calibration.hpp"
#include "causalqwen/eval/number_scores.hpp"
#include "causalqwen/eval/risk_coverage.hpp"
#include "causalqwen/eval/scores.hpp"
