// dist/: data-parallel training. Run by ctest as `mpirun -np 2 test_data_parallel` (and, in a
// build without MPI, as one process, where only the single-process cases run):
//   - the parameter ranges and the sharded AdamW (ZeRO-1) against the whole AdamW, in one process;
//   - a backward pass reports which gradients are final, and they do not change afterwards;
//   - 20 steps on 2 processes give the losses of 1 process with the same global batch (float64
//     within 1e-6 relative, float32 within 1e-4), every process ends with the same parameters,
//     and each holds half the optimiser state;
//   - two 2-process runs are bit-identical;
//   - a 2-process checkpoint resumed by 1 process, and a 1-process checkpoint by 2, continue the
//     trajectory of an uninterrupted run;
//   - the same with bfloat16 moments (sharded, stochastic rounding keyed on the parameter index).
#define DOCTEST_CONFIG_IMPLEMENT
#include <causalqwen/dist/communicator.hpp>
#include <causalqwen/dist/gradient_buckets.hpp>
#include <causalqwen/train.hpp>
#include <doctest/doctest.h>

#include "../support/test_support.hpp"
#include "../train/tiny_sources.hpp"

#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>

namespace cq = causalqwen;
namespace ct = causalqwen::train;
namespace fs = std::filesystem;

namespace {

cq::dist::Communicator world() { return cq::dist::Communicator::world(); }

/// A directory of the same name on every process (process 0's pid), emptied.
fs::path shared_dir(const std::string& name) {
  const auto comm = world();
  const double pid = comm.sum(comm.is_root() ? static_cast<double>(::getpid()) : 0.0);
  const auto dir = fs::temp_directory_path() / fmt::format("cq_dp_{}_{}", name, static_cast<long>(pid));
  if (comm.is_root()) {
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  comm.barrier();
  return dir;
}

/// A hash of the bytes of `x` (FNV-1a), as a double every process can all_gather exactly.
template <class T>
double bytes_hash(std::span<const T> x) {
  std::uint64_t h = 1469598103934665603ull;
  const auto* p = reinterpret_cast<const unsigned char*>(x.data());
  for (std::size_t i = 0; i < x.size_bytes(); ++i) h = (h ^ p[i]) * 1099511628211ull;
  return static_cast<double>(h >> 12);  // 52 bits: exact in a double
}

struct RunResult {
  std::vector<nlohmann::json> records;  // process 0's metrics log (empty elsewhere)
  std::vector<double> params;
  std::size_t state_bytes = 0;
};

/// The tiny model trained on CountingTokenSource, global batch of 4 micro-batches of 2
/// sequences, sampling noise (so the RNG of skipped micro-batches matters), validation of 3
/// batches (split 2 + 1), buckets of 200 elements (several per step, started during backward).
template <class T>
RunResult train_tiny(cq::dist::Communicator comm, const fs::path& out, std::size_t steps, std::uint64_t seed,
                     bool resume = false, std::size_t checkpoint_every = 0,
                     cq::optim::MomentStorage moments = cq::optim::MomentStorage::full) {
  cq::model::CausalQwen<T> model(cqtest::tiny_config(10.0));
  model.init_random(seed);
  cqtest::CountingTokenSource<T> train(2, 9, 11, 11), val(2, 9, 11, 11, 1000);
  ct::ModelLearner<T> learner(model, train, &val);
  ct::TrainerOptions o;
  o.steps = steps;
  o.accumulation = 4;
  o.lr = {cq::optim::LrShape::warmup_cosine, 0.02, 3, 20, 0.1};
  o.alpha = {1.0, 0.0, 20};
  o.eval_every = 5;
  o.eval_batches = 3;
  o.clip = 0.5;  // clipping is active in the first steps: the global norm must be the whole one
  o.noise.mode = cq::model::ActionMode::sampling;
  o.noise.temperature = 0.5;
  o.seed = seed;
  o.out_dir = out;
  o.resume = resume;
  o.checkpoint_every = checkpoint_every;
  o.comm = comm;
  o.bucket_elements = 200;
  o.moments = moments;
  ct::Trainer<T> trainer(learner, o);
  trainer.run();
  RunResult r;
  if (comm.is_root()) r.records = ct::read_metrics(out / "metrics.jsonl");
  for (T v : model.params().span()) r.params.push_back(static_cast<double>(v));
  r.state_bytes = trainer.optimizer().state_bytes();
  return r;
}

/// max over records of |a − b| / max(|b|, 1e-12) for the loss fields and the gradient norm,
/// matching records by split and step (records of `a` not in `b` are ignored).
double max_relative_difference(const std::vector<nlohmann::json>& a, const std::vector<nlohmann::json>& b,
                               std::size_t* compared = nullptr) {
  double worst = 0;
  std::size_t n = 0;
  for (const auto& ra : a)
    for (const auto& rb : b) {
      if (ra["split"] != rb["split"] || ra["step"] != rb["step"]) continue;
      for (const char* key : {"L_total", "L_cls_mean", "L_reg_eff", "reg_mae", "accuracy", "grad_norm"}) {
        if (!rb.contains(key)) continue;
        const double x = ra[key].get<double>(), y = rb[key].get<double>();
        worst = std::max(worst, std::abs(x - y) / std::max(std::abs(y), 1e-12));
      }
      ++n;
    }
  if (compared) *compared = n;
  return worst;
}

bool two_processes() {
  if (world().size() == 2) return true;
  MESSAGE("this case needs 2 processes (mpirun -np 2): not run here");
  return false;
}

}  // namespace

TEST_CASE("started_by_mpirun: an environment with a launcher's variable, and not a plain one") {
  const char* mpirun[] = {"HOME=/root", "OMPI_COMM_WORLD_SIZE=2", nullptr};
  const char* pmix[] = {"PMIX_RANK=0", nullptr};
  const char* plain[] = {"HOME=/root", "OMPI_COMM_WORLD_SIZEX=2", "PMI_SIZE", "XPMI_SIZE=2", nullptr};
  const char* empty[] = {nullptr};
  CHECK(cq::dist::started_by_mpirun(mpirun));
  CHECK(cq::dist::started_by_mpirun(pmix));
  CHECK_FALSE(cq::dist::started_by_mpirun(plain));
  CHECK_FALSE(cq::dist::started_by_mpirun(empty));
  CHECK_FALSE(cq::dist::started_by_mpirun(nullptr));
}

TEST_CASE("shard_ranges: consecutive aligned ranges covering every element once") {
  for (std::size_t total : {0u, 1u, 15u, 16u, 17u, 1000u, 12345u})
    for (std::size_t parts : {1u, 2u, 3u, 7u}) {
      const auto r = cq::shard_ranges(total, parts, 16);
      REQUIRE(r.size() == parts);
      CHECK(r.front().begin == 0);
      CHECK(r.back().end == total);
      std::size_t biggest = 0, smallest = total;
      for (std::size_t i = 0; i < parts; ++i) {
        CHECK(r[i].begin <= r[i].end);
        if (i > 0) CHECK(r[i].begin == r[i - 1].end);
        if (r[i].end < total) CHECK(r[i].end % 16 == 0);
        biggest = std::max(biggest, r[i].size()), smallest = std::min(smallest, r[i].size());
      }
      CHECK(biggest - smallest <= 16);
    }
}

/// The moment arenas of `adam` as bytes (T or bfloat16 bits, by its storage).
template <class T>
std::array<std::span<const std::byte>, 2> moment_bytes(cq::optim::AdamW<T>& adam) {
  if (adam.moment_storage() == cq::optim::MomentStorage::full)
    return {std::as_bytes(adam.first_moment().span()), std::as_bytes(adam.second_moment().span())};
  return {std::as_bytes(adam.first_moment_bf16().span()), std::as_bytes(adam.second_moment_bf16().span())};
}

/// AdamW over two shards against AdamW over everything (see the test cases below).
template <class T>
void check_sharded_adamw(cq::optim::MomentStorage storage) {
  const auto seed = cqtest::test_seed(11, "sharded adamw");
  cq::model::CausalQwen<T> model(cqtest::tiny_config(10.0));
  model.init_random(seed);
  const auto layout = model.params().shared_layout();
  cq::ParamRules rules;
  rules.no_decay.insert("model.norm.weight");
  rules.frozen.insert("model.layers.0.mlp.up_proj.weight");
  cq::Arena<T> whole_params(layout), shard_params(layout), grads(layout);
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal;
  for (std::size_t i = 0; i < layout->total(); ++i) whole_params.data()[i] = static_cast<T>(normal(rng));
  std::copy_n(whole_params.data(), layout->total(), shard_params.data());
  cq::optim::AdamW<T> whole(layout, {}, rules, storage);
  const auto ranges = cq::shard_ranges(layout->total(), 2);
  cq::optim::AdamW<T> first(layout, {}, rules, storage, ranges[0]), second(layout, {}, rules, storage, ranges[1]);
  for (int step = 0; step < 5; ++step) {
    for (std::size_t i = 0; i < layout->total(); ++i) grads.data()[i] = static_cast<T>(normal(rng));
    whole.step(whole_params, grads, 1e-2, 0.7);
    for (auto* shard : {&first, &second})
      shard->step(shard_params, std::span<const T>(grads.data() + shard->owned().begin, shard->owned().size()), 1e-2, 0.7);
  }
  CHECK(std::memcmp(whole_params.data(), shard_params.data(), layout->total() * sizeof(T)) == 0);
  const std::size_t element_bytes = storage == cq::optim::MomentStorage::full ? sizeof(T) : 2;
  CHECK(first.state_bytes() + second.state_bytes() == whole.state_bytes());
  CHECK(whole.state_bytes() == 2 * layout->total() * element_bytes);
  CHECK(first.state_bytes() <= whole.state_bytes() / 2 + 16 * 2 * element_bytes);
  // the shards' moments are the whole optimiser's, and so are those a checkpoint's file gives back
  const auto dir = fs::temp_directory_path() / fmt::format("cq_dp_moments_{}_{}", ::getpid(), world().rank());
  fs::create_directories(dir);
  cq::format::SafetensorsWriter w;
  ct::add_moments(w, whole);
  w.write(dir / "optimizer.safetensors");
  const auto f = cq::format::SafetensorsFile::open(dir / "optimizer.safetensors");
  const auto all = moment_bytes(whole);
  for (auto* shard : {&first, &second}) {
    cq::optim::AdamW<T> fresh(layout, {}, rules, storage, shard->owned());
    ct::read_moments(f, fresh);
    const std::size_t at = shard->owned().begin * element_bytes, n = shard->owned().size() * element_bytes;
    for (int k = 0; k < 2; ++k) {
      CHECK(std::memcmp(moment_bytes(*shard)[k].data(), all[k].data() + at, n) == 0);
      CHECK(std::memcmp(moment_bytes(fresh)[k].data(), all[k].data() + at, n) == 0);
    }
  }
  // a shard cannot be written as if it were the whole
  cq::format::SafetensorsWriter w2;
  CHECK_THROWS_WITH_AS(ct::add_moments(w2, first), doctest::Contains("one shard"), cq::DomainError);
  fs::remove_all(dir);
}

TEST_CASE_TEMPLATE("AdamW over two shards equals AdamW over everything, with half the state each", T, float, double) {
  check_sharded_adamw<T>(cq::optim::MomentStorage::full);
}

TEST_CASE("bfloat16 moments: AdamW over two shards equals AdamW over everything, bit for bit") {
  check_sharded_adamw<float>(cq::optim::MomentStorage::bf16);
}

TEST_CASE("gradient buckets: each process receives the sum over processes of its range, exactly") {
  if (!two_processes()) return;
  const auto comm = world();
  auto layout = std::make_shared<cq::Layout>();
  layout->add("w", {1003});
  cq::Arena<double> grads(layout);
  const auto ranges = cq::shard_ranges(layout->total(), 2);
  // buckets of 37 elements: they straddle the two ranges, and the staging buffer (4 buckets)
  // fills up and is emptied during the step; three steps reuse everything
  cq::dist::GradientBuckets<double> buckets(comm, ranges, 37);
  std::vector<double> owned(ranges[comm.rank()].size());
  for (int step = 0; step < 3; ++step) {
    for (std::size_t i = 0; i < grads.size(); ++i) grads.data()[i] = std::ldexp(static_cast<double>(i + 1), comm.rank() + step);
    buckets.begin(grads, owned);
    for (std::size_t offset : {900u, 700u, 650u, 200u}) buckets.final_from(offset);
    buckets.finish();
    CHECK(buckets.elements() == layout->total());
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < owned.size(); ++i)  // (i+1)·2^step + (i+1)·2^(step+1), exact
      wrong += owned[i] != 3.0 * std::ldexp(static_cast<double>(ranges[comm.rank()].begin + i + 1), step);
    CHECK_MESSAGE(wrong == 0, "step ", step);
  }
}

