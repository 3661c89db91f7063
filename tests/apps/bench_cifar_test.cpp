// bench_cifar as a user runs it: the program itself, in a child process, on tiny configurations.
// No timing assertions: the numbers only have to be there, positive and the same in every output.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "apps/bench_cifar/report.h"
#include "engine/cpu_features.h"
#include "engine/device_runtime.h"
#include "tests/support/mpirun_ranks.h"
#include "tests/support/run_program.h"
#include "tests/support/temp_dir.h"
#include "tests/support/test_paths.h"

namespace tandem::apps::bench {
namespace {

using nlohmann::json;
using testing::TempDir;

using testing::ProgramRun;

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

ProgramRun bench_cifar(const std::vector<std::string>& args, const TempDir& dir,
                       bool merge = false) {
  return testing::run_program(testing::kBenchCifarProgram, args, merge, dir.file("stderr.txt"));
}

// The cells of a Markdown table line "| a | b |".
std::vector<std::string> cells(const std::string& line) {
  std::vector<std::string> out;
  std::istringstream in(line.substr(1));
  for (std::string cell; std::getline(in, cell, '|');) {
    const size_t first = cell.find_first_not_of(' '), last = cell.find_last_not_of(' ');
    out.push_back(first == std::string::npos ? "" : cell.substr(first, last - first + 1));
  }
  return out;
}

// The first table of the output: header, then rows (the rule line skipped).
std::vector<std::vector<std::string>> first_table(const std::string& output) {
  std::vector<std::vector<std::string>> table;
  std::istringstream in(output);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("| ", 0) != 0) {
      if (!table.empty()) break;
      continue;
    }
    if (line.rfind("| ---", 0) != 0) table.push_back(cells(line));
  }
  return table;
}

const std::vector<std::string> kTinyLabels{"single x1 b8", "dp x1 b8", "dp x2 b8",
                                           "ddp x1 b8 overlap on", "ddp x2 b8 overlap on"};

void expect_table_has_the_rows(const std::string& output) {
  const auto table = first_table(output);
  ASSERT_EQ(table.size(), 1 + kTinyLabels.size()) << output;
  for (const char* column : {"config", "device", "images/s", "ms/step", "speed-up", "eff.",
                             "comm ms", "hidden", "grad MiB/step", "scatter ms", "replicate ms",
                             "gather ms", "reduce ms", "GFLOP/s", "% of peak", "peak RSS MiB"}) {
    EXPECT_NE(std::find(table[0].begin(), table[0].end(), column), table[0].end()) << column;
  }
  const auto column = [&](const char* name) {
    return std::find(table[0].begin(), table[0].end(), name) - table[0].begin();
  };
  for (size_t r = 0; r < kTinyLabels.size(); ++r) {
    const auto& row = table[r + 1];
    ASSERT_EQ(row.size(), table[0].size()) << output;
    EXPECT_EQ(row[0], kTinyLabels[r]);
    EXPECT_EQ(row[1].rfind("cpu", 0), 0u) << row[1];
    EXPECT_GT(std::stod(row[2]), 0) << "images/s of " << row[0];
    EXPECT_GT(std::stod(row[column("peak RSS MiB")]), 0) << "peak RSS of " << row[0];
    EXPECT_GT(std::stod(row[column("GFLOP/s")]), 0) << "GFLOP/s of " << row[0];
    EXPECT_NE(row[column("% of peak")].find(" %"), std::string::npos) << row[0];
  }
  EXPECT_EQ(table[4][6] != "-", true);  // ddp x1 has a comm time
  EXPECT_EQ(table[3][6], "-");          // dp has none
  EXPECT_NE(table[3][9], "-");          // but a scatter time
  // ResNet-20's 0.27 M float32 gradients: about 1.04 MiB handed to all-reduces per step
  EXPECT_NEAR(std::stod(table[4][8]), 1.04, 0.02);
  EXPECT_EQ(table[3][8], "-");
}

