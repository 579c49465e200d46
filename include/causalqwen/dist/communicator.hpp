/// The processes that train one model together (data parallelism over MPI): process `rank` of
/// `size`. A program started by `mpirun -np N` opens MPI with a `Session` and takes
/// `Communicator::world()`; everywhere else (a plain start, or the library built with
/// CAUSALQWEN_MPI off) the communicator is the process alone, size 1, whose collectives are a
/// copy or nothing, so the same training code runs either way.
///
/// Collectives are called by every process in the same order. Element counts of one call are
/// split into pieces of at most 2^28 elements (MPI counts are ints).
#pragma once
#include "causalqwen/core/arena.hpp"
#include "causalqwen/core/error.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#if defined(CAUSALQWEN_MPI)
#include <mpi.h>
#endif

namespace causalqwen::dist {

/// True when `environment` (a program's environment: null-terminated "NAME=value" strings, as
/// main's third argument or `environ`) is that of a process started by mpirun / mpiexec: Open
/// MPI, MPICH and PMIx launchers set one of OMPI_COMM_WORLD_SIZE, PMI_SIZE and PMIX_RANK.
inline bool started_by_mpirun(const char* const* environment) {
  if (environment == nullptr) return false;
  for (; *environment != nullptr; ++environment)
    for (std::string_view name : {"OMPI_COMM_WORLD_SIZE=", "PMI_SIZE=", "PMIX_RANK="})
      if (std::string_view(*environment).starts_with(name)) return true;
  return false;
}

/// True when this build can talk MPI (CAUSALQWEN_MPI on and an MPI found at configure time).
inline constexpr bool built_with_mpi() {
#if defined(CAUSALQWEN_MPI)
  return true;
#else
  return false;
#endif
}

/// MPI for the life of the object, when the program says it was started by mpirun
/// (`by_mpirun`, e.g. started_by_mpirun(environ)): MPI_Init_thread (funneled: only the main
/// thread calls MPI; OpenMP threads never do) and MPI_Finalize. A process started otherwise opens
/// nothing. A program started by mpirun but built without MPI is refused: it would train N
/// independent copies.
class Session {
 public:
  Session(int* argc, char*** argv, bool by_mpirun) {
#if defined(CAUSALQWEN_MPI)
    int initialised = 0;
    MPI_Initialized(&initialised);
    if (!initialised && by_mpirun) {
      int provided = 0;
      MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
      owner_ = true;
    }
#else
    (void)argc, (void)argv;
    if (by_mpirun)
      throw DomainError("causalqwen was built without MPI (CAUSALQWEN_MPI=OFF) but started by mpirun: every process "
                        "would train alone; rebuild with MPI (apt-get install libopenmpi-dev) or start it without mpirun");
#endif
  }
  ~Session() {
#if defined(CAUSALQWEN_MPI)
    int finalised = 0;
    MPI_Finalized(&finalised);
    if (owner_ && !finalised) MPI_Finalize();
#endif
  }
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;
  /// True when this object opened MPI.
  bool active() const { return owner_; }

 private:
  bool owner_ = false;
};

/// A started non-blocking operation (a collective, a send or a receive); Communicator::wait
/// completes it.
struct Request {
#if defined(CAUSALQWEN_MPI)
  MPI_Request handle = MPI_REQUEST_NULL;
#endif
};

namespace detail_comm {
inline constexpr std::size_t max_piece = std::size_t{1} << 28;  // elements per MPI call
#if defined(CAUSALQWEN_MPI)
template <class T>
MPI_Datatype mpi_type() {
  if constexpr (std::is_same_v<T, float>) return MPI_FLOAT;
  else if constexpr (std::is_same_v<T, double>) return MPI_DOUBLE;
  else if constexpr (std::is_same_v<T, std::uint64_t>) return MPI_UINT64_T;
  else if constexpr (std::is_same_v<T, std::uint16_t>) return MPI_UINT16_T;
  else if constexpr (std::is_same_v<T, char>) return MPI_CHAR;
  else static_assert(sizeof(T) == 0, "no MPI datatype for this element type");
}
inline void check(int code, const char* what) {
  if (code != MPI_SUCCESS) {
    char text[MPI_MAX_ERROR_STRING];
    int n = 0;
    MPI_Error_string(code, text, &n);
    throw DomainError(fmt::format("causalqwen::dist: {} failed: {}", what, std::string(text, static_cast<std::size_t>(n))));
  }
}
#endif
}  // namespace detail_comm

class Communicator {
 public:
  /// The process alone (size 1).
  static Communicator local() { return Communicator(); }

