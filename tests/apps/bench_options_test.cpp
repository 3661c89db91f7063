// bench_cifar's flags, matrix, scaling and report columns, without measuring anything.
#include <gtest/gtest.h>

#include <algorithm>
#include <tuple>

#include "apps/bench_cifar/bench_options.h"
#include "apps/bench_cifar/report.h"
#include "apps/bench_cifar/runner.h"
#include "tests/support/error_message.h"

namespace tandem::apps::bench {
namespace {

BenchOptions parse(std::vector<std::string> args) {
  args.insert(args.begin(), "bench_cifar");
  std::vector<const char*> argv;
  for (const std::string& arg : args) argv.push_back(arg.c_str());
  BenchOptions options;
  EXPECT_TRUE(parse_bench_options(static_cast<int>(argv.size()), argv.data(), options));
  return options;
}

std::vector<std::string> labels(const std::vector<BenchConfig>& configs) {
  std::vector<std::string> out;
  for (const BenchConfig& config : configs) out.push_back(config.label());
  return out;
}

TEST(BenchOptions, DefaultMatrixRunsSingleOnceAndEachCountOfDpAndDdp) {
  EXPECT_EQ(labels(expand_matrix(parse({}))),
            (std::vector<std::string>{"single x1 b128", "dp x1 b128", "dp x2 b128",
                                      "ddp x1 b128 overlap on", "ddp x2 b128 overlap on"}));
}

TEST(BenchOptions, OverlapBothGivesDdpTwoRowsPerCount) {
  const BenchOptions o = parse(
      {"--modes", "ddp,single", "--devices", "2", "--batch-sizes", "64,32", "--overlap", "both"});
  EXPECT_EQ(labels(expand_matrix(o)),
            (std::vector<std::string>{"ddp x2 b64 overlap on", "ddp x2 b64 overlap off",
                                      "single x1 b64", "ddp x2 b32 overlap on",
                                      "ddp x2 b32 overlap off", "single x1 b32"}));
}

TEST(BenchOptions, EachGradientCompressionIsADdpRow) {
  const BenchOptions o =
      parse({"--modes", "single,ddp", "--devices", "2", "--grad-compression", "none,bf16,fp16"});
  EXPECT_EQ(
      labels(expand_matrix(o)),
      (std::vector<std::string>{"single x1 b128", "ddp x2 b128 overlap on",
                                "ddp x2 b128 overlap on bf16", "ddp x2 b128 overlap on fp16"}));
  const auto args = worker_arguments(o, expand_matrix(o)[2], "r.json");
  EXPECT_EQ(worker_config(parse({args.begin(), args.end()})).compression,
            parallel::GradCompression::BFloat16);
}

TEST(BenchOptions, EachZeroStageIsADdpRow) {
  const BenchOptions o = parse({"--modes", "single,ddp", "--devices", "2", "--zero", "0,1,2"});
  EXPECT_EQ(
      labels(expand_matrix(o)),
      (std::vector<std::string>{"single x1 b128", "ddp x2 b128 overlap on",
                                "ddp x2 b128 overlap on zero 1", "ddp x2 b128 overlap on zero 2"}));
  const auto args = worker_arguments(o, expand_matrix(o)[3], "r.json");
  EXPECT_EQ(worker_config(parse({args.begin(), args.end()})).sharding,
            parallel::Sharding::Gradients);
  EXPECT_FALSE(expand_matrix(o)[0].sharding.has_value());  // not a ddp row
}

TEST(BenchOptions, EachDpReplicaChoiceIsADpRow) {
  const BenchOptions o =
      parse({"--modes", "dp,ddp", "--devices", "2", "--dp-replicas", "persistent,rebuilt"});
  const std::vector<BenchConfig> configs = expand_matrix(o);
  EXPECT_EQ(labels(configs), (std::vector<std::string>{"dp x2 b128", "dp x2 b128 rebuilt replicas",
                                                       "ddp x2 b128 overlap on"}));
  EXPECT_EQ(configs[1].dp_replicas, Replicas::Rebuilt);
  EXPECT_EQ(configs[2].dp_replicas, std::nullopt);  // a dp choice only
  const auto args = worker_arguments(o, configs[1], "r.json");
  EXPECT_EQ(worker_config(parse({args.begin(), args.end()})), configs[1]);
}

TEST(BenchOptions, EachPrecisionIsARowNextToItsTwin) {
  const BenchOptions o = parse(
      {"--modes", "single,ddp", "--devices", "2", "--precision", "fp32,bf16", "--allow-slow-bf16"});
  const std::vector<BenchConfig> configs = expand_matrix(o);
  EXPECT_EQ(labels(configs), (std::vector<std::string>{"single x1 b128", "single x1 b128 amp bf16",
                                                       "ddp x2 b128 overlap on",
                                                       "ddp x2 b128 overlap on amp bf16"}));
  const auto args = worker_arguments(o, configs[3], "r.json");
  const auto flag = std::find(args.begin(), args.end(), "--precision");
  ASSERT_NE(flag, args.end());
  EXPECT_EQ(*(flag + 1), "bf16");
  EXPECT_NE(std::find(args.begin(), args.end(), "--allow-slow-bf16"), args.end());
  std::vector<const char*> argv{"bench_cifar"};
  for (const std::string& arg : args) argv.push_back(arg.c_str());
  BenchOptions worker;
  ASSERT_TRUE(parse_bench_options(static_cast<int>(argv.size()), argv.data(), worker));
  EXPECT_EQ(worker_config(worker), configs[3]) << "the worker measures the row it was given";
  EXPECT_NE(testing::error_message([] {
              parse({"--precision", "fp16"});
            }).find("--precision"),
            std::string::npos);
}

// Note [Typed options]: every word a flag takes names its value, in any case; the JSON and the
// workers get the value's name back.
TEST(BenchOptions, ChoicesAreParsedIntoTheirEnums) {
  EXPECT_EQ(parse({}).device_type, DeviceType::Auto);
  EXPECT_EQ(parse({"--device-type", "cuda"}).device_type, DeviceType::Cuda);
  EXPECT_EQ(parse({"--device-type", "CPU"}).device_type, DeviceType::Cpu);
  EXPECT_EQ(parse({}).overlaps, std::vector<Overlap>{Overlap::On});
  EXPECT_EQ(parse({"--overlap", "off"}).overlaps, std::vector<Overlap>{Overlap::Off});
  EXPECT_EQ(parse({"--overlap", "both"}).overlaps,
            (std::vector<Overlap>{Overlap::On, Overlap::Off}));
  EXPECT_EQ(parse({"--dp-replicas", "rebuilt,persistent"}).dp_replicas,
            (std::vector<Replicas>{Replicas::Rebuilt, Replicas::Persistent}));
  EXPECT_EQ(parse({}).link, Link::NvLink);
  EXPECT_EQ(parse({"--link", "pcie"}).link, Link::Pcie);
  EXPECT_EQ(parse({"--link", "both"}).link, Link::Both);
  EXPECT_EQ(parse({"--grad-compression", "fp16,none"}).compressions,
            (std::vector<parallel::GradCompression>{parallel::GradCompression::Float16,
                                                    parallel::GradCompression::None}));
  EXPECT_EQ(parse({}).setup.memory_format, std::nullopt);
  EXPECT_EQ(parse({"--memory-format", "nhwc"}).setup.memory_format, MemoryFormat::ChannelsLast);
  EXPECT_EQ(parse({}).setup.ddp.reducer.bucket_cap_mb, parallel::ReducerOptions{}.bucket_cap_mb);
  EXPECT_EQ(parse({}).setup.ddp.reducer.first_bucket_mb,
            parallel::ReducerOptions{}.first_bucket_mb);
  EXPECT_EQ(parse({"--first-bucket-mb", "2"}).setup.ddp.reducer.first_bucket_mb, 2);
}

TEST(BenchOptions, ModesAreParsedIntoTheEnum) {
  EXPECT_EQ(parse({"--modes", "ddp,single"}).modes,
            (std::vector<Mode>{Mode::Distributed, Mode::Single}));
  EXPECT_EQ(parse({}).modes,
            (std::vector<Mode>{Mode::Single, Mode::DataParallel, Mode::Distributed}));
}

TEST(BenchOptions, RepeatsDefaultToThreeAndAreOneLineErrorsWhenNotACount) {
  EXPECT_EQ(parse({}).repeats, 3);
  EXPECT_EQ(parse({"--repeats", "1"}).repeats, 1);
  for (const auto& [value, message] :
       {std::pair<std::string, std::string>{"0", "--repeats: must be > 0, got 0"},
        {"-2", "--repeats: must be > 0, got -2"},
        {"abc", "--repeats: must be a whole number > 0, got 'abc'"},
        {"1.5", "--repeats: must be a whole number > 0, got '1.5'"},
        {"99999999999", "--repeats: must be a whole number > 0, got '99999999999'"}}) {
    const char* argv[] = {"bench_cifar", "--repeats", value.c_str()};
    BenchOptions options;
    // The error carries the file:line of its check after the message.
    EXPECT_EQ(testing::error_message([&] {
                parse_bench_options(3, argv, options);
              }).rfind("[bench_cifar] " + message + " (see --help)", 0),
              0u);
  }
}

// The issue #45 trial: an empty --batch-sizes read "Value  not in range 1 to 1048576".
TEST(BenchOptions, EmptyOrZeroCountsInListsSayWhatTheyMustBe) {
  for (const auto& [flag, value, message] :
       {std::tuple<std::string, std::string, std::string>{
            "--batch-sizes", "", "--batch-sizes: must be a whole number > 0, got ''"},
        {"--batch-sizes", "128,0", "--batch-sizes: must be > 0, got 0"},
        {"--devices", "0", "--devices: must be > 0, got 0"}}) {
    const char* argv[] = {"bench_cifar", flag.c_str(), value.c_str()};
    BenchOptions options;
    const std::string error =
        testing::error_message([&] { parse_bench_options(3, argv, options); });
    EXPECT_EQ(error.rfind("[bench_cifar] " + message + " (see --help)", 0), 0u) << error;
  }
}

TEST(BenchOptions, RepeatedValuesDoNotRepeatRows) {
  EXPECT_EQ(expand_matrix(parse({"--modes", "dp,dp", "--devices", "2,2"})).size(), 1u);
}

TEST(BenchOptions, BadValuesAreOneLineErrors) {
  for (const std::vector<std::string>& args : {std::vector<std::string>{"--bogus"},
                                               {"--modes", "fsdp"},
                                               {"--overlap", "maybe"},
                                               {"--grad-compression", "int8"},
                                               {"--devices", "0"},
                                               {"--link", "infiniband"},
                                               {"--dp-replicas", "cached"},
                                               {"--csv", "bench.csv"},
                                               {"--steps", "0"}}) {
    std::vector<const char*> argv{"bench_cifar"};
    for (const std::string& arg : args) argv.push_back(arg.c_str());
    BenchOptions options;
    const std::string message = testing::error_message(
        [&] { parse_bench_options(static_cast<int>(argv.size()), argv.data(), options); });
    EXPECT_EQ(message.rfind("[bench_cifar] ", 0), 0u) << message;
    EXPECT_NE(message.find(args[0]), std::string::npos) << message;
  }
}

TEST(BenchOptions, ConfigurationsThatCannotRunSayWhy) {
  EXPECT_EQ(
      config_problem({.mode = Mode::Distributed, .devices = 2, .batch = 8, .overlap = Overlap::On}),
      "");
  EXPECT_EQ(
      config_problem({.mode = Mode::Distributed, .devices = 3, .batch = 8, .overlap = Overlap::On}),
      "[bench_cifar] batch 8 does not split evenly over 3 processes");
  EXPECT_EQ(config_problem({.mode = Mode::DataParallel, .devices = 3, .batch = 8}),
            "");  // uneven chunks are fine
  EXPECT_EQ(config_problem({.mode = Mode::DataParallel, .devices = 4, .batch = 2}),
            "[bench_cifar] batch 2 is smaller than the 4 devices it is split over");
}

TEST(BenchOptions, WorkerArgumentsDescribeTheirConfiguration) {
  const BenchOptions parent = parse({"--arch", "resnet32", "--bucket-cap-mb", "0.25", "--steps",
                                     "3", "--real", "--data-dir", "/data", "--device-type", "cpu"});
  const BenchConfig config{.mode = Mode::Distributed,
                           .devices = 4,
                           .batch = 64,
                           .overlap = Overlap::Off,
                           .compression = parallel::GradCompression::None,
                           .sharding = parallel::Sharding::Optimizer};
  const BenchOptions worker = parse(worker_arguments(parent, config, "/tmp/result.json"));
  EXPECT_EQ(worker.worker_json, "/tmp/result.json");
  EXPECT_EQ(worker_config(worker), config);
  EXPECT_EQ(worker.setup.arch, "resnet32");
  EXPECT_EQ(worker.setup.ddp.reducer.bucket_cap_mb, 0.25);
  EXPECT_EQ(worker.steps, 3);
  EXPECT_TRUE(worker.real);
  EXPECT_EQ(worker.data_dir, "/data");
  EXPECT_EQ(worker.device_type, DeviceType::Cpu);
  EXPECT_FALSE(worker.phase_sync);
  BenchOptions synced = parent;
  synced.phase_sync = true;
  EXPECT_TRUE(parse(worker_arguments(synced, config, "r.json")).phase_sync);
  EXPECT_TRUE(worker.verify_data);
  BenchOptions own_data = parent;  // a data set of one's own in CIFAR-10's format
  own_data.verify_data = false;
  EXPECT_FALSE(parse(worker_arguments(own_data, config, "r.json")).verify_data);
  const BenchConfig single{.mode = Mode::Single, .devices = 1, .batch = 32};
  EXPECT_EQ(worker_config(parse(worker_arguments(parent, single, "r.json"))), single);
}

// Note [Options bound once]: the flags every row shares land in the setup as given; each row
// sets its own variant on a copy.
TEST(BenchOptions, EachRowBuildsTheSharedSetupWithItsVariant) {
  const BenchOptions o =
      parse({"--arch", "resnet32", "--seed", "7", "--memory-format", "nchw", "--bucket-cap-mb",
             "0.25", "--first-bucket-mb", "0.125", "--allow-slow-bf16"});
  const SetupOptions ddp = setup_options(o, {.mode = Mode::Distributed,
                                             .devices = 2,
                                             .overlap = Overlap::Off,
                                             .compression = parallel::GradCompression::BFloat16,
                                             .sharding = parallel::Sharding::Gradients,
                                             .precision = nn::Precision::BFloat16});
  EXPECT_EQ(ddp.mode, Mode::Distributed);
  EXPECT_EQ(ddp.arch, "resnet32");
  EXPECT_EQ(ddp.seed, 7u);
  EXPECT_EQ(ddp.memory_format, MemoryFormat::Contiguous);
  EXPECT_EQ(ddp.ddp.reducer.bucket_cap_mb, 0.25);
  EXPECT_EQ(ddp.ddp.reducer.first_bucket_mb, 0.125);
  EXPECT_FALSE(ddp.ddp.reducer.overlap);
  EXPECT_EQ(ddp.grad_compression, parallel::GradCompression::BFloat16);
  EXPECT_EQ(ddp.ddp.sharding, parallel::Sharding::Gradients);
  EXPECT_EQ(ddp.precision, nn::Precision::BFloat16);
  EXPECT_TRUE(ddp.allow_slow_bf16);
  EXPECT_FLOAT_EQ(ddp.sgd.lr, 0.05f);  // as the timed steps have always run
  EXPECT_FLOAT_EQ(ddp.sgd.weight_decay, 5e-4f);
  const SetupOptions dp = setup_options(
      o, {.mode = Mode::DataParallel, .devices = 2, .dp_replicas = Replicas::Rebuilt});
  EXPECT_EQ(dp.mode, Mode::DataParallel);
  EXPECT_FALSE(dp.dp.persistent_replicas);
  EXPECT_TRUE(dp.ddp.reducer.overlap);
  EXPECT_EQ(dp.grad_compression, parallel::GradCompression::None);
  EXPECT_EQ(dp.ddp.sharding, parallel::Sharding::None);
  EXPECT_EQ(dp.precision, nn::Precision::Float32);
}

BenchRow measured_row(BenchConfig config, double images_per_s) {
  BenchRow row{.config = std::move(config)};
  row.measured = Measurement{};
  row.measured->images_per_s = images_per_s;
  return row;
}

TEST(BenchOptions, ScalingIsAgainstSingleAtTheSameBatch) {
  std::vector<BenchRow> rows{
      measured_row({.mode = Mode::Single, .devices = 1, .batch = 64}, 100),
      measured_row({.mode = Mode::DataParallel, .devices = 2, .batch = 64}, 150),
      measured_row({.mode = Mode::DataParallel, .devices = 2, .batch = 32}, 80),
      measured_row({.mode = Mode::DataParallel, .devices = 1, .batch = 32}, 50),
      BenchRow{.config = {.mode = Mode::DataParallel, .devices = 4, .batch = 32}}};
  add_scaling(rows);
  EXPECT_DOUBLE_EQ(rows[0].measured->speedup, 1.0);
  EXPECT_DOUBLE_EQ(rows[1].measured->speedup, 1.5);
  EXPECT_DOUBLE_EQ(rows[1].measured->efficiency, 0.75);
  // No single row at batch 32: the same mode's one-device row is the baseline.
  EXPECT_DOUBLE_EQ(rows[2].measured->speedup, 1.6);
  EXPECT_DOUBLE_EQ(rows[2].measured->efficiency, 0.8);
  EXPECT_FALSE(rows[4].measured.has_value());  // failed rows have no scaling either
}

TEST(BenchOptions, JsonRowsHaveEveryColumnInOrder) {
  BenchOptions options;
  const BenchRow ok = measured_row({.mode = Mode::DataParallel, .devices = 2, .batch = 64}, 150);
  const BenchRow failed{
      .config = {.mode = Mode::Distributed, .devices = 3, .batch = 8, .overlap = Overlap::On},
      .error = "[bench_cifar] no"};
  for (const BenchRow& row : {ok, failed}) {
    std::vector<std::string> keys;
    const nlohmann::ordered_json object = row_to_json(row, options);
    for (const auto& [key, value] : object.items()) keys.push_back(key);
    EXPECT_EQ(keys, row_columns());
  }
  EXPECT_TRUE(row_to_json(ok, options)["comm_ms"].is_null());  // a ddp column on a dp row
  EXPECT_EQ(row_to_json(ok, options)["scatter_ms"], 0.0);
  EXPECT_TRUE(row_to_json(ok, options)["speedup"].is_null());  // no baseline row
  EXPECT_EQ(row_to_json(ok, options)["mode"], "dp");
  EXPECT_EQ(row_to_json(failed, options)["error"], "[bench_cifar] no");
  EXPECT_TRUE(row_to_json(failed, options)["images_per_s"].is_null());
}

}  // namespace
}  // namespace tandem::apps::bench
