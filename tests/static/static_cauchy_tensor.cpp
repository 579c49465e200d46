// Static tests: the kinds and return types of CauchyTensor operations and of the views (the
// operations over views of operations.hpp), how a tensor gets its kind, and closed_under_v.
// Compiling this file is the test (static_assert only).
#include <causalqwen/cauchy.hpp>

#include <type_traits>
#include <utility>

namespace cq = causalqwen;
using cq::Kind;

using Ind = cq::CauchyTensor<float, 3, Kind::independent>;
using Mar = cq::CauchyTensor<float, 3, Kind::marginal>;
using W2 = xt::xtensor<float, 2>;
using V1 = xt::xtensor<float, 1>;

// defaults
static_assert(std::is_same_v<cq::CauchyTensor<double>, cq::CauchyTensor<double, 1, Kind::independent>>);
static_assert(Ind::rank == 3 && Ind::kind == Kind::independent);
static_assert(cq::is_cauchy_tensor_v<const Mar&> && !cq::is_cauchy_tensor_v<W2>);

// a tensor's kind comes from a typed view or the escape: no default constructor, no copy of a
// view of another kind; its view has its kind
using IndView3 = cq::CauchyView<const float, 3, Kind::independent>;
static_assert(!std::is_default_constructible_v<Ind> && !std::is_default_constructible_v<Mar>);
static_assert(std::is_constructible_v<Ind, IndView3> && !std::is_convertible_v<IndView3, Ind>);  // explicit: a copy
static_assert(!std::is_constructible_v<Mar, IndView3>);
static_assert(std::is_same_v<decltype(std::declval<const Mar&>().view()), cq::CauchyView<const float, 3, Kind::marginal>>);
static_assert(std::is_same_v<decltype(cq::CauchyTensor(std::declval<IndView3>())), Ind>);
static_assert(std::is_same_v<decltype(cq::assume_cauchy_tensor<Kind::marginal>(std::declval<xt::xtensor<float, 3>>(),
                                                                              std::declval<xt::xtensor<float, 3>>())),
                             Mar>);

// linear: independent → marginal; never from marginal
static_assert(std::is_same_v<decltype(cq::linear(std::declval<W2>(), std::declval<V1>(), std::declval<Ind>())), Mar>);
static_assert(std::is_same_v<decltype(cq::linear(std::declval<cq::LinearMap<float>>(), std::declval<Ind>())), Mar>);
static_assert(cq::closed_under_v<cq::ops::linear, Ind>);
static_assert(!cq::closed_under_v<cq::ops::linear, Mar>);

// closed for both kinds, kind kept
static_assert(std::is_same_v<decltype(cq::affine(std::declval<Mar>(), std::declval<V1>(), std::declval<V1>())), Mar>);
static_assert(std::is_same_v<decltype(-std::declval<Ind>()), Ind>);
static_assert(std::is_same_v<decltype(std::declval<Mar>() * 2.0f), Mar>);
static_assert(std::is_same_v<decltype(3.0f * std::declval<Ind>()), Ind>);
static_assert(std::is_same_v<decltype(std::declval<Ind>() / 2.0f + 1.0f), Ind>);
static_assert(std::is_same_v<decltype(cq::add_noise(std::declval<Ind>(), std::declval<V1>())), Ind>);
static_assert(std::is_same_v<decltype(cq::add_noise(std::declval<Mar>(), std::declval<V1>())), Mar>);
template <class X>
constexpr bool closed_affine_family = cq::closed_under_v<cq::ops::affine, X> && cq::closed_under_v<cq::ops::negate, X> &&
                                      cq::closed_under_v<cq::ops::add_noise, X> && cq::closed_under_v<cq::ops::sum_independent, X>;
static_assert(closed_affine_family<Ind> && closed_affine_family<Mar>);

// sums of tensors declared independent: independent only if both are
static_assert(std::is_same_v<decltype(std::declval<const Ind&>() + cq::assume_independent(std::declval<const Ind&>())), Ind>);
static_assert(std::is_same_v<decltype(std::declval<const Ind&>() + cq::assume_independent(std::declval<const Mar&>())), Mar>);
static_assert(std::is_same_v<decltype(std::declval<const Mar&>() + cq::assume_independent(std::declval<const Ind&>())), Mar>);

// refused for both kinds (the failtests check the compiler's sentence for each)
template <class X>
constexpr bool refuses_all = !cq::closed_under_v<cq::ops::exp, X> && !cq::closed_under_v<cq::ops::log, X> &&
                             !cq::closed_under_v<cq::ops::tanh, X> && !cq::closed_under_v<cq::ops::silu, X> &&
                             !cq::closed_under_v<cq::ops::softmax, X> && !cq::closed_under_v<cq::ops::relu, X> &&
                             !cq::closed_under_v<cq::ops::abs, X> && !cq::closed_under_v<cq::ops::product, X> &&
                             !cq::closed_under_v<cq::ops::quotient, X> && !cq::closed_under_v<cq::ops::mean, X> &&
                             !cq::closed_under_v<cq::ops::variance, X>;
static_assert(refuses_all<Ind> && refuses_all<Mar>);
// the trait is false for things that are not Cauchy tensors at all
static_assert(!cq::closed_under_v<cq::ops::affine, W2>);