// The JSON rows hold the table's numbers (as printed, "%.1f"), with every column in order.
void expect_json_matches_table(const std::string& json_text, const std::string& output) {
  const auto table = first_table(output);
  const nlohmann::ordered_json report = nlohmann::ordered_json::parse(json_text);
  const nlohmann::ordered_json& rows = report.at("rows");
  ASSERT_EQ(rows.size(), kTinyLabels.size());
  ASSERT_EQ(table.size(), 1 + rows.size());
  for (size_t r = 0; r < rows.size(); ++r) {
    std::vector<std::string> keys;
    for (const auto& [key, value] : rows[r].items()) keys.push_back(key);
    keys.resize(keys.size() - 2);  // images_per_s_samples and bucket_timings, which only JSON has
    EXPECT_EQ(keys, row_columns());
    char images_per_s[32];
    std::snprintf(images_per_s, sizeof images_per_s, "%.1f",
                  rows[r].at("images_per_s").get<double>());
    EXPECT_EQ(table[r + 1][2], images_per_s) << kTinyLabels[r];
    EXPECT_EQ(rows[r].at("mode").get<std::string>() + " x" +
                  std::to_string(rows[r].at("devices").get<int>()),
              table[r + 1][0].substr(0, table[r + 1][0].find(" b")));
    EXPECT_GT(rows[r].at("peak_rss_mb").get<double>(), 0);
  }
}

// Note [Convolution peak] and Note [Counting FLOPs]: the peak in the header and the JSON, and
// each row's GFLOP/s from ResNet-20's 244 MFLOP per image, against the fp32 peak.
void expect_peak_and_flops(const json& report, const std::string& output) {
  const json& peak = report.at("conv_peak");
  EXPECT_GT(peak["float32_gflop_per_s"].get<double>(), 0);
  EXPECT_EQ(peak["threads"], 2);
  EXPECT_TRUE(peak["bfloat16_gflop_per_s"].is_null());  // no bf16 rows
  EXPECT_NE(
      output.find(
          "convolution peak (3x3 conv, N32 128->128 28x28 nhwc, threads 2, fastest call): fp32 "),
      std::string::npos)
      << output;
  for (const json& row : report["rows"]) {
    EXPECT_NEAR(row["flops_per_image"].get<double>() / 1e6, 244.0, 0.05);
    EXPECT_DOUBLE_EQ(
        row["gflop_per_s"].get<double>(),
        row["images_per_s"].get<double>() * row["flops_per_image"].get<double>() / 1e9);
    EXPECT_DOUBLE_EQ(row["peak_fraction"].get<double>(),
                     row["gflop_per_s"].get<double>() / peak["float32_gflop_per_s"].get<double>());
  }
}

// --profile: each configuration's processes wrote a table and a trace, named by configuration and
// rank; the ddp x2 ranks' traces hold the gradient buckets' all-reduces on a track of their own.
void expect_profiles(const std::filesystem::path& folder) {
  for (const std::string& label : kTinyLabels) {
    std::string stem = label;
    std::replace(stem.begin(), stem.end(), ' ', '_');
    const int ranks = label == "ddp x2 b8 overlap on" ? 2 : 1;
    for (int rank = 0; rank < ranks; ++rank) {
      const auto file = folder / (stem + ".rank" + std::to_string(rank));
      EXPECT_NE(read_text(file.string() + ".ops.md").find("| conv2d "), std::string::npos) << file;
      const json trace = json::parse(read_text(file.string() + ".trace.json"));
      if (ranks != 2) continue;
      int64_t track = -1, spans = 0;
      for (const json& event : trace["traceEvents"]) {
        if (event["name"] == "thread_name" && event["args"]["name"] == "DDP all-reduce (gloo)")
          track = event["tid"].get<int64_t>();
      }
      for (const json& event : trace["traceEvents"]) {
        spans += event["ph"] == "X" && event["tid"] == track && event["cat"] == "communication";
      }
      EXPECT_GT(spans, 0) << file << ": no all-reduce on the bucket track";
    }
  }
}