  /// Every process started by mpirun (MPI_COMM_WORLD) when a Session opened MPI; else local().
  static Communicator world() {
    Communicator c;
#if defined(CAUSALQWEN_MPI)
    int initialised = 0, finalised = 0;
    MPI_Initialized(&initialised);
    MPI_Finalized(&finalised);
    if (initialised && !finalised) {
      c.comm_ = MPI_COMM_WORLD;
      MPI_Comm_rank(MPI_COMM_WORLD, &c.rank_);
      MPI_Comm_size(MPI_COMM_WORLD, &c.size_);
    }
#endif
    return c;
  }

  int rank() const { return rank_; }
  int size() const { return size_; }
  bool is_root() const { return rank_ == 0; }
  /// "rank r of N" (empty for a process alone): for messages.
  std::string where() const { return size_ > 1 ? fmt::format("rank {} of {}", rank_, size_) : std::string(); }

  /// data ← process root's data, on every process.
  template <class T>
  void broadcast(std::span<T> data, int root = 0) const {
#if defined(CAUSALQWEN_MPI)
    if (size_ == 1) return;
    for (std::size_t at = 0; at < data.size(); at += detail_comm::max_piece) {
      const std::size_t n = std::min(detail_comm::max_piece, data.size() - at);
      detail_comm::check(MPI_Bcast(data.data() + at, static_cast<int>(n), detail_comm::mpi_type<T>(), root, comm_),
                         "MPI_Bcast");
    }
#else
    (void)data, (void)root;
#endif
  }

  /// out[r·n + i] ← process r's mine[i] (n = mine.size()), the same on every process.
  void all_gather(std::span<const double> mine, std::span<double> out) const {
    detail::require(out.size() == mine.size() * static_cast<std::size_t>(size_), "Communicator::all_gather",
                    "the output holds {} values, expected {} × {}", out.size(), mine.size(), size_);
#if defined(CAUSALQWEN_MPI)
    if (size_ > 1) {
      detail_comm::check(MPI_Allgather(mine.data(), static_cast<int>(mine.size()), MPI_DOUBLE, out.data(),
                                       static_cast<int>(mine.size()), MPI_DOUBLE, comm_),
                         "MPI_Allgather");
      return;
    }
#endif
    std::copy(mine.begin(), mine.end(), out.begin());
  }

  /// Σ over processes of `value`, added in rank order, so every process gets the same bits.
  double sum(double value) const {
    gathered_.resize(static_cast<std::size_t>(size_));  // no allocation after the first call
    all_gather(std::span<const double>(&value, 1), gathered_);
    double total = 0;
    for (double v : gathered_) total += v;
    return total;
  }

  /// data[ranges[r]] ← process r's data[ranges[r]] for every r, on every process (each process
  /// has updated its own range; afterwards all hold the whole). One in-place MPI_Allgatherv
  /// when every offset fits an int (one collective instead of N broadcasts), else a broadcast
  /// per process in pieces. `counts` and `offsets` are scratch.
  template <class T>
  void all_gather_ranges(T* data, std::span<const ElementRange> ranges) const {
    check_ranges(ranges, "all_gather_ranges");
#if defined(CAUSALQWEN_MPI)
    if (size_ == 1) return;
    if (ranges.back().end <= static_cast<std::size_t>(INT32_MAX) && ranges.front().begin == 0) {
      counts_.resize(ranges.size()), offsets_.resize(ranges.size());  // no allocation after the first call
      for (std::size_t r = 0; r < ranges.size(); ++r)
        counts_[r] = static_cast<int>(ranges[r].size()), offsets_[r] = static_cast<int>(ranges[r].begin);
      detail_comm::check(MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, data, counts_.data(), offsets_.data(),
                                        detail_comm::mpi_type<T>(), comm_),
                         "MPI_Allgatherv");
      return;
    }
#endif
    for (int r = 0; r < size_; ++r)
      broadcast(std::span<T>(data + ranges[r].begin, ranges[r].size()), r);
  }

