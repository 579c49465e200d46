/// The one place that includes xtensor (its header paths moved in 0.26). Everything else in
/// causalqwen includes this adapter instead of xtensor headers directly.
#pragma once
#ifndef XTENSOR_USE_XSIMD
#define XTENSOR_USE_XSIMD
#endif

#if __has_include(<xtensor/containers/xtensor.hpp>)  // xtensor >= 0.26
#include <xtensor/containers/xadapt.hpp>
#include <xtensor/containers/xarray.hpp>
#include <xtensor/containers/xtensor.hpp>
#include <xtensor/core/xmath.hpp>
#include <xtensor/io/xio.hpp>
#include <xtensor/views/xview.hpp>
#else
#include <xtensor/xadapt.hpp>
#include <xtensor/xarray.hpp>
#include <xtensor/xio.hpp>
#include <xtensor/xmath.hpp>
#include <xtensor/xtensor.hpp>
#include <xtensor/xview.hpp>
#endif

#include <xsimd/xsimd.hpp>