// On CPU devices and Gloo whatever the machine (--device-type cpu): on GPUs dp x2 and ddp x2 would
// need two of them.
TEST(BenchCifarMultiprocess, TinyMatrixPrintsTheTableAndWritesJson) {
  TempDir dir;
  const std::string json_path = dir.file("bench.json");
  const ProgramRun run = bench_cifar({"--arch",
                                      "resnet20",
                                      "--batch-sizes",
                                      "8",
                                      "--steps",
                                      "1",
                                      "--warmup",
                                      "1",
                                      "--repeats",
                                      "1",
                                      "--modes",
                                      "single,dp,ddp",
                                      "--devices",
                                      "1,2",
                                      "--device-type",
                                      "cpu",
                                      "--threads",
                                      "2",
                                      "--json",
                                      json_path,
                                      "--project",
                                      "--link",
                                      "both",
                                      "--profile",
                                      dir.file("profiles")},
                                     dir);
  ASSERT_EQ(run.exit_code, 0) << run.output << run.errors;
  expect_table_has_the_rows(run.output);
  const json report = json::parse(read_text(json_path));
  expect_peak_and_flops(report, run.output);
  expect_profiles(dir.path() / "profiles");
  expect_json_matches_table(read_text(json_path), run.output);
  EXPECT_EQ(report["rows"][2]["device_list"], "cpu:0,cpu:1");
  EXPECT_EQ(report["rows"][4]["device_list"], "cpu:0 per rank (gloo)");
  EXPECT_EQ(report["options"]["device_type"], "cpu");
  EXPECT_EQ(report["rows"][2]["dp_replicas"], "persistent");
  EXPECT_TRUE(report["rows"][3]["dp_replicas"].is_null());  // a ddp row
  EXPECT_EQ(report["rows"][4]["processes"], 2);
  EXPECT_EQ(report["rows"][4]["bucket_timings"].size(), report["rows"][4]["buckets"].get<size_t>());

  // The projection: titled as such, 2 links × 3 GPU counts × 2 modes.
  EXPECT_NE(run.output.find("PROJECTION (not measured)"), std::string::npos) << run.output;
  const json& projection = report.at("projection");
  EXPECT_EQ(projection["title"], "PROJECTION (not measured)");
  ASSERT_EQ(projection["rows"].size(), 12u) << projection.dump(2);
  for (const json& row : projection["rows"]) {
    EXPECT_GT(row["step_ms"].get<double>(), 0);
    EXPECT_EQ(row["global_batch"], 8);
    EXPECT_EQ(row["local_batch"].get<int>() * row["gpus"].get<int>(), 8);
  }
}

// --backend mpi: each ddp row's ranks are started by one mpirun, which must be allowed to run as
// root here (a user sets the same variables; export_mpirun_environment()).
TEST(BenchCifarMultiprocess, MpiRowsRunUnderMpirun) {
  if (const std::string why = testing::mpirun_unavailable_reason(); !why.empty()) {
    GTEST_SKIP() << why;
  }
  testing::export_mpirun_environment();
  TempDir dir;
  const ProgramRun run =
      bench_cifar({"--modes", "ddp", "--devices", "2", "--device-type", "cpu", "--backend", "mpi",
                   "--batch-sizes", "8", "--steps", "1", "--warmup", "0", "--repeats", "1",
                   "--json", dir.file("bench.json")},
                  dir);
  ASSERT_EQ(run.exit_code, 0) << run.output << run.errors;
  const json report = json::parse(read_text(dir.file("bench.json")));
  EXPECT_EQ(report["options"]["backend"], "mpi");
  EXPECT_EQ(report["rows"][0]["device_list"], "cpu:0 per rank (mpi)");
  EXPECT_EQ(report["rows"][0]["processes"], 2);
}