/// Records what a backward pass reports: each offset, and the gradients from it to the end as
/// they were when it was reported.
struct ProgressRecorder final : cq::linalg::GradientProgress {
  const cq::Arena<double>* grads = nullptr;
  std::vector<std::size_t> offsets;
  std::vector<std::vector<double>> snapshots;
  void final_from(std::size_t offset) override {
    offsets.push_back(offset);
    snapshots.emplace_back(grads->data() + offset, grads->data() + grads->size());
  }
};

TEST_CASE("a backward pass reports final gradients from the heads down to the embeddings, and keeps its word") {
  const auto seed = cqtest::test_seed(17, "gradient progress");
  auto cfg = cqtest::tiny_config(10.0);
  cfg.backbone.num_layers = 3;
  cq::model::CausalQwen<double> model(cfg);
  model.init_random(seed);
  cqtest::CountingTokenSource<double> source(2, 9, 11, 11);
  const auto batch = source.next();
  typename cq::model::CausalQwen<double>::Cache cache;
  auto grads = model.make_gradients();
  ProgressRecorder recorder;
  recorder.grads = &grads;
  model.train_step(batch.view(), cache, cq::linalg::GradientTarget<double>(grads, nullptr, &recorder));
  // heads, final norm, layers 2, 1, 0, embeddings: 6 reports, decreasing, the last at 0
  REQUIRE(recorder.offsets.size() == 6);
  CHECK(recorder.offsets.back() == 0);
  for (std::size_t i = 1; i < recorder.offsets.size(); ++i) CHECK(recorder.offsets[i] < recorder.offsets[i - 1]);
  CHECK(recorder.offsets[2] == model.layout().slot("model.layers.2.input_layernorm.weight").offset);
  // what was reported final did not change afterwards
  for (std::size_t i = 0; i < recorder.offsets.size(); ++i)
    CHECK_MESSAGE(std::memcmp(recorder.snapshots[i].data(), grads.data() + recorder.offsets[i],
                              recorder.snapshots[i].size() * sizeof(double)) == 0,
                  "report ", i, " at offset ", recorder.offsets[i]);
  // and every slot got a gradient somewhere (the reports cover the whole arena)
  std::size_t nonzero = 0;
  for (double g : grads.span()) nonzero += g != 0;
  CHECK(nonzero > grads.size() / 2);
}

