#include "apps/common/flags.h"

#include <CLI/CLI.hpp>

#include "apps/common/choice_flag.h"
#include "engine/memory_format_spellings.h"

namespace tandem::apps {
namespace {

constexpr const char* kModesHelp =
    "single: one device; dp: DataParallel, a replica per device; ddp: DistributedDataParallel, a "
    "process per device";
constexpr const char* kCompressionHelp =
    "ddp: gradients cross ranks as fp16 or bf16 (half the bytes; a communication hook, see "
    "docs/parallel.md) or uncompressed (none)";
// Note [Why --zero]: the stage numbers are the one vocabulary the ZeRO paper, DeepSpeed's
// "zero_optimization.stage" and PyTorch's docs share (ZeroRedundancyOptimizer is stage 1, FSDP's
// SHARD_GRAD_OP stage 2), they order by memory saved, and stage 3 (FSDP's FULL_SHARD) would be
// the next number; FSDP's strategy names describe what stays whole rather than what is split.
constexpr const char* kZeroHelp =
    "ddp: ZeRO stage. 0: plain DDP; 1: each rank keeps the momentum of its shard of the "
    "parameters only (PyTorch's ZeroRedundancyOptimizer); 2: the gradients too, "
    "reduce-scattered during backward (FSDP's SHARD_GRAD_OP). Checkpoints stay plain DDP's";
constexpr Spelling<parallel::Sharding> kZeroSpellings[] = {{"0", parallel::Sharding::None},
                                                           {"1", parallel::Sharding::Optimizer},
                                                           {"2", parallel::Sharding::Gradients}};
constexpr const char* kPrecisionHelp =
    "bf16: convolutions and the linear layer in bfloat16 with float32 accumulation, activations "
    "kept in bfloat16; weights, optimizer, batch-norm statistics, loss and checkpoints stay "
    "float32 (docs/engine.md, Mixed precision)";
constexpr const char* kSlowBf16Help =
    "run --precision bf16 even on a CPU where it is slower than fp32: without AVX512-BF16 or AMX "
    "(emulated, several times slower), or Intel with AVX512-BF16 but no AMX (about 0.65x)";

// The words of --precision and --grad-compression: the names the library gives the values.
std::vector<Spelling<nn::Precision>> precision_spellings() {
  std::vector<Spelling<nn::Precision>> spellings;
  for (nn::Precision precision : {nn::Precision::Float32, nn::Precision::BFloat16})
    spellings.emplace_back(nn::precision_name(precision), precision);
  return spellings;
}

std::vector<Spelling<std::optional<MemoryFormat>>> memory_format_spellings() {
  std::vector<Spelling<std::optional<MemoryFormat>>> spellings{{"auto", std::nullopt}};
  spellings.insert(spellings.end(), std::begin(kMemoryFormatSpellings),
                   std::end(kMemoryFormatSpellings));
  return spellings;
}

std::vector<Spelling<parallel::GradCompression>> compression_spellings() {
  using parallel::GradCompression;
  std::vector<Spelling<GradCompression>> spellings;
  for (GradCompression compression :
       {GradCompression::None, GradCompression::Float16, GradCompression::BFloat16})
    spellings.emplace_back(parallel::grad_compression_name(compression), compression);
  return spellings;
}

}  // namespace

void add_mode_flag(CLI::App& app, Mode& mode) {
  add_choice_flag(app, "--mode", mode, kModeSpellings,
                  std::string(kModesHelp) + " (--nproc, or under tandem-run/mpirun/srun)");
}

void add_modes_flag(CLI::App& app, std::vector<Mode>& modes) {
  add_choices_flag(app, "--modes", modes, kModeSpellings,
                   std::string("modes to run: ") + kModesHelp);
}

void add_arch_flag(CLI::App& app, std::string& arch) {
  app.add_option("--arch", arch, "resnet20|32|44|56|110 (CIFAR ResNets) or resnet18")
      ->check(
          CLI::IsMember({"resnet20", "resnet32", "resnet44", "resnet56", "resnet110", "resnet18"}))
      ->capture_default_str();
}

void add_memory_format_flag(CLI::App& app, std::optional<MemoryFormat>& memory_format) {
  add_choice_flag(app, "--memory-format", memory_format, memory_format_spellings(),
                  "activations and weights in memory: channels_last (NHWC), contiguous (NCHW), or "
                  "auto: channels_last on CPUs, contiguous on GPUs; checkpoints are NCHW either "
                  "way");
}

const char* memory_format_flag_name(const std::optional<MemoryFormat>& memory_format) {
  return name_in(memory_format_spellings(), memory_format);
}

void add_precision_flags(CLI::App& app, nn::Precision& precision, bool& allow_slow_bf16) {
  add_choice_flag(app, "--precision", precision, precision_spellings(), kPrecisionHelp);
  app.add_flag("--allow-slow-bf16", allow_slow_bf16, kSlowBf16Help);
}

void add_precision_flags(CLI::App& app, std::vector<nn::Precision>& precisions,
                         bool& allow_slow_bf16) {
  add_choices_flag(app, "--precision", precisions, precision_spellings(),
                   std::string(kPrecisionHelp) + "; a list (fp32,bf16) measures each");
  app.add_flag("--allow-slow-bf16", allow_slow_bf16, kSlowBf16Help);
}

void add_bucket_flags(CLI::App& app, parallel::ReducerOptions& reducer) {
  app.add_option("--bucket-cap-mb", reducer.bucket_cap_mb, "ddp: gradient bucket size in MiB")
      ->check(CLI::Range(0.001, 4096.0))
      ->capture_default_str();
  app.add_option(
         "--first-bucket-mb", reducer.first_bucket_mb,
         "ddp: size of the first bucket in MiB (launched first, so small), at most --bucket-cap-mb")
      ->check(CLI::Range(0.001, 4096.0))
      ->capture_default_str();
}

void add_grad_compression_flag(CLI::App& app, parallel::GradCompression& compression) {
  add_choice_flag(app, "--grad-compression", compression, compression_spellings(),
                  kCompressionHelp);
}

void add_backend_flag(CLI::App& app, const parallel::BackendInfo*& backend,
                      const std::string& help) {
  std::vector<Spelling<const parallel::BackendInfo*>> table;
  for (const parallel::BackendInfo& row : parallel::backends()) table.emplace_back(row.name, &row);
  CLI::Option* option =
      app.add_option_function<std::string>(
             "--backend",
             [&backend, table](const std::string& word) { backend = value_in(table, word); }, help)
          ->transform(spelling_check(table));
  if (backend != nullptr) option->default_str(backend->name);
}

void add_grad_compression_flag(CLI::App& app,
                               std::vector<parallel::GradCompression>& compressions) {
  add_choices_flag(app, "--grad-compression", compressions, compression_spellings(),
                   std::string(kCompressionHelp) + "; a row for each listed");
}

const char* zero_stage_name(parallel::Sharding sharding) {
  return name_in(kZeroSpellings, sharding);
}

void add_zero_flag(CLI::App& app, parallel::Sharding& sharding) {
  add_choice_flag(app, "--zero", sharding, kZeroSpellings, kZeroHelp);
}

void add_zero_flag(CLI::App& app, std::vector<parallel::Sharding>& shardings) {
  add_choices_flag(app, "--zero", shardings, kZeroSpellings,
                   std::string(kZeroHelp) + "; a row for each listed");
}

void add_threads_flag(CLI::App& app, int& threads, const std::string& how_shared) {
  std::string help = "CPU threads for kernels (0: TANDEM_NUM_THREADS or all cores)";
  if (!how_shared.empty()) help += "; " + how_shared;
  app.add_option("--threads", threads, help)->check(CLI::Range(0, 1024))->capture_default_str();
}

void add_data_dir_flag(CLI::App& app, std::string& data_dir) {
  app.add_option("--data-dir", data_dir,
                 "CIFAR-10 binary folder (default: $TANDEM_DATA_DIR/cifar-10-batches-bin, else "
                 "${XDG_DATA_HOME:-~/.local/share}/tandem/cifar-10-batches-bin, where "
                 "scripts/get_cifar10.sh puts it)");
}

void add_no_verify_data_flag(CLI::App& app, bool& verify_data) {
  app.add_flag_callback(
      "--no-verify-data", [&verify_data] { verify_data = false; },
      "read the --data-dir files without checking their md5 sums against the official "
      "CIFAR-10's (for a data set of one's own in its format)");
}

}  // namespace tandem::apps
