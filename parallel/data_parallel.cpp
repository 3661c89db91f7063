#include "parallel/data_parallel.h"

#include <chrono>
#include <exception>
#include <sstream>
#include <thread>

#include "engine/autograd/grad_mode.h"
#include "engine/device_runtime.h"
#include "engine/elapsed.h"
#include "engine/profiler.h"
#include "engine/threads.h"
#include "parallel/scatter_gather.h"

namespace tandem::parallel {
namespace {

using Clock = std::chrono::steady_clock;

void check_devices(const std::vector<Device>& devices) {
  TANDEM_CHECK(!devices.empty(), "[DataParallel] needs at least one device");
  for (const Device& device : devices) {
    TANDEM_CHECK(device.type == devices.front().type,
                 "[DataParallel] devices must be all CPU or "
                 "all CUDA, got ",
                 devices.front(), " and ", device);
    TANDEM_CHECK(device.index >= 0, "[DataParallel] invalid device ", device);
    if (device.is_cuda()) {
      TANDEM_CHECK(cuda_available(), "[DataParallel] device ", device,
                   " requested, but this build has no CUDA backend or no GPU is visible");
      const int count = runtime_for(device).device_count();
      TANDEM_CHECK(device.index < count, "[DataParallel] device ", device, " does not exist (",
                   count, " CUDA device", count == 1 ? "" : "s", " visible)");
    }
  }
}

std::string replica_failure(size_t index, Device device, const std::exception_ptr& error) {
  std::ostringstream message;
  message << "[DataParallel] replica " << index << " on " << device << " failed: ";
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    message << message_of(e);
  } catch (...) {
    message << "unknown exception";
  }
  return message.str();
}

}  // namespace

std::vector<Device> parse_device_list(std::string_view list) {
  std::vector<Device> devices;
  size_t start = 0;
  while (start <= list.size()) {
    const size_t comma = std::min(list.find(',', start), list.size());
    const std::string_view entry = list.substr(start, comma - start);
    TANDEM_CHECK(!entry.empty(), "[devices] empty entry in device list \"", list, "\"");
    devices.push_back(Device::parse(entry));
    start = comma + 1;
  }
  return devices;
}

std::vector<Tensor> parallel_apply(const std::vector<std::shared_ptr<nn::Module>>& modules,
                                   const std::vector<Tensor>& inputs,
                                   const std::vector<Device>& devices) {
  const profiler::RecordScope scope("DataParallel.parallel_apply", profiler::Category::Annotation);
  TANDEM_CHECK(modules.size() == inputs.size() && inputs.size() <= devices.size(),
               "[parallel_apply] ", modules.size(), " modules, ", inputs.size(), " inputs, ",
               devices.size(), " devices");
  const size_t n = inputs.size();
  std::vector<Tensor> outputs(n);
  std::vector<std::exception_ptr> errors(n);
  const bool grad_mode = autograd::grad_mode_enabled();
  const int threads_each = std::max(1, num_threads() / static_cast<int>(n));
  auto run = [&](size_t i) {
    try {
      autograd::set_grad_mode_enabled(grad_mode);  // thread-local: new threads start enabled
      if (n > 1 && profiler::enabled()) profiler::set_thread_name("replica " + devices[i].str());
      ThreadCountGuard threads(threads_each);
      outputs[i] = modules[i]->forward(inputs[i]);
    } catch (...) {
      errors[i] = std::current_exception();
    }
  };
  if (n == 1) {
    run(0);
  } else {
    std::vector<std::jthread> workers;
    for (size_t i = 0; i < n; ++i) workers.emplace_back(run, i);
  }  // jthreads join here
  for (size_t i = 0; i < n; ++i) {
    if (errors[i]) throw Error(replica_failure(i, devices[i], errors[i]));
  }
  return outputs;
}

DataParallel::DataParallel(std::shared_ptr<nn::Module> module, std::vector<Device> devices,
                           DataParallelOptions options)
    : module_(std::move(module)),
      devices_(std::move(devices)),
      output_device_(Device::cpu()),
      options_(options),
      replicas_(module_, devices_, options.persistent_replicas) {
  check_devices(devices_);
  output_device_ = options_.output_device.value_or(devices_.front());
  check_devices({output_device_});
  register_module("module", module_);
}

Tensor DataParallel::forward(const Tensor& input) {
  timings_ = {};
  replicas_.reset_reduce_ns();

  auto start = Clock::now();
  const std::vector<Tensor> inputs = scatter(input, devices_);
  timings_.scatter_ms = milliseconds_since(start);
  timings_.replicas = static_cast<int>(inputs.size());

  start = Clock::now();
  const auto replicas = replicas_.prepare(inputs.size());
  timings_.replicate_ms = milliseconds_since(start);

  start = Clock::now();
  const std::vector<Tensor> outputs = parallel_apply(replicas, inputs, devices_);
  timings_.apply_ms = milliseconds_since(start);

  start = Clock::now();
  Tensor output = gather(outputs, output_device_);
  timings_.gather_ms = milliseconds_since(start);
  return output;
}

DataParallelTimings DataParallel::last_timings() const {
  DataParallelTimings timings = timings_;
  timings.reduce_ms = static_cast<double>(replicas_.reduce_ns()) / 1e6;
  return timings;
}

std::string DataParallel::describe() const {
  std::ostringstream out;
  out << "DataParallel(";
  for (size_t i = 0; i < devices_.size(); ++i) out << (i ? "," : "") << devices_[i];
  out << ")";
  return out.str();
}

std::shared_ptr<nn::Module> DataParallel::make_twin() const {
  return std::make_shared<DataParallel>(module_->clone(), devices_, options_);
}

}  // namespace tandem::parallel