  /// On process root: whole[ranges[r]] ← process r's `mine` (ranges[r].size() elements each);
  /// `whole` is only read on root.
  template <class T>
  void gather_ranges(std::span<const T> mine, T* whole, std::span<const ElementRange> ranges, int root = 0) const {
    check_ranges(ranges, "gather_ranges");
    detail::require(mine.size() == ranges[rank_].size(), "Communicator::gather_ranges",
                    "this process sends {} elements, its range holds {}", mine.size(), ranges[rank_].size());
    if (rank_ == root) std::copy(mine.begin(), mine.end(), whole + ranges[rank_].begin);
#if defined(CAUSALQWEN_MPI)
    for_each_piece(ranges, root, [&](int r, std::size_t at, int n) {
      if (rank_ == root)
        detail_comm::check(MPI_Recv(whole + ranges[r].begin + at, n, detail_comm::mpi_type<T>(), r, 7, comm_,
                                    MPI_STATUS_IGNORE),
                           "MPI_Recv");
      else if (rank_ == r)
        detail_comm::check(MPI_Send(mine.data() + at, n, detail_comm::mpi_type<T>(), root, 7, comm_), "MPI_Send");
    });
#endif
  }

  /// The inverse of gather_ranges: process r's `mine` (ranges[r].size() elements) ← process
  /// root's whole[ranges[r]]; `whole` is only read on root.
  template <class T>
  void scatter_ranges(const T* whole, std::span<T> mine, std::span<const ElementRange> ranges, int root = 0) const {
    check_ranges(ranges, "scatter_ranges");
    detail::require(mine.size() == ranges[rank_].size(), "Communicator::scatter_ranges",
                    "this process receives {} elements, its range holds {}", mine.size(), ranges[rank_].size());
    if (rank_ == root) std::copy_n(whole + ranges[rank_].begin, mine.size(), mine.begin());
#if defined(CAUSALQWEN_MPI)
    for_each_piece(ranges, root, [&](int r, std::size_t at, int n) {
      if (rank_ == root)
        detail_comm::check(MPI_Send(whole + ranges[r].begin + at, n, detail_comm::mpi_type<T>(), r, 8, comm_), "MPI_Send");
      else if (rank_ == r)
        detail_comm::check(MPI_Recv(mine.data() + at, n, detail_comm::mpi_type<T>(), root, 8, comm_, MPI_STATUS_IGNORE),
                           "MPI_Recv");
    });
#endif
  }

  /// text ← process root's text, on every process.
  void broadcast_text(std::string& text, int root = 0) const {
    std::uint64_t n = text.size();
    broadcast(std::span<std::uint64_t>(&n, 1), root);
    text.resize(n);
    broadcast(std::span<char>(text.data(), text.size()), root);
  }

  /// Starts, without waiting: process r receives in `out` the sum over processes of its part of
  /// `in` — the counts[r] elements after the counts of processes 0 … r−1. `in` must stay
  /// unchanged and `out` unread until wait(). Σ counts ≤ 2^31 − 1.
  template <class T>
  Request reduce_scatter_start(const T* in, T* out, std::span<const int> counts) const {
    detail::require(counts.size() == static_cast<std::size_t>(size_), "Communicator::reduce_scatter_start",
                    "need one count per process ({}), got {}", size_, counts.size());
    Request req;
#if defined(CAUSALQWEN_MPI)
    if (size_ > 1) {
      detail_comm::check(MPI_Ireduce_scatter(in, out, counts.data(), detail_comm::mpi_type<T>(), MPI_SUM, comm_,
                                             &req.handle),
                         "MPI_Ireduce_scatter");
      return req;
    }
#endif
    if (in != out) std::copy_n(in, static_cast<std::size_t>(counts[0]), out);
    return req;
  }

