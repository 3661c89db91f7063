#pragma once
/// The flags that train_cifar and bench_cifar share, defined once so that they read, check and
/// default alike in both programs: --mode (train_cifar) or --modes (bench_cifar, a list), --arch,
/// --memory-format, --precision (one, or a row for each), --bucket-cap-mb and --first-bucket-mb,
/// --grad-compression (one choice, or a row for each), --threads, --data-dir and
/// --no-verify-data; --backend, which
/// bench_collectives takes too. Each parses
/// into its enum at the flag (Note [Typed options] in spellings.h).
///
/// Note [Options bound once]: a flag that sets a library option binds straight to that option's
/// member (CLI11 binds to any lvalue): --lr to SetupOptions::sgd.lr, --bucket-cap-mb to
/// parallel::ReducerOptions::bucket_cap_mb, and so on. The default is then written once, in the
/// library's struct, and --help shows it; nothing copies the command line into the library's
/// options, so a new DDP option is one field and one flag line (PyTorch writes bucket_cap_mb=25
/// once, in DDP's signature). train_cifar's TrainOptions and bench_cifar's BenchOptions each hold
/// a SetupOptions for this; bench_cifar sets the fields its rows vary on a copy per row
/// (bench::setup_options).

#include <optional>
#include <string>
#include <vector>

#include "apps/common/mode.h"
#include "engine/memory_format.h"
#include "nn/precision.h"
#include "parallel/comm/backends.h"
#include "parallel/comm_hook.h"
#include "parallel/reducer.h"
#include "parallel/zero/sharding.h"

namespace CLI {
class App;
}

namespace tandem::apps {

void add_mode_flag(CLI::App& app, Mode& mode);
void add_modes_flag(CLI::App& app, std::vector<Mode>& modes);
void add_arch_flag(CLI::App& app, std::string& arch);
/// --memory-format auto|channels_last|contiguous (and kMemoryFormatSpellings' other spellings);
/// auto is nullopt: the device's preferred format (ops::preferred_memory_format).
void add_memory_format_flag(CLI::App& app, std::optional<MemoryFormat>& memory_format);
/// What --memory-format calls `memory_format`: "auto" for nullopt, else memory_format_name.
const char* memory_format_flag_name(const std::optional<MemoryFormat>& memory_format);
/// --precision fp32|bf16 into the enum (Note [Mixed precision]), and --allow-slow-bf16.
void add_precision_flags(CLI::App& app, nn::Precision& precision, bool& allow_slow_bf16);
void add_precision_flags(CLI::App& app, std::vector<nn::Precision>& precisions,
                         bool& allow_slow_bf16);
/// ddp: --bucket-cap-mb and --first-bucket-mb into `reducer` (which caps the first bucket at the
/// others' size).
void add_bucket_flags(CLI::App& app, parallel::ReducerOptions& reducer);
void add_grad_compression_flag(CLI::App& app, parallel::GradCompression& compression);
/// --zero 0|1|2: ZeRO's stage (parallel::Sharding; Note [Sharded data parallel]); bench_cifar's
/// takes a list, a row for each.
void add_zero_flag(CLI::App& app, parallel::Sharding& sharding);
void add_zero_flag(CLI::App& app, std::vector<parallel::Sharding>& shardings);
/// "0", "1", "2": the stage as --zero spells it.
const char* zero_stage_name(parallel::Sharding sharding);
void add_grad_compression_flag(CLI::App& app, std::vector<parallel::GradCompression>& compressions);
/// --backend NAME: a row of the table of process-group backends (parallel/comm/backends.h, Note
/// [Backend table]), its name in any case; `help` lists them with parallel::backend_choices().
/// Left out, `backend` keeps its value (null: the program chooses; otherwise --help shows it).
void add_backend_flag(CLI::App& app, const parallel::BackendInfo*& backend,
                      const std::string& help);
/// --threads N: CPU threads for kernels; `how_shared` (may be empty) adds how this program shares
/// them out.
void add_threads_flag(CLI::App& app, int& threads, const std::string& how_shared);
/// --data-dir DIR; left empty, the program looks in the default places (Note [Default data
/// folder] in data_dir.h).
void add_data_dir_flag(CLI::App& app, std::string& data_dir);
/// --no-verify-data: sets `verify_data` false, so the files are read without their md5 check
/// (Note [CIFAR-10 md5 check] in data/cifar10.cpp): a data set of one's own in CIFAR-10's format.
void add_no_verify_data_flag(CLI::App& app, bool& verify_data);

}  // namespace tandem::apps