TEST_CASE_TEMPLATE("2 processes train as 1 process with the same global batch; each holds half the optimiser state",
                   T, double, float) {
  if (!two_processes()) return;
  const auto comm = world();
  const std::uint64_t seed = static_cast<std::uint64_t>(comm.sum(comm.is_root() ? cqtest::test_seed(7, "data parallel") : 0));
  const auto two = shared_dir("two"), one = shared_dir("one");
  const auto dp = train_tiny<T>(comm, two, 20, seed);
  // the reference: one process alone with the same global batch (process 0 runs it)
  if (comm.is_root()) {
    const auto single = train_tiny<T>(cq::dist::Communicator::local(), one, 20, seed);
    std::size_t compared = 0;
    const double worst = max_relative_difference(dp.records, single.records, &compared);
    const double tolerance = std::is_same_v<T, double> ? 1e-6 : 1e-4;
    MESSAGE("max relative difference of the losses and norms over ", compared, " records: ", worst);
    CHECK(compared == 20 + 4);  // 20 steps and 4 validations
    CHECK(worst <= tolerance);
    double param_diff = 0;
    for (std::size_t i = 0; i < dp.params.size(); ++i)
      param_diff = std::max(param_diff, std::abs(dp.params[i] - single.params[i]));
    MESSAGE("max |Δθ| after 20 steps: ", param_diff);
    CHECK(param_diff <= (std::is_same_v<T, double> ? 1e-9 : 1e-4));
    // ZeRO-1: each process holds half the moments of the single process (± one alignment block)
    MESSAGE("optimiser state: ", dp.state_bytes, " bytes per process, ", single.state_bytes, " for one process");
    CHECK(2 * dp.state_bytes >= single.state_bytes - 2 * 16 * 2 * sizeof(T));
    CHECK(2 * dp.state_bytes <= single.state_bytes + 2 * 16 * 2 * sizeof(T));
    // the log says how many processes and how long they talked
    CHECK(dp.records.front()["processes"] == 2);
    CHECK(dp.records.front().contains("comm_seconds"));
  }
  // every process ends with the same parameters, bit for bit
  const double mine = bytes_hash(std::span<const double>(dp.params));
  std::vector<double> all(2);
  comm.all_gather(std::span<const double>(&mine, 1), all);
  CHECK(all[0] == all[1]);
  comm.barrier();
  if (comm.is_root()) fs::remove_all(two), fs::remove_all(one);
}