TEST(BenchCifarMultiprocess, AWorkerErrorEndsUpInItsRow) {
  TempDir dir;  // exists, but holds no CIFAR-10 files
  const ProgramRun run =
      bench_cifar({"--modes", "ddp", "--devices", "2", "--device-type", "cpu", "--batch-sizes", "8",
                   "--steps", "1", "--warmup", "0", "--repeats", "1", "--real", "--data-dir",
                   dir.path().string(), "--json", dir.file("bench.json")},
                  dir);
  EXPECT_EQ(run.exit_code, 1) << run.output << run.errors;
  EXPECT_NE(run.output.find("| ddp x2 b8 overlap on | FAILED: [bench_cifar] [cifar10] cannot read"),
            std::string::npos)
      << run.output;
  const json report = json::parse(read_text(dir.file("bench.json")));
  EXPECT_NE(report["rows"][0]["error"].get<std::string>().find("data_batch_1.bin"),
            std::string::npos);
}

TEST(BenchCifar, DataParallelCanRebuildItsReplicasEveryStep) {
  TempDir dir;
  const ProgramRun run =
      bench_cifar({"--modes",       "dp",  "--devices",     "2",
                   "--device-type", "cpu", "--dp-replicas", "rebuilt",
                   "--batch-sizes", "8",   "--steps",       "1",
                   "--warmup",      "0",   "--repeats",     "1",
                   "--threads",     "2",   "--json",        dir.file("bench.json")},
                  dir);
  ASSERT_EQ(run.exit_code, 0) << run.output << run.errors;
  EXPECT_EQ(first_table(run.output).at(1).at(0), "dp x2 b8 rebuilt replicas") << run.output;
  const json report = json::parse(read_text(dir.file("bench.json")));
  EXPECT_EQ(report["rows"][0]["dp_replicas"], "rebuilt");
  EXPECT_GT(report["rows"][0]["replicate_ms"].get<double>(), 0);
  EXPECT_EQ(report["options"]["dp_replicas"], json::array({"rebuilt"}));
}

// --zero: a row per stage, and the bytes each rank holds (Note [Counted memory]): with P the
// ResNet-20's float32 parameters, plain DDP 4P (parameters, .grad, buckets, momentum), stage 1
// 3P + P/2 (half the momentum), stage 2 less again (half the gradients kept; the buckets while
// they fly).
TEST(BenchCifarMultiprocess, ZeroRowsCountTheStateEachRankHolds) {
  TempDir dir;
  const ProgramRun run =
      bench_cifar({"--modes",       "ddp",   "--devices",     "2",
                   "--zero",        "0,1,2", "--device-type", "cpu",
                   "--batch-sizes", "8",     "--steps",       "1",
                   "--warmup",      "1",     "--repeats",     "1",
                   "--threads",     "2",     "--json",        dir.file("bench.json")},
                  dir);
  ASSERT_EQ(run.exit_code, 0) << run.output << run.errors;
  EXPECT_EQ(first_table(run.output).at(3).at(0), "ddp x2 b8 overlap on zero 2") << run.output;
  const json report = json::parse(read_text(dir.file("bench.json")));
  ASSERT_EQ(report["rows"].size(), 3u);
  const double p = report["rows"][0]["parameter_bytes"].get<double>();
  const auto state = [&](int row) { return report["rows"][row]["state_bytes"].get<double>(); };
  EXPECT_EQ(report["rows"][2]["zero"], "2");
  EXPECT_EQ(state(0), 4 * p);
  EXPECT_NEAR(state(1), 3.5 * p, 4096) << "padding: under 2 elements a bucket";
  EXPECT_LT(state(2), state(1));
  EXPECT_GT(state(2), 2 * p) << "P, P/2 of gradients and of momentum, and a bucket in flight";
}

TEST(BenchCifar, AConfigurationThatCannotRunIsReportedAndTheOthersRun) {
  TempDir dir;
  const ProgramRun run =
      bench_cifar({"--modes", "single,ddp", "--devices", "3", "--device-type", "cpu",
                   "--batch-sizes", "8", "--steps", "1", "--warmup", "0", "--repeats", "1"},
                  dir);
  EXPECT_EQ(run.exit_code, 1) << run.output << run.errors;
  const auto table = first_table(run.output);
  ASSERT_EQ(table.size(), 3u) << run.output;
  EXPECT_EQ(table[1][0], "single x1 b8");
  EXPECT_GT(std::stod(table[1][2]), 0);
  EXPECT_EQ(table[2][0], "ddp x3 b8 overlap on");
  EXPECT_EQ(table[2][1], "FAILED: [bench_cifar] batch 8 does not split evenly over 3 processes");
}

