// ddp_train: a complete data-parallel training loop on the installed Tandem package, the first
// program to read when using Tandem as a library (docs/library.md).
//
//   ./ddp_train [STEPS] [CHECKPOINT] [CIFAR10_DIR]          one process
//   tandem-run --nproc-per-node 2 -- ./ddp_train [...]      two processes, gradients averaged
//
// It trains a CIFAR ResNet-20 for STEPS SGD steps (default 20) on CIFAR-10 read from
// CIFAR10_DIR (the folder of data_batch_1.bin ...), or on synthetic images of the same shape
// when none is given, and saves a checkpoint at CHECKPOINT (default ddp_train.safetensors) that
// PyTorch loads with safetensors.torch.load_file. Run it again and it resumes from there, also
// with another number of processes. torchrun launches it as tandem-run does (mpirun and srun
// too, with MASTER_ADDR and MASTER_PORT exported). On a machine with GPUs each rank trains on its
// own GPU, with NCCL; otherwise on the CPU, with Gloo.
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <optional>
#include <string>

#include "data/cifar10.h"
#include "data/data_loader.h"
#include "data/sampler.h"
#include "engine/tandem.h"
#include "nn/checkpoint.h"
#include "nn/resnet.h"
#include "nn/sgd.h"
#include "parallel/comm/init_process_group.h"
#include "parallel/comm/process_group.h"
#include "parallel/comm/rendezvous/launch_env.h"
#include "parallel/distributed_data_parallel.h"

using namespace tandem;

namespace {

constexpr int64_t kGlobalBatch = 32;  // split evenly over the processes
constexpr uint64_t kSeed = 0;

void train(int64_t steps, const std::string& checkpoint, const std::string& cifar10_dir) {
  // 1. The job. Under a launcher (tandem-run, torchrun, mpirun, srun) its environment variables
  //    say this process's rank and where rank 0 is; init_process_group meets the others there.
  //    Alone, there is no group: one process, no communication.
  std::shared_ptr<parallel::ProcessGroup> group;
  if (parallel::launched_distributed()) {
    // NCCL between GPUs, Gloo between CPU processes; either way each rank gets its own device.
    group = parallel::init_process_group(cuda_available() ? "nccl" : "gloo",
                                         parallel::from_environment());
  }
  const int rank = group ? group->rank() : 0;
  const int world = group ? group->size() : 1;
  const Device device =
      group ? group->tensor_device() : (cuda_available() ? Device::cuda(0) : Device::cpu());
  TANDEM_CHECK(kGlobalBatch % world == 0, "[ddp_train] ", world, " processes do not divide ",
               "the batch of ", kGlobalBatch);
  // tandem-run starts each line of a worker's output with "[rank N]"; the others may not.
  std::printf("rank %d of %d on %s\n", rank, world, device.str().c_str());

  // 2. The model and its optimizer. Every rank builds the same ResNet from the same seed; DDP
  //    also broadcasts rank 0's weights at construction, so they start identical regardless.
  Generator generator(kSeed);
  std::shared_ptr<nn::ResNet> network = nn::make_resnet("resnet20", generator);
  network->to(device);
  nn::Sgd optimizer(network->parameters(), {.lr = 0.05f, .momentum = 0.9f, .weight_decay = 5e-4f});

  // 3. Resume: weights, BatchNorm statistics, momentum and the step count, if a checkpoint is
  //    there. Every rank reads the same file (before DDP, which would broadcast rank 0's anyway).
  nn::TrainingState state;
  if (nn::has_checkpoint(checkpoint)) {
    state = nn::load_checkpoint(checkpoint, *network, optimizer);
    std::printf("resumed from %s at step %lld\n", checkpoint.c_str(),
                static_cast<long long>(state.step));
  }

  // 4. DistributedDataParallel: the backward pass all-reduces the gradients in buckets while it
  //    runs, so after backward() every rank holds the average over all ranks' samples. Without a
  //    group the network trains as it is. Either way `model` is an nn::Module.
  std::shared_ptr<nn::Module> model = network;
  if (group) model = std::make_shared<parallel::DistributedDataParallel>(network, group);

  // 5. The data: each rank reads its own share of every epoch (DistributedSampler), augmented
  //    (random crop and flip) and normalised by two loader threads that work ahead.
  auto dataset = std::make_shared<data::CifarDataset>(
      cifar10_dir.empty() ? data::synthetic_cifar10(512, kSeed)
                          : data::read_cifar10(cifar10_dir, data::CifarSplit::Train));
  auto sampler = std::make_shared<data::DistributedSampler>(
      dataset->size(),
      data::DistributedSamplerConfig{.num_replicas = world, .rank = rank, .seed = kSeed});
  data::DataLoader loader(std::make_shared<data::CifarImages>(dataset), sampler,
                          {.batch_size = kGlobalBatch / world, .seed = kSeed, .device = device});
  const int64_t per_epoch = loader.batches_per_epoch();

  // 6. The loop. Step s is batch s % per_epoch of epoch s / per_epoch, so a resumed run goes on
  //    where the last one stopped.
  int64_t step = state.step;  // steps taken
  loader.start_epoch(step / per_epoch, step % per_epoch);
  for (const int64_t end = step + steps; step < end;) {
    std::optional<data::Batch> batch = loader.next();
    if (!batch) {  // the epoch is over: the next one is shuffled anew
      loader.start_epoch(step / per_epoch);
      batch = loader.next();
    }
    Tensor loss = cross_entropy(model->forward(batch->images), batch->labels);
    optimizer.zero_grad();
    loss.backward();   // with DDP, also averages the gradients across ranks
    optimizer.step();  // the same update on every rank: the replicas stay identical
    ++step;
    // item() copies the loss to the host, which on a GPU waits for the step to finish: a real
    // job reads it every N steps, not at every one.
    std::printf("step %lld loss %.4f\n", static_cast<long long>(step), loss.item());
  }

  // 7. Every rank now holds the same weights; their sum shows it (and the test checks it).
  double weight_sum = 0;
  for (const Tensor& parameter : network->parameters()) weight_sum += sum(parameter).item();
  std::printf("weight sum %.17g\n", weight_sum);

  // 8. The checkpoint, from rank 0 only (the others hold the same). The network's own names
  //    (conv1.weight, layer1.0.bn1.running_mean, ...) are PyTorch's state_dict keys.
  if (rank == 0) {
    nn::save_checkpoint(checkpoint, *network, optimizer, {.epoch = step / per_epoch, .step = step});
    std::printf("saved %s at step %lld\n", checkpoint.c_str(), static_cast<long long>(step));
  }
}

}  // namespace

int main(int argc, char** argv) {
  // Library code reports every failure by throwing tandem::Error (a std::exception) with a
  // message that names the operation; a program catches it once, here.
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // a line at a time, also into tandem-run's pipe
  try {
    const int64_t steps = argc > 1 ? std::atoll(argv[1]) : 20;
    TANDEM_CHECK(steps >= 1, "[ddp_train] STEPS must be a number >= 1, got '", argv[1], "'");
    train(steps, argc > 2 ? argv[2] : "ddp_train.safetensors", argc > 3 ? argv[3] : "");
    return 0;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "ddp_train: %s\n", error.what());
    return 1;
  }
}
