#pragma once
/// The flags that train_cifar and bench_cifar share, defined once so that they read, check and
/// default alike in both programs: --mode (train_cifar) or --modes (bench_cifar, a list), --arch,
/// --memory-format, --precision (one, or a row for each), --bucket-cap-mb, --grad-compression
/// (one choice, or a row for each) and --data-dir.

#include <string>
#include <vector>

#include "apps/common/mode.h"
#include "nn/precision.h"

namespace CLI {
class App;
}

namespace tandem::apps {

void add_mode_flag(CLI::App& app, Mode& mode);
void add_modes_flag(CLI::App& app, std::vector<Mode>& modes);
void add_arch_flag(CLI::App& app, std::string& arch);
void add_memory_format_flag(CLI::App& app, std::string& memory_format);
/// --precision fp32|bf16 into the enum (Note [Mixed precision]), and --allow-slow-bf16.
void add_precision_flags(CLI::App& app, nn::Precision& precision, bool& allow_slow_bf16);
void add_precision_flags(CLI::App& app, std::vector<nn::Precision>& precisions,
                         bool& allow_slow_bf16);
void add_bucket_cap_flag(CLI::App& app, double& bucket_cap_mb);
void add_grad_compression_flag(CLI::App& app, std::string& compression);
void add_grad_compression_flag(CLI::App& app, std::vector<std::string>& compressions);
void add_data_dir_flag(CLI::App& app, std::string& data_dir);

}  // namespace tandem::apps