// Note [Where bf16 pays]: where bf16 is slower than fp32 (oneDNN capped at AVX512_CORE_BF16 on an
// Intel machine: an Intel day without AMX), bench_cifar still measures the bf16 row, after one
// line saying why train_cifar would refuse it; where bf16 pays (AMD, Zen 4) it says nothing.
TEST(BenchCifar, Bf16RowsRunWithANoteWhereBf16IsSlowerThanFp32) {
  const std::string capped_isa = cpu_has_native_bf16() ? "avx512_core_bf16" : cpu_kernel_isa();
  const Bf16Verdict verdict = bf16_verdict(cpu_vendor(), capped_isa);
  if (verdict.speed == Bf16Speed::Emulated)
    GTEST_SKIP() << "no AVX512-BF16 here: " << verdict.reason;
  TempDir dir;
  const ProgramRun run = testing::run_program(
      "env",
      {"ONEDNN_MAX_CPU_ISA=AVX512_CORE_BF16", testing::kBenchCifarProgram, "--modes", "single",
       "--device-type", "cpu", "--precision", "bf16", "--batch-sizes", "8", "--steps", "1",
       "--warmup", "0", "--repeats", "1"},
      false, dir.file("stderr.txt"));
  EXPECT_EQ(run.exit_code, 0) << run.output << run.errors;
  const bool noted = run.errors.find("bench_cifar: note: bf16 is slower than fp32 on this CPU (" +
                                     verdict.reason + ")") != std::string::npos;
  EXPECT_EQ(noted, verdict.speed == Bf16Speed::Slower) << run.errors;
}

// --device-type cuda names GPUs on purpose: without CUDA the row fails, saying why, instead of
// measuring the CPU under a GPU label.
TEST(BenchCifar, DeviceTypeCudaWithoutCudaFailsItsRow) {
  if (cuda_available()) GTEST_SKIP() << "this machine has a CUDA device";
  TempDir dir;
  const ProgramRun run = bench_cifar({"--modes", "single", "--device-type", "cuda", "--batch-sizes",
                                      "8", "--steps", "1", "--warmup", "0", "--repeats", "1"},
                                     dir);
  EXPECT_EQ(run.exit_code, 1) << run.output << run.errors;
  EXPECT_NE(run.output.find("| single x1 b8 | FAILED: [bench_cifar] --device-type cuda, but " +
                            cuda_unavailable_reason()),
            std::string::npos)
      << run.output;
}

// A ddp x2 row that fails in its first repeat is not run again, and
// the single row's repeats come in rounds: single, ddp, single, ddp.
TEST(BenchCifar, RepeatsReportTheMedianAndTheSpreadOfEachRow) {
  TempDir dir;
  const ProgramRun run = bench_cifar(
      {"--modes", "single,ddp", "--devices", "3", "--device-type", "cpu", "--batch-sizes", "8",
       "--steps", "1", "--warmup", "0", "--repeats", "2", "--json", dir.file("bench.json")},
      dir);
  EXPECT_EQ(run.exit_code, 1) << run.output << run.errors;  // the ddp row cannot run
  EXPECT_NE(run.errors.find("[1/4] single x1 b8 (repeat 1 of 2): "), std::string::npos)
      << run.errors;
  EXPECT_NE(run.errors.find("[2/4] ddp x3 b8 overlap on (repeat 1 of 2): failed\n[3/4] single x1 "
                            "b8 (repeat 2 of 2): "),
            std::string::npos)
      << run.errors;
  EXPECT_EQ(run.errors.find("[4/4]"), std::string::npos) << run.errors;
  EXPECT_NE(run.output.find("median of 2 repeats"), std::string::npos) << run.output;
  const auto table = first_table(run.output);
  ASSERT_EQ(table.size(), 3u) << run.output;
  const json report = json::parse(read_text(dir.file("bench.json")));
  const json& row = report["rows"][0];
  EXPECT_EQ(report["options"]["repeats"], 2);
  EXPECT_EQ(row["repeats"], 2);
  ASSERT_EQ(row["images_per_s_samples"].size(), 2u);
  const double a = row["images_per_s_samples"][0], b = row["images_per_s_samples"][1];
  EXPECT_DOUBLE_EQ(row["images_per_s"].get<double>(), (a + b) / 2);
  EXPECT_EQ(row["images_per_s_min"], std::min(a, b));
  EXPECT_EQ(row["images_per_s_max"], std::max(a, b));
  char cell[64];
  std::snprintf(cell, sizeof cell, "%.1f (%.0f–%.0f)", (a + b) / 2, std::min(a, b), std::max(a, b));
  EXPECT_EQ(table[1][2], cell) << run.output;
  EXPECT_TRUE(report["rows"][1]["repeats"].is_null());  // the failed row
  EXPECT_EQ(report["rows"][1]["images_per_s_samples"], json::array());
}