TEST_CASE("two 2-process runs are bit-identical") {
  if (!two_processes()) return;
  const auto comm = world();
  const std::uint64_t seed = static_cast<std::uint64_t>(comm.sum(comm.is_root() ? cqtest::test_seed(9, "dp bitwise") : 0));
  const auto a_dir = shared_dir("bitwise_a"), b_dir = shared_dir("bitwise_b");
  const auto a = train_tiny<float>(comm, a_dir, 12, seed), b = train_tiny<float>(comm, b_dir, 12, seed);
  CHECK(a.params == b.params);
  if (comm.is_root()) {
    REQUIRE(a.records.size() == b.records.size());
    for (std::size_t i = 0; i < a.records.size(); ++i)
      for (const char* key : {"L_total", "L_cls_mean", "L_reg_eff", "grad_norm"})
        if (a.records[i].contains(key)) CHECK_MESSAGE(a.records[i][key] == b.records[i][key], key, " at record ", i);
  }
  comm.barrier();
  if (comm.is_root()) fs::remove_all(a_dir), fs::remove_all(b_dir);
}

/// The records after step `from` of `records`.
static std::vector<nlohmann::json> records_after(const std::vector<nlohmann::json>& records, int from) {
  std::vector<nlohmann::json> out;
  for (const auto& r : records)
    if (r["step"].get<int>() > from) out.push_back(r);
  return out;
}