  /// Starts sending the n elements at `data` to process `dest` with tag `tag`; `data` must stay
  /// unchanged until the request completes. Messages between two processes with one tag
  /// arrive in the order they were started. n ≤ 2^31 − 1.
  template <class T>
  Request send_start(const T* data, std::size_t n, int dest, int tag) const {
    detail::require(n <= static_cast<std::size_t>(INT32_MAX) && dest >= 0 && dest < size_ && dest != rank_,
                    "Communicator::send_start", "cannot send {} elements to process {} (this is {} of {})", n, dest,
                    rank_, size_);
    Request req;
#if defined(CAUSALQWEN_MPI)
    detail_comm::check(MPI_Isend(data, static_cast<int>(n), detail_comm::mpi_type<T>(), dest, tag, comm_, &req.handle),
                       "MPI_Isend");
#else
    (void)data, (void)tag;
#endif
    return req;
  }

  /// Starts receiving n elements from process `source` with tag `tag` into `data` (unread until
  /// the request completes).
  template <class T>
  Request receive_start(T* data, std::size_t n, int source, int tag) const {
    detail::require(n <= static_cast<std::size_t>(INT32_MAX) && source >= 0 && source < size_ && source != rank_,
                    "Communicator::receive_start", "cannot receive {} elements from process {} (this is {} of {})", n,
                    source, rank_, size_);
    Request req;
#if defined(CAUSALQWEN_MPI)
    detail_comm::check(MPI_Irecv(data, static_cast<int>(n), detail_comm::mpi_type<T>(), source, tag, comm_, &req.handle),
                       "MPI_Irecv");
#else
    (void)data, (void)tag;
#endif
    return req;
  }

  /// Waits until `req` is complete.
  void wait(Request& req) const {
#if defined(CAUSALQWEN_MPI)
    if (req.handle != MPI_REQUEST_NULL) detail_comm::check(MPI_Wait(&req.handle, MPI_STATUS_IGNORE), "MPI_Wait");
#else
    (void)req;
#endif
  }

  /// Lets started collectives progress (MPI moves them on only inside MPI calls); true when
  /// `req` is complete.
  bool test(Request& req) const {
#if defined(CAUSALQWEN_MPI)
    if (req.handle == MPI_REQUEST_NULL) return true;
    int done = 0;
    detail_comm::check(MPI_Test(&req.handle, &done, MPI_STATUS_IGNORE), "MPI_Test");
    return done != 0;
#else
    (void)req;
    return true;
#endif
  }

  void barrier() const {
#if defined(CAUSALQWEN_MPI)
    if (size_ > 1) detail_comm::check(MPI_Barrier(comm_), "MPI_Barrier");
#endif
  }

  /// Ends every process of the job with exit status `code` (a process alone: std::exit).
  [[noreturn]] void abort(int code) const {
#if defined(CAUSALQWEN_MPI)
    if (size_ > 1) MPI_Abort(comm_, code);
#endif
    std::exit(code);
  }

 private:
  /// f(r, at, n) for every piece of the range of every process r ≠ root: n ≤ 2^28 elements
  /// from ranges[r].begin + at (point-to-point transfers between root and r).
  template <class F>
  void for_each_piece(std::span<const ElementRange> ranges, int root, F&& f) const {
    for (int r = 0; r < size_; ++r) {
      if (r == root) continue;
      for (std::size_t at = 0; at < ranges[r].size(); at += detail_comm::max_piece)
        f(r, at, static_cast<int>(std::min(detail_comm::max_piece, ranges[r].size() - at)));
    }
  }

  void check_ranges(std::span<const ElementRange> ranges, const char* what) const {
    detail::require(ranges.size() == static_cast<std::size_t>(size_), what, "need one range per process ({}), got {}",
                    size_, ranges.size());
  }

  int rank_ = 0, size_ = 1;
  // scratch of sum and all_gather_ranges, kept so that a training step allocates nothing
  mutable std::vector<double> gathered_;
  mutable std::vector<int> counts_, offsets_;
#if defined(CAUSALQWEN_MPI)
  MPI_Comm comm_ = MPI_COMM_SELF;
#endif
};

}  // namespace causalqwen::dist
