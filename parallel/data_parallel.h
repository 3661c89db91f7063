#pragma once
/// DataParallel: one process, many devices (torch.nn.DataParallel).
///
///   auto model = std::make_shared<DataParallel>(make_resnet("resnet20"),
///   parse_device_list("cpu:0,cpu:1")); Tensor loss = cross_entropy(model->forward(images),
///   labels); loss.backward();   // the master's .grad holds the whole batch's gradient
///
/// forward() scatters the batch along dim 0 (chunk_sizes), refreshes the replicas from the master
/// and ties them to it (Note [Persistent replicas]), runs replica i's forward on its own thread
/// with its share of the CPU threads, and gathers the outputs on the output device. backward()
/// runs each replica's part on its device's autograd worker and reduce-adds the gradients into
/// the master (Note [Replica gradients]). The master module is child "module", so parameter
/// names carry PyTorch's "module." prefix.

#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "nn/module.h"
#include "parallel/replicate.h"

namespace tandem::parallel {

struct DataParallelOptions {
  std::optional<Device> output_device =
      std::nullopt;                 ///< where outputs are gathered; default: the first device
  bool persistent_replicas = true;  ///< false: rebuild replicas every step, as PyTorch does
};

/// Where the last step's time went (milliseconds, host wall clock).
struct DataParallelTimings {
  double scatter_ms = 0;
  double replicate_ms = 0;  ///< building (non-persistent) or refreshing and tying the replicas
  double apply_ms = 0;      ///< the replicas' forward passes, run in parallel
  double gather_ms = 0;
  double reduce_ms = 0;  ///< reduce-adding gradients in backward (summed over parameters)
  int replicas = 0;      ///< replicas the batch was split over
};

/// Parses "cpu:0,cpu:1" or "cuda:0,cuda:0" (repeats allowed: each entry is one replica).
std::vector<Device> parse_device_list(std::string_view list);

class DataParallel final : public nn::Module {
 public:
  /// `module` must be on devices[0]. Devices must all be CPU or all CUDA, and exist.
  DataParallel(std::shared_ptr<nn::Module> module, std::vector<Device> devices,
               DataParallelOptions options = {});

  Tensor forward(const Tensor& input) override;
  std::string describe() const override;

  nn::Module& module() { return *module_; }
  const std::vector<Device>& devices() const { return devices_; }
  Device output_device() const { return output_device_; }
  /// The last forward's timings; reduce_ms covers the backward passes since that forward.
  DataParallelTimings last_timings() const;

 protected:
  std::shared_ptr<nn::Module> make_twin() const override;

 private:
  std::shared_ptr<nn::Module> module_;
  std::vector<Device> devices_;
  Device output_device_;
  DataParallelOptions options_;
  Replicas replicas_;
  DataParallelTimings timings_;
};

/// Runs modules[i](inputs[i]) on one thread each, with the caller's grad mode and an equal share
/// of its CPU threads. Every thread finishes before the first failure (lowest index) is rethrown,
/// naming the replica and device.
std::vector<Tensor> parallel_apply(const std::vector<std::shared_ptr<nn::Module>>& modules,
                                   const std::vector<Tensor>& inputs,
                                   const std::vector<Device>& devices);

}  // namespace tandem::parallel
