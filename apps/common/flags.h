#pragma once
/// The flags that train_cifar and bench_cifar share, defined once so that they read, check and
/// default alike in both programs.

#include <string>
#include <vector>

#include "apps/common/mode.h"

namespace CLI {
class App;
}

namespace tandem::apps {

/// --mode single|dp|ddp (train_cifar).
void add_mode_flag(CLI::App& app, Mode& mode);
/// --modes, a comma-separated list of modes (bench_cifar).
void add_modes_flag(CLI::App& app, std::vector<Mode>& modes);
/// --arch: the CIFAR ResNets and resnet18.
void add_arch_flag(CLI::App& app, std::string& arch);
/// --memory-format auto|channels_last|contiguous (and their aliases).
void add_memory_format_flag(CLI::App& app, std::string& memory_format);
/// --bucket-cap-mb: DDP's gradient bucket size in MiB.
void add_bucket_cap_flag(CLI::App& app, double& bucket_cap_mb);
/// --grad-compression none|fp16|bf16: one choice (train_cifar) or a row for each (bench_cifar).
void add_grad_compression_flag(CLI::App& app, std::string& compression);
void add_grad_compression_flag(CLI::App& app, std::vector<std::string>& compressions);
/// --data-dir: the CIFAR-10 binary folder.
void add_data_dir_flag(CLI::App& app, std::string& data_dir);

}  // namespace tandem::apps