// queries return plain tensors of the same rank
static_assert(std::is_same_v<decltype(std::declval<Mar>().cdf(std::declval<xt::xtensor<float, 3>>())), xt::xtensor<float, 3>>);
static_assert(std::is_same_v<decltype(std::declval<Ind>().median()), const xt::xtensor<float, 3>&>);

// views: the kind of a CauchyView comes from the rules (result_view), a row keeps it, the escape
// gives the kind it is told
using IndView = cq::CauchyView<const float, 2, Kind::independent>;
using MarView = cq::CauchyView<const float, 2, Kind::marginal>;
using Out = cq::CauchyOut<float, 2>;
static_assert(std::is_same_v<decltype(cq::result_view(cq::ops::linear{}, std::declval<IndView>(), std::declval<Out>())),
                             cq::CauchyView<float, 2, Kind::marginal>>);
static_assert(std::is_same_v<decltype(cq::result_view(cq::ops::add_noise{}, std::declval<IndView>(), std::declval<Out>())),
                             cq::CauchyView<float, 2, Kind::independent>>);
static_assert(std::is_same_v<decltype(cq::result_view(cq::ops::affine{}, std::declval<MarView>(), std::declval<Out>())),
                             cq::CauchyView<float, 2, Kind::marginal>>);
static_assert(std::is_same_v<decltype(cq::row_of(std::declval<MarView>(), 0)), cq::CauchyView<const float, 1, Kind::marginal>>);
static_assert(std::is_same_v<decltype(cq::assume_cauchy_view<Kind::marginal>(std::declval<cq::TensorView<const float, 2>>(),
                                                                            std::declval<cq::TensorView<const float, 2>>())),
                             MarView>);
// a tensor shifted onto a draw keeps its kind (a shift by constants)
static_assert(std::is_same_v<decltype(cq::shift_to_draw(std::declval<IndView>(), std::declval<cq::TensorView<const float, 2>>(),
                                                        std::declval<cq::TensorView<float, 2>>())),
                             IndView>);
static_assert(std::is_same_v<decltype(cq::shift_to_draw(std::declval<MarView>(), std::declval<cq::TensorView<const float, 2>>(),
                                                        std::declval<cq::TensorView<float, 2>>())),
                             MarView>);
static_assert(cq::closed_under_v<cq::ops::select, IndView> && cq::closed_under_v<cq::ops::select, MarView>);
// the operations over views: linear makes marginal, the per-component ones keep the kind, a sum
// is independent only of two independent views
using W2View = cq::TensorView<const float, 2>;
using V1View = cq::TensorView<const float, 1>;
static_assert(std::is_same_v<decltype(cq::linear(std::declval<W2View>(), std::declval<V1View>(), std::declval<IndView>(),
                                                 std::declval<Out>())),
                             cq::CauchyView<float, 2, Kind::marginal>>);
static_assert(std::is_same_v<decltype(cq::linear(std::declval<cq::LinearMap<float>>(), std::declval<IndView>(), std::declval<Out>())),
                             cq::CauchyView<float, 2, Kind::marginal>>);
static_assert(std::is_same_v<decltype(cq::affine(std::declval<MarView>(), std::declval<V1View>(), std::declval<V1View>(),
                                                 std::declval<Out>())),
                             cq::CauchyView<float, 2, Kind::marginal>>);
static_assert(std::is_same_v<decltype(cq::times(2.0f, std::declval<IndView>(), std::declval<Out>())),
                             cq::CauchyView<float, 2, Kind::independent>>);
static_assert(std::is_same_v<decltype(cq::divide(std::declval<MarView>(), 2.0f, std::declval<Out>())),
                             cq::CauchyView<float, 2, Kind::marginal>>);
static_assert(std::is_same_v<decltype(cq::shift(std::declval<IndView>(), 2.0f, std::declval<Out>())),
                             cq::CauchyView<float, 2, Kind::independent>>);
static_assert(std::is_same_v<decltype(cq::negate(std::declval<MarView>(), std::declval<Out>())),
                             cq::CauchyView<float, 2, Kind::marginal>>);
static_assert(std::is_same_v<decltype(cq::add_noise(std::declval<IndView>(), std::declval<V1View>(), std::declval<Out>())),
                             cq::CauchyView<float, 2, Kind::independent>>);
static_assert(std::is_same_v<decltype(cq::sum_independent(std::declval<IndView>(), cq::assume_independent(std::declval<const IndView&>()),
                                                          std::declval<Out>())),
                             cq::CauchyView<float, 2, Kind::independent>>);
static_assert(std::is_same_v<decltype(cq::sum_independent(std::declval<IndView>(), cq::assume_independent(std::declval<const MarView&>()),
                                                          std::declval<Out>())),
                             cq::CauchyView<float, 2, Kind::marginal>>);
static_assert(cq::result_kind<cq::ops::linear>(Kind::independent) == Kind::marginal &&
              cq::result_kind<cq::ops::add_noise>(Kind::independent) == Kind::independent);
// a read-only view of the same kind from a mutable one, never of another kind
static_assert(std::is_convertible_v<cq::CauchyView<float, 2, Kind::marginal>, MarView>);
static_assert(!std::is_convertible_v<MarView, IndView> && !std::is_convertible_v<IndView, MarView>);
