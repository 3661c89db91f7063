// The Gloo group's collectives: each queues a Task whose body runs Gloo's algorithm on the
// group's thread (Note [Gloo thread]). Reductions use host_reduce.h's functions.
#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/alltoallv.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/gather.h>
#include <gloo/reduce.h>
#include <gloo/scatter.h>

#include <numeric>
#include <type_traits>

#include "engine/error.h"
#include "parallel/comm/collective_checks.h"
#include "parallel/comm/gloo/gloo_process_group.h"
#include "parallel/comm/gloo/gloo_reduce_scatter.h"
#include "parallel/comm/host_reduce.h"

namespace tandem::parallel {
namespace {

// Calls body(T{}) with the element type T of `dtype`, one the group's checks let through.
template <typename Body>
void with_element_type(DType dtype, Body&& body) {
  switch (dtype) {
    case DType::Float32: return body(float{});
    case DType::Int64: return body(int64_t{});
    case DType::BFloat16: return body(BFloat16{});
    case DType::Float16: return body(Float16{});
    case DType::UInt8: break;
  }
  TANDEM_FAIL("[gloo] no collective for ", dtype_name(dtype), " tensors");
}

// Gloo's options take non-const pointers even to what they only read.
template <typename T>
T* elements_of(const Tensor& t) {
  return t.data<T>();
}

}  // namespace

std::shared_ptr<Work> GlooProcessGroup::run_allreduce(const std::string& op,
                                                      std::vector<Tensor> tensors,
                                                      ReduceOp reduce_op) {
  std::string call = describe_call("allreduce", tensors, -1, &reduce_op);
  return enqueue(op, std::move(call), [this, tensors, reduce_op](uint32_t tag) {
    for (const Tensor& t : tensors) {
      if (t.numel() == 0) continue;
      with_element_type(t.dtype(), [&](auto element) {
        using T = decltype(element);
        gloo::AllreduceOptions options(context_);
        options.setOutput(elements_of<T>(t), static_cast<size_t>(t.numel()));
        options.setReduceFunction(host_reduce_function(reduce_op, t.dtype()));
        options.setTag(tag++);
        options.setTimeout(this->options().timeout);
        gloo::allreduce(options);
      });
      if (reduce_op == ReduceOp::Avg) finish_average(t, size());
    }
    return static_cast<uint32_t>(tensors.size());
  });
}

std::shared_ptr<Work> GlooProcessGroup::run_broadcast(const std::string& op,
                                                      std::vector<Tensor> tensors, int root) {
  std::string call = describe_call("broadcast", tensors, root, nullptr);
  return enqueue(op, std::move(call), [this, tensors, root](uint32_t tag) {
    for (const Tensor& t : tensors) {
      if (t.numel() == 0) continue;
      with_element_type(t.dtype(), [&](auto element) {
        using T = decltype(element);
        gloo::BroadcastOptions options(context_);
        options.setOutput(elements_of<T>(t), static_cast<size_t>(t.numel()));
        options.setRoot(root);
        options.setTag(tag++);
        options.setTimeout(this->options().timeout);
        gloo::broadcast(options);
      });
    }
    return static_cast<uint32_t>(tensors.size());
  });
}

// Gloo's reduce leaves partial results in every rank's output; the other ranks' outputs are
// scratch copies, so their tensors keep their values.
std::shared_ptr<Work> GlooProcessGroup::run_reduce(const std::string& op,
                                                   std::vector<Tensor> tensors, int root,
                                                   ReduceOp reduce_op) {
  std::string call = describe_call("reduce", tensors, root, &reduce_op);
  return enqueue(op, std::move(call), [this, tensors, root, reduce_op](uint32_t tag) {
    for (const Tensor& t : tensors) {
      if (t.numel() == 0) continue;
      const Tensor output = rank() == root ? t : t.detach().clone();
      with_element_type(t.dtype(), [&](auto element) {
        using T = decltype(element);
        gloo::ReduceOptions options(context_);
        options.setInput(elements_of<T>(t), static_cast<size_t>(t.numel()));
        options.setOutput(elements_of<T>(output), static_cast<size_t>(t.numel()));
        options.setRoot(root);
        options.setReduceFunction(host_reduce_function(reduce_op, t.dtype()));
        options.setTag(tag++);
        options.setTimeout(this->options().timeout);
        gloo::reduce(options);
      });
      if (reduce_op == ReduceOp::Avg && rank() == root) finish_average(t, size());
    }
    return static_cast<uint32_t>(tensors.size());
  });
}

std::shared_ptr<Work> GlooProcessGroup::run_allgather(const std::string& op, Tensor output,
                                                      Tensor input) {
  std::string call = describe_call("allgather", {input}, -1, nullptr);
  return enqueue(op, std::move(call), [this, output, input](uint32_t tag) {
    if (input.numel() == 0) return 0u;
    with_element_type(input.dtype(), [&](auto element) {
      using T = decltype(element);
      gloo::AllgatherOptions options(context_);
      if (!is_own_chunk(output, input, rank()))
        options.setInput(elements_of<T>(input), static_cast<size_t>(input.numel()));
      options.setOutput(elements_of<T>(output), static_cast<size_t>(output.numel()));
      options.setTag(tag);
      options.setTimeout(this->options().timeout);
      gloo::allgather(options);
    });
    return 1u;
  });
}

std::shared_ptr<Work> GlooProcessGroup::run_gather(const std::string& op, Tensor output,
                                                   Tensor input, int root) {
  std::string call = describe_call("gather", {input}, root, nullptr);
  return enqueue(op, std::move(call), [this, output, input, root](uint32_t tag) {
    if (input.numel() == 0) return 0u;
    with_element_type(input.dtype(), [&](auto element) {
      using T = decltype(element);
      gloo::GatherOptions options(context_);
      options.setInput(elements_of<T>(input), static_cast<size_t>(input.numel()));
      if (rank() == root) {
        options.setOutput(elements_of<T>(output), static_cast<size_t>(output.numel()));
      }
      options.setRoot(root);
      options.setTag(tag);
      options.setTimeout(this->options().timeout);
      gloo::gather(options);
    });
    return 1u;
  });
}

std::shared_ptr<Work> GlooProcessGroup::run_scatter(const std::string& op, Tensor output,
                                                    Tensor input, int root) {
  std::string call = describe_call("scatter", {output}, root, nullptr);
  return enqueue(op, std::move(call), [this, output, input, root](uint32_t tag) {
    const auto n = static_cast<size_t>(output.numel());
    if (n == 0) return 0u;
    with_element_type(output.dtype(), [&](auto element) {
      using T = decltype(element);
      gloo::ScatterOptions options(context_);
      if (rank() == root) {
        std::vector<T*> parts(static_cast<size_t>(size()));
        for (int r = 0; r < size(); ++r) parts[r] = elements_of<T>(input) + r * n;
        options.setInputs(parts, n);
      }
      options.setOutput(elements_of<T>(output), n);
      options.setRoot(root);
      options.setTag(tag);
      options.setTimeout(this->options().timeout);
      gloo::scatter(options);
    });
    return 1u;
  });
}

std::shared_ptr<Work> GlooProcessGroup::run_reduce_scatter(const std::string& op, Tensor output,
                                                           Tensor input, ReduceOp reduce_op) {
  std::string call = describe_call("reduce_scatter", {output}, -1, &reduce_op);
  return enqueue(op, std::move(call), [this, output, input, reduce_op](uint32_t tag) {
    if (output.numel() == 0) return 0u;
    ring_reduce_scatter(context_, output, input, host_reduce_function(reduce_op, input.dtype()),
                        tag, options().timeout);
    if (reduce_op == ReduceOp::Avg) finish_average(output, size());
    return 1u;
  });
}

std::shared_ptr<Work> GlooProcessGroup::run_alltoall(const std::string& op, Tensor output,
                                                     Tensor input,
                                                     std::vector<int64_t> output_counts,
                                                     std::vector<int64_t> input_counts) {
  // Every rank joins Gloo's alltoallv, even one that sends and receives nothing: which ranks
  // exchange data is known only to the ranks together.
  std::vector<int64_t> counts = input_counts;
  counts.insert(counts.end(), output_counts.begin(), output_counts.end());
  return enqueue(
      op, std::string("alltoall: ") + dtype_name(input.dtype()),
      [this, output, input, output_counts, input_counts](uint32_t tag) {
        with_element_type(input.dtype(), [&](auto element) {
          using T = decltype(element);
          gloo::AlltoallvOptions options(context_);
          options.setInput(elements_of<T>(input), input_counts);
          options.setOutput(elements_of<T>(output), output_counts);
          options.setTag(tag);
          options.setTimeout(this->options().timeout);
          gloo::alltoallv(options);
        });
        return 1u;
      },
      std::move(counts));
}

std::shared_ptr<Work> GlooProcessGroup::run_barrier(const std::string& op) {
  return enqueue(op, "barrier", [this](uint32_t tag) {
    gloo::BarrierOptions options(context_);
    options.setTag(tag);
    options.setTimeout(this->options().timeout);
    gloo::barrier(options);
    return 1u;
  });
}

}  // namespace tandem::parallel
