#include "apps/common/flags.h"

#include <CLI/CLI.hpp>

namespace tandem::apps {
namespace {

constexpr const char* kModesHelp =
    "single: one device; dp: DataParallel, a replica per device; ddp: DistributedDataParallel, a "
    "process per device";
constexpr const char* kCompressionHelp =
    "ddp: gradients cross ranks as fp16 or bf16 (half the bytes; a communication hook, see "
    "docs/parallel.md) or uncompressed (none)";

CLI::IsMember mode_check() {
  return CLI::IsMember(std::vector<std::string>(std::begin(kModeNames), std::end(kModeNames)));
}

constexpr const char* kPrecisionHelp =
    "bf16: convolutions and the linear layer in bfloat16 with float32 accumulation, activations "
    "kept in bfloat16; weights, optimizer, batch-norm statistics, loss and checkpoints stay "
    "float32 (docs/engine.md, Mixed precision)";
constexpr const char* kSlowBf16Help =
    "run --precision bf16 even on a CPU without AVX512-BF16 or AMX, where it is emulated and "
    "several times slower";

nn::Precision parse_precision(const std::string& name) {
  return name == "bf16" ? nn::Precision::BFloat16 : nn::Precision::Float32;
}

CLI::IsMember precisions_check() {
  return CLI::IsMember({"fp32", "bf16"});
}

CLI::IsMember compressions() {
  return CLI::IsMember({"none", "fp16", "bf16"});
}

}  // namespace

void add_mode_flag(CLI::App& app, Mode& mode) {
  app.add_option_function<std::string>(
         "--mode", [&mode](const std::string& name) { mode = parse_mode(name); },
         std::string(kModesHelp) + " (--nproc, or under tandem-run/mpirun/srun)")
      ->check(mode_check())
      ->default_str(mode_name(mode));
}

void add_modes_flag(CLI::App& app, std::vector<Mode>& modes) {
  std::string defaults;
  for (Mode mode : modes) {
    if (!defaults.empty()) defaults += ',';
    defaults += mode_name(mode);
  }
  app.add_option_function<std::vector<std::string>>(
         "--modes",
         [&modes](const std::vector<std::string>& names) {
           modes.clear();
           for (const std::string& name : names) modes.push_back(parse_mode(name));
         },
         std::string("modes to run: ") + kModesHelp)
      ->delimiter(',')
      ->check(mode_check())
      ->default_str(defaults);
}

void add_arch_flag(CLI::App& app, std::string& arch) {
  app.add_option("--arch", arch, "resnet20|32|44|56|110 (CIFAR ResNets) or resnet18")
      ->check(
          CLI::IsMember({"resnet20", "resnet32", "resnet44", "resnet56", "resnet110", "resnet18"}))
      ->capture_default_str();
}

void add_memory_format_flag(CLI::App& app, std::string& memory_format) {
  app.add_option("--memory-format", memory_format,
                 "activations and weights in memory: channels_last (NHWC), contiguous (NCHW), or "
                 "auto: channels_last on CPUs, contiguous on GPUs; checkpoints are NCHW either way")
      ->check(
          CLI::IsMember({"auto", "channels_last", "channels-last", "nhwc", "contiguous", "nchw"}))
      ->capture_default_str();
}

void add_precision_flags(CLI::App& app, nn::Precision& precision, bool& allow_slow_bf16) {
  app.add_option_function<std::string>(
         "--precision",
         [&precision](const std::string& name) { precision = parse_precision(name); },
         kPrecisionHelp)
      ->check(precisions_check())
      ->default_str(nn::precision_name(precision));
  app.add_flag("--allow-slow-bf16", allow_slow_bf16, kSlowBf16Help);
}

void add_precision_flags(CLI::App& app, std::vector<nn::Precision>& precisions,
                         bool& allow_slow_bf16) {
  app.add_option_function<std::vector<std::string>>(
         "--precision",
         [&precisions](const std::vector<std::string>& names) {
           precisions.clear();
           for (const std::string& name : names) precisions.push_back(parse_precision(name));
         },
         std::string(kPrecisionHelp) + "; a list (fp32,bf16) measures each")
      ->delimiter(',')
      ->check(precisions_check())
      ->default_str(nn::precision_name(nn::Precision::Float32));
  app.add_flag("--allow-slow-bf16", allow_slow_bf16, kSlowBf16Help);
}

void add_bucket_cap_flag(CLI::App& app, double& bucket_cap_mb) {
  app.add_option("--bucket-cap-mb", bucket_cap_mb, "ddp: gradient bucket size in MiB")
      ->check(CLI::Range(0.001, 4096.0))
      ->capture_default_str();
}

void add_grad_compression_flag(CLI::App& app, std::string& compression) {
  app.add_option("--grad-compression", compression, kCompressionHelp)
      ->check(compressions())
      ->capture_default_str();
}

void add_grad_compression_flag(CLI::App& app, std::vector<std::string>& compressions_list) {
  app.add_option("--grad-compression", compressions_list,
                 std::string(kCompressionHelp) + "; a row for each listed")
      ->delimiter(',')
      ->check(compressions())
      ->capture_default_str();
}

void add_data_dir_flag(CLI::App& app, std::string& data_dir) {
  app.add_option("--data-dir", data_dir, "CIFAR-10 binary folder (scripts/get_cifar10.sh)")
      ->capture_default_str();
}

}  // namespace tandem::apps