TEST_CASE("checkpoints move between process counts: 2 → 1 and 1 → 2 continue the same trajectory") {
  if (!two_processes()) return;
  const auto comm = world();
  const auto local = cq::dist::Communicator::local();
  const std::uint64_t seed = static_cast<std::uint64_t>(comm.sum(comm.is_root() ? cqtest::test_seed(13, "dp resume") : 0));
  const auto two_then_one = shared_dir("two_then_one"), one_then_two = shared_dir("one_then_two"),
             straight = shared_dir("straight");
  RunResult ref;
  if (comm.is_root()) ref = train_tiny<double>(local, straight, 20, seed);  // uninterrupted, one process
  // 2 processes to step 10 (checkpoints at 5 and 10), then process 0 alone to 20
  train_tiny<double>(comm, two_then_one, 10, seed, false, 5);
  if (comm.is_root()) {
    const auto cont = train_tiny<double>(local, two_then_one, 20, seed, /*resume=*/true);
    std::size_t compared = 0;
    const double worst = max_relative_difference(records_after(cont.records, 10), ref.records, &compared);
    MESSAGE("steps 11-20 on 1 process after 10 on 2: max relative difference ", worst);
    CHECK(compared == 10 + 2);
    CHECK(worst <= 1e-6);
  }
  // process 0 alone to step 10, then 2 processes to 20 (process 0 reads the checkpoint, sends the parts)
  if (comm.is_root()) train_tiny<double>(local, one_then_two, 10, seed, false, 5);
  comm.barrier();
  const auto cont = train_tiny<double>(comm, one_then_two, 20, seed, /*resume=*/true);
  if (comm.is_root()) {
    std::size_t compared = 0;
    const double worst = max_relative_difference(records_after(cont.records, 10), ref.records, &compared);
    MESSAGE("steps 11-20 on 2 processes after 10 on 1: max relative difference ", worst);
    CHECK(compared == 10 + 2);
    CHECK(worst <= 1e-6);
  }
  comm.barrier();
  if (comm.is_root()) fs::remove_all(two_then_one), fs::remove_all(one_then_two), fs::remove_all(straight);
}