void expect_one_error_line(const ProgramRun& run, const std::string& expected) {
  EXPECT_NE(run.exit_code, 0) << run.output;
  EXPECT_EQ(run.output.rfind("bench_cifar: error: ", 0), 0u) << run.output;
  EXPECT_NE(run.output.find(expected), std::string::npos) << run.output;
  EXPECT_EQ(std::count(run.output.begin(), run.output.end(), '\n'), 1) << run.output;
}

TEST(BenchCifar, BadInputGetsOneClearLine) {
  TempDir dir;
  expect_one_error_line(bench_cifar({"--bogus"}, dir, true), "--bogus");
  expect_one_error_line(bench_cifar({"--overlap", "maybe"}, dir, true), "--overlap");
  expect_one_error_line(bench_cifar({"--batch-sizes", "8,x"}, dir, true), "--batch-sizes");
  expect_one_error_line(bench_cifar({"--csv", "bench.csv"}, dir, true), "--csv");  // JSON only
  expect_one_error_line(bench_cifar({"--repeats", "0"}, dir, true),
                        "--repeats: must be > 0, got 0");
  expect_one_error_line(bench_cifar({"--repeats", "three"}, dir, true),
                        "--repeats: must be a whole number > 0, got 'three'");
  expect_one_error_line(bench_cifar({"--real", "--data-dir", "/nonexistent"}, dir, true),
                        "no CIFAR-10 at /nonexistent");
  // Checked before the measurements, which may take many minutes, not after them.
  expect_one_error_line(bench_cifar({"--json", dir.path().string()}, dir, true),
                        "--json " + dir.path().string() + ": is a folder");
  expect_one_error_line(bench_cifar({"--json", dir.file("missing/bench.json")}, dir, true),
                        "the folder " + dir.file("missing") + " does not exist");
}

TEST(BenchCifar, HelpExplainsTheFlagsWithTheirDefaults) {
  TempDir dir;
  const ProgramRun run = bench_cifar({"--help"}, dir, true);
  EXPECT_EQ(run.exit_code, 0);
  for (const char* text : {"--modes",       "single,dp,ddp",
                           "--devices",     "--batch-sizes",
                           "=128",          "--bucket-cap-mb",
                           "=25",           "--overlap",
                           "--threads",     "--project",
                           "--nvlink-gbps", "=150",
                           "--pcie-gbps",   "=12",
                           "--latency-us",  "=20",
                           "--json",        "--real",
                           "--dp-replicas", "=persistent",
                           "--device-type", "=auto",
                           "--repeats",     "=3",
                           "median",        "shared or busy cores"}) {
    EXPECT_NE(run.output.find(text), std::string::npos) << text;
  }
  EXPECT_EQ(run.output.find("--worker-json"), std::string::npos) << "an internal flag";
}

}  // namespace
}  // namespace tandem::apps::bench
