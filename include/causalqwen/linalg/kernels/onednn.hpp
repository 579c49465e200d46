/// What every product on oneDNN (Debian's libdnnl, when the library is built with it:
/// CAUSALQWEN_HAVE_ONEDNN) shares: the CPU engine, a stream per calling thread, the cache of
/// primitives (one per shape, made on first use in a thread), the user-managed scratchpad (one
/// per thread, grown when a primitive needing more is made, so that a call in steady state
/// allocates nothing), and the name of the kernels oneDNN picks on this CPU. oneDNN chooses its
/// kernels by CPUID at run time (AMX, AVX512-BF16, AVX-512, AVX2) and threads them with the
/// library's OpenMP pool. Without CAUSALQWEN_HAVE_ONEDNN this header declares only
/// `onednn_built_in()`.
#pragma once
#include "causalqwen/core/error.hpp"
#include "causalqwen/core/page_buffer.hpp"
#include "causalqwen/core/threading.hpp"

#include <cstddef>
#include <cstdint>
#include <string>

#ifdef CAUSALQWEN_HAVE_ONEDNN
#include <oneapi/dnnl/dnnl.hpp>

#include <array>
#include <map>
#endif

namespace causalqwen::linalg {

/// Whether the library was built with oneDNN (CAUSALQWEN_HAVE_ONEDNN).
constexpr bool onednn_built_in() noexcept {
#ifdef CAUSALQWEN_HAVE_ONEDNN
  return true;
#else
  return false;
#endif
}

#ifdef CAUSALQWEN_HAVE_ONEDNN
namespace onednn {

/// The CPU engine, made on first use. Then the BLAS that Eigen forwards the remaining (small,
/// per-head) products to is set to one thread: its pthread workers would otherwise spin in
/// sched_yield beside the OpenMP pool after every call.
inline const dnnl::engine& cpu_engine() {
  static const dnnl::engine engine = [] {
    keep_blas_on_one_thread();
    return dnnl::engine(dnnl::engine::kind::cpu, 0);
  }();
  return engine;
}

/// The calling thread's stream on the CPU engine.
inline dnnl::stream& thread_stream() {
  thread_local dnnl::stream stream(cpu_engine());
  return stream;
}

/// Refuses a oneDNN status other than success, naming the call.
inline void check(dnnl_status_t status, const char* fn, const char* what) {
  detail::require(status == dnnl_success, fn, "oneDNN {} failed (status {})", what, int(status));
}

/// Whether oneDNN runs AMX on this CPU (its ISA check, which also asks the kernel for the tile
/// state's permission).
inline bool has_amx() {
  static const bool amx = [] {
    const auto isa = dnnl::get_effective_cpu_isa();
    return isa == dnnl::cpu_isa::avx512_core_amx;
  }();
  return amx;
}

/// Whether oneDNN makes a bf16 matmul on this CPU at all (asked once, of a small probe
/// primitive): its bf16 kernels need AVX-512 or AMX, so on a CPU with AVX2 alone it refuses.
inline bool bf16_supported() {
  static const bool ok = [] {
    using dt = dnnl::memory::data_type;
    using tag = dnnl::memory::format_tag;
    try {
      const dnnl::memory::desc a({64, 64}, dt::bf16, tag::ab), b({64, 64}, dt::bf16, tag::any), c({64, 64}, dt::f32, tag::ab);
      (void)dnnl::matmul::primitive_desc(dnnl::matmul::desc(a, b, c), cpu_engine());
      return true;
    } catch (const dnnl::error&) {
      return false;
    }
  }();
  return ok;
}

/// Whether oneDNN's s8·s8 matmul sums the products exactly in int32 here: with VNNI or AMX.
/// Without them its kernels add pairs of products in 16 bits first, which saturate.
inline bool int8_sums_exact() {
  static const bool exact = [] {
    const auto isa = dnnl::get_effective_cpu_isa();
    return isa == dnnl::cpu_isa::avx2_vnni || isa == dnnl::cpu_isa::avx512_core_vnni ||
           isa == dnnl::cpu_isa::avx512_core_bf16 || isa == dnnl::cpu_isa::avx512_core_amx;
  }();
  return exact;
}

/// "AMX-BF16 (oneDNN)", "AVX512-BF16 (oneDNN)", "AVX-512 (oneDNN)" or "<impl> (oneDNN)": the
/// kernel oneDNN picks for a bf16 matmul on this CPU (asked once, of a small probe primitive).
inline const std::string& bf16_kernel_name() {
  static const std::string name = [] {
    using dt = dnnl::memory::data_type;
    using tag = dnnl::memory::format_tag;
    const dnnl::memory::desc a({64, 64}, dt::bf16, tag::ab), b({64, 64}, dt::bf16, tag::any), c({64, 64}, dt::f32, tag::ab);
    const std::string impl = dnnl::matmul::primitive_desc(dnnl::matmul::desc(a, b, c), cpu_engine()).impl_info_str();
    if (impl.find("amx") != std::string::npos) return std::string("AMX-BF16 (oneDNN)");
    if (impl.find("avx512_core_bf16") != std::string::npos) return std::string("AVX512-BF16 (oneDNN)");
    if (impl.find("avx512") != std::string::npos) return std::string("AVX-512 (oneDNN)");
    return impl + " (oneDNN)";
  }();
  return name;
}

/// "AMX-INT8 (oneDNN)", "AVX512-VNNI (oneDNN)" or "<impl> (oneDNN)": oneDNN's s8·s8 matmul here.
inline const std::string& int8_kernel_name() {
  static const std::string name = [] {
    using dt = dnnl::memory::data_type;
    using tag = dnnl::memory::format_tag;
    const dnnl::memory::desc a({64, 64}, dt::s8, tag::ab), b({64, 64}, dt::s8, tag::any), c({64, 64}, dt::s32, tag::ab);
    const std::string impl = dnnl::matmul::primitive_desc(dnnl::matmul::desc(a, b, c), cpu_engine()).impl_info_str();
    if (impl.find("amx") != std::string::npos) return std::string("AMX-INT8 (oneDNN)");
    if (impl.find("vnni") != std::string::npos) return std::string("AVX512-VNNI (oneDNN)");
    return impl + " (oneDNN)";
  }();
  return name;
}

/// One cached matmul: the primitive and the memory objects of its arguments, whose data
/// handles are re-pointed at every call (bias and scratchpad may be empty).
struct Matmul {
  dnnl::matmul primitive;
  dnnl::memory src, weights, bias, dst, scratchpad;
};

/// What a cached primitive depends on (shapes, strides, types, post-ops, the thread count),
/// as integers; the caller fills it.
using MatmulKey = std::array<std::int64_t, 16>;

/// The calling thread's scratchpad, shared by its primitives (grown when one needs more).
inline PageBuffer<std::uint8_t>& thread_scratchpad() {
  thread_local PageBuffer<std::uint8_t> scratch;
  return scratch;
}

/// The cached matmul for `key` in this thread, made by make() -> Matmul on first use (its
/// primitive created with attr scratchpad_mode::user).
template <class Make>
Matmul& cached_matmul(const MatmulKey& key, Make&& make) {
  thread_local std::map<MatmulKey, Matmul> cache;
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  Matmul made = make();
  thread_scratchpad().grow(made.scratchpad ? made.scratchpad.get_desc().get_size() : 0);
  return cache.emplace(key, std::move(made)).first->second;
}

/// A matmul primitive of src · weights → dst (+ bias), its memory objects without data, its
/// scratchpad user-managed; `accumulate`: dst += the product (a sum post-op).
inline Matmul make_matmul(const dnnl::memory::desc& src, const dnnl::memory::desc& weights, const dnnl::memory::desc& dst,
                          const dnnl::memory::desc* bias, bool accumulate) {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  if (accumulate) {
    dnnl::post_ops ops;
    ops.append_sum(1.0f);
    attr.set_post_ops(ops);
  }
  const auto& engine = cpu_engine();
  const dnnl::matmul::primitive_desc pd =
      bias ? dnnl::matmul::primitive_desc(dnnl::matmul::desc(src, weights, *bias, dst), attr, engine)
           : dnnl::matmul::primitive_desc(dnnl::matmul::desc(src, weights, dst), attr, engine);
  Matmul m{dnnl::matmul(pd), dnnl::memory(src, engine, nullptr), dnnl::memory(weights, engine, nullptr), {},
           dnnl::memory(dst, engine, nullptr), dnnl::memory(pd.scratchpad_desc(), engine, nullptr)};
  if (bias) m.bias = dnnl::memory(*bias, engine, nullptr);
  return m;
}

/// Runs the cached matmul on these data (bias null: none), with the calling thread's
/// scratchpad, and waits for it. Through the C API: the C++ execute() builds a container of
/// arguments at every call.
inline void run(Matmul& m, const void* src, const void* weights, const float* bias, void* dst) {
  dnnl::stream& stream = thread_stream();
  constexpr const char* fn = "onednn::run";
  check(dnnl_memory_set_data_handle_v2(m.src.get(), const_cast<void*>(src), stream.get()), fn, "set src");
  check(dnnl_memory_set_data_handle_v2(m.weights.get(), const_cast<void*>(weights), stream.get()), fn, "set weights");
  check(dnnl_memory_set_data_handle_v2(m.dst.get(), dst, stream.get()), fn, "set dst");
  check(dnnl_memory_set_data_handle_v2(m.scratchpad.get(), thread_scratchpad().data(), stream.get()), fn, "set scratchpad");
  dnnl_exec_arg_t args[5] = {{DNNL_ARG_SRC, m.src.get()},
                             {DNNL_ARG_WEIGHTS, m.weights.get()},
                             {DNNL_ARG_DST, m.dst.get()},
                             {DNNL_ARG_SCRATCHPAD, m.scratchpad.get()},
                             {DNNL_ARG_BIAS, nullptr}};
  int count = 4;
  if (bias) {
    check(dnnl_memory_set_data_handle_v2(m.bias.get(), const_cast<float*>(bias), stream.get()), fn, "set bias");
    args[count++].memory = m.bias.get();
  }
  check(dnnl_primitive_execute(m.primitive.get(), stream.get(), count, args), fn, "execute");
  check(dnnl_stream_wait(stream.get()), fn, "wait");
}

/// A row-major matrix [rows, cols] of `type` whose rows are `ld` elements apart, read as stored
/// or (`transposed`) as its transpose [cols, rows].
inline dnnl::memory::desc strided_desc(std::size_t rows, std::size_t cols, std::size_t ld, bool transposed,
                                       dnnl::memory::data_type type) {
  using dim = dnnl::memory::dim;
  if (!transposed) return {{dim(rows), dim(cols)}, type, dnnl::memory::dims{dim(ld), 1}};
  return {{dim(cols), dim(rows)}, type, dnnl::memory::dims{1, dim(ld)}};
}

}  // namespace onednn
#endif

}  // namespace causalqwen::linalg