TEST_CASE("bfloat16 moments: 2 processes train as 1 with a quarter of the float state each, and resume on 1") {
  if (!two_processes()) return;
  const auto comm = world();
  const auto local = cq::dist::Communicator::local();
  const auto bf16 = cq::optim::MomentStorage::bf16;
  const std::uint64_t seed = static_cast<std::uint64_t>(comm.sum(comm.is_root() ? cqtest::test_seed(19, "dp bf16") : 0));
  const auto two = shared_dir("bf16_two"), one = shared_dir("bf16_one"), resumed = shared_dir("bf16_resumed");
  const auto dp = train_tiny<float>(comm, two, 20, seed, false, 0, bf16);
  train_tiny<float>(comm, resumed, 10, seed, false, 10, bf16);  // 2 processes to step 10, then 1 from its checkpoint
  if (comm.is_root()) {
    const auto single = train_tiny<float>(local, one, 20, seed, false, 0, bf16);
    std::size_t compared = 0;
    const double worst = max_relative_difference(dp.records, single.records, &compared);
    MESSAGE("bfloat16 moments, 2 processes against 1: max relative difference over ", compared, " records: ", worst);
    CHECK(compared == 20 + 4);
    CHECK(worst <= 1e-4);
    MESSAGE("bfloat16 moments: ", dp.state_bytes, " bytes per process, ", single.state_bytes, " for one process");
    // two bfloat16 moments (4 bytes) per element of one process, for half the elements (± one alignment block)
    const std::size_t elements = dp.params.size(), half = (elements + 1) / 2;
    CHECK(single.state_bytes == 4 * elements);
    CHECK(dp.state_bytes >= 4 * (half - 16));
    CHECK(dp.state_bytes <= 4 * (half + 16));
    const auto cont = train_tiny<float>(local, resumed, 20, seed, /*resume=*/true, 0, bf16);
    const double after = max_relative_difference(records_after(cont.records, 10), single.records, &compared);
    MESSAGE("bfloat16 moments, steps 11-20 on 1 process after 10 on 2: max relative difference ", after);
    CHECK(compared == 10 + 2);
    CHECK(after <= 1e-4);
  }
  comm.barrier();
  if (comm.is_root()) fs::remove_all(two), fs::remove_all(one), fs::remove_all(resumed);
}

int main(int argc, char** argv) {
  cq::dist::Session mpi(&argc, &argv, cq::dist::started_by_mpirun(environ));
  cq::set_threads(1);  // two processes share the two cores
  doctest::Context context(argc, argv);
  const int failed = context.run();
  // a failure on one process must fail the job: every process reports the worst status
  const auto comm = world();
  const double worst = comm.sum(failed != 0 ? 1.0 : 0.0);
  return worst > 0 ? 1 : 0;
}
