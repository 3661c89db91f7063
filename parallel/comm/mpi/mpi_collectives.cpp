// The MPI group's collectives and point-to-point operations: each is a non-blocking MPI call
// posted by the engine's thread (Note [MPI progress] in mpi_engine.h) on the group's lane, with
// Note [MPI reductions] (mpi_datatypes.h) for the reduce ops and dtypes.
#include <numeric>

#include "engine/error.h"
#include "parallel/comm/collective_checks.h"
#include "parallel/comm/host_reduce.h"
#include "parallel/comm/mpi/mpi_datatypes.h"
#include "parallel/comm/mpi/mpi_group.h"

namespace tandem::parallel {
namespace {

using Stage = MpiOperation::Stage;

// The request slot of the next call a stage posts.
MPI_Request* next_request(MpiOperation& operation) {
  operation.requests.emplace_back(MPI_REQUEST_NULL);
  return &operation.requests.back();
}

// Avg's last step (Note [MPI reductions]), on the tensors that hold a sum.
Stage average(std::vector<Tensor> sums, int size) {
  return [sums = std::move(sums), size](MpiOperation&) {
    for (const Tensor& t : sums) finish_average(t, size);
  };
}

}  // namespace

std::shared_ptr<Work> MpiProcessGroup::run_allreduce(const std::string& op,
                                                     std::vector<Tensor> tensors,
                                                     ReduceOp reduce_op) {
  for (const Tensor& t : tensors) count_of(op, t.numel());
  wait_for_devices(tensors);
  std::deque<Stage> stages;
  stages.emplace_back([comm = shared_->comm, tensors, reduce_op](MpiOperation& operation) {
    for (const Tensor& t : tensors) {
      if (t.numel() == 0) continue;
      check_mpi(MPI_Iallreduce(MPI_IN_PLACE, t.data_ptr(), static_cast<int>(t.numel()),
                               mpi_datatype(t.dtype()), mpi_op(reduce_op, t.dtype()), comm,
                               next_request(operation)),
                "MPI_Iallreduce");
    }
  });
  if (reduce_op == ReduceOp::Avg) stages.push_back(average(tensors, size()));
  return collective(op, describe_call("allreduce", tensors, -1, &reduce_op), {}, std::move(stages));
}

std::shared_ptr<Work> MpiProcessGroup::run_broadcast(const std::string& op,
                                                     std::vector<Tensor> tensors, int root) {
  for (const Tensor& t : tensors) count_of(op, t.numel());
  wait_for_devices(tensors);
  std::string call = describe_call("broadcast", tensors, root, nullptr);
  Stage post = [comm = shared_->comm, tensors, root](MpiOperation& operation) {
    for (const Tensor& t : tensors) {
      if (t.numel() == 0) continue;
      check_mpi(MPI_Ibcast(t.data_ptr(), static_cast<int>(t.numel()), mpi_datatype(t.dtype()), root,
                           comm, next_request(operation)),
                "MPI_Ibcast");
    }
  };
  return collective(op, std::move(call), {}, {std::move(post)});
}

// The root reduces in place; the others only send, so their tensors keep their values.
std::shared_ptr<Work> MpiProcessGroup::run_reduce(const std::string& op,
                                                  std::vector<Tensor> tensors, int root,
                                                  ReduceOp reduce_op) {
  for (const Tensor& t : tensors) count_of(op, t.numel());
  wait_for_devices(tensors);
  const bool is_root = rank() == root;
  std::deque<Stage> stages;
  stages.emplace_back(
      [comm = shared_->comm, tensors, root, reduce_op, is_root](MpiOperation& operation) {
        for (const Tensor& t : tensors) {
          if (t.numel() == 0) continue;
          void* data = t.data_ptr();
          check_mpi(MPI_Ireduce(is_root ? MPI_IN_PLACE : data, is_root ? data : nullptr,
                                static_cast<int>(t.numel()), mpi_datatype(t.dtype()),
                                mpi_op(reduce_op, t.dtype()), root, comm, next_request(operation)),
                    "MPI_Ireduce");
        }
      });
  if (reduce_op == ReduceOp::Avg && is_root) stages.push_back(average(tensors, size()));
  return collective(op, describe_call("reduce", tensors, root, &reduce_op), {}, std::move(stages));
}

std::shared_ptr<Work> MpiProcessGroup::run_allgather(const std::string& op, Tensor output,
                                                     Tensor input) {
  count_of(op, output.numel());
  wait_for_devices({output, input});
  std::string call = describe_call("allgather", {input}, -1, nullptr);
  const bool in_place = is_own_chunk(output, input, rank());
  Stage post = [comm = shared_->comm, output, input, in_place](MpiOperation& operation) {
    if (input.numel() == 0) return;
    const MPI_Datatype type = mpi_datatype(input.dtype());
    const auto n = static_cast<int>(input.numel());
    check_mpi(MPI_Iallgather(in_place ? MPI_IN_PLACE : input.data_ptr(), n, type, output.data_ptr(),
                             n, type, comm, next_request(operation)),
              "MPI_Iallgather");
  };
  return collective(op, std::move(call), {}, {std::move(post)});
}

std::shared_ptr<Work> MpiProcessGroup::run_gather(const std::string& op, Tensor output,
                                                  Tensor input, int root) {
  count_of(op, input.numel() * size());
  wait_for_devices({output, input});
  std::string call = describe_call("gather", {input}, root, nullptr);
  Stage post = [comm = shared_->comm, output, input, root](MpiOperation& operation) {
    if (input.numel() == 0) return;
    const MPI_Datatype type = mpi_datatype(input.dtype());
    const auto n = static_cast<int>(input.numel());
    check_mpi(MPI_Igather(input.data_ptr(), n, type, output.defined() ? output.data_ptr() : nullptr,
                          n, type, root, comm, next_request(operation)),
              "MPI_Igather");
  };
  return collective(op, std::move(call), {}, {std::move(post)});
}

std::shared_ptr<Work> MpiProcessGroup::run_scatter(const std::string& op, Tensor output,
                                                   Tensor input, int root) {
  count_of(op, output.numel() * size());
  wait_for_devices({output, input});
  std::string call = describe_call("scatter", {output}, root, nullptr);
  Stage post = [comm = shared_->comm, output, input, root](MpiOperation& operation) {
    if (output.numel() == 0) return;
    const MPI_Datatype type = mpi_datatype(output.dtype());
    const auto n = static_cast<int>(output.numel());
    check_mpi(MPI_Iscatter(input.defined() ? input.data_ptr() : nullptr, n, type, output.data_ptr(),
                           n, type, root, comm, next_request(operation)),
              "MPI_Iscatter");
  };
  return collective(op, std::move(call), {}, {std::move(post)});
}

std::shared_ptr<Work> MpiProcessGroup::run_reduce_scatter(const std::string& op, Tensor output,
                                                          Tensor input, ReduceOp reduce_op) {
  count_of(op, input.numel());
  wait_for_devices({output, input});
  std::deque<Stage> stages;
  stages.emplace_back([comm = shared_->comm, output, input, reduce_op](MpiOperation& operation) {
    if (output.numel() == 0) return;
    check_mpi(
        MPI_Ireduce_scatter_block(input.data_ptr(), output.data_ptr(),
                                  static_cast<int>(output.numel()), mpi_datatype(output.dtype()),
                                  mpi_op(reduce_op, output.dtype()), comm, next_request(operation)),
        "MPI_Ireduce_scatter_block");
  });
  if (reduce_op == ReduceOp::Avg) stages.push_back(average({output}, size()));
  return collective(op, describe_call("reduce_scatter", {output}, -1, &reduce_op), {},
                    std::move(stages));
}

namespace {

// MPI_Ialltoallv's counts and displacements (ints), alive until it completes.
struct AlltoallLayout {
  std::vector<int> send_counts, send_offsets, receive_counts, receive_offsets;
};

void lay_out(const std::vector<int64_t>& counts, std::vector<int>& ints,
             std::vector<int>& offsets) {
  int offset = 0;
  for (const int64_t count : counts) {
    ints.push_back(static_cast<int>(count));
    offsets.push_back(offset);
    offset += static_cast<int>(count);
  }
}

}  // namespace

// Every rank joins MPI_Ialltoallv, even one that sends and receives nothing: which ranks
// exchange data is known only to the ranks together.
std::shared_ptr<Work> MpiProcessGroup::run_alltoall(const std::string& op, Tensor output,
                                                    Tensor input,
                                                    std::vector<int64_t> output_counts,
                                                    std::vector<int64_t> input_counts) {
  const auto total = [](const std::vector<int64_t>& c) {
    return std::accumulate(c.begin(), c.end(), int64_t{0});
  };
  count_of(op, total(input_counts));
  count_of(op, total(output_counts));
  wait_for_devices({output, input});
  auto layout = std::make_shared<AlltoallLayout>();
  lay_out(input_counts, layout->send_counts, layout->send_offsets);
  lay_out(output_counts, layout->receive_counts, layout->receive_offsets);
  std::vector<int64_t> counts = input_counts;
  counts.insert(counts.end(), output_counts.begin(), output_counts.end());
  Stage post = [comm = shared_->comm, output, input, layout](MpiOperation& operation) {
    const MPI_Datatype type = mpi_datatype(input.dtype());
    check_mpi(
        MPI_Ialltoallv(input.data_ptr(), layout->send_counts.data(), layout->send_offsets.data(),
                       type, output.data_ptr(), layout->receive_counts.data(),
                       layout->receive_offsets.data(), type, comm, next_request(operation)),
        "MPI_Ialltoallv");
  };
  return collective(op, std::string("alltoall: ") + dtype_name(input.dtype()), std::move(counts),
                    {std::move(post)});
}

std::shared_ptr<Work> MpiProcessGroup::run_barrier(const std::string& op) {
  Stage post = [comm = shared_->comm](MpiOperation& operation) {
    check_mpi(MPI_Ibarrier(comm, next_request(operation)), "MPI_Ibarrier");
  };
  return collective(op, "barrier", {}, {std::move(post)});
}

// --- point-to-point

std::shared_ptr<Work> MpiProcessGroup::run_send(Tensor tensor, int dst, int tag) {
  const int n = count_of("isend", tensor.numel());
  TANDEM_CHECK(tag <= engine_->tag_upper_bound(), "[mpi] isend: tag ", tag,
               " is above MPI's largest, ", engine_->tag_upper_bound(), " (MPI_TAG_UB)");
  wait_for_devices({tensor});
  Stage post = [comm = shared_->comm, tensor, n, dst, tag](MpiOperation& operation) {
    check_mpi(MPI_Isend(tensor.data_ptr(), n, mpi_datatype(tensor.dtype()), dst, tag, comm,
                        next_request(operation)),
              "MPI_Isend");
  };
  return point_to_point("isend", " to rank " + std::to_string(dst) + ", tag " + std::to_string(tag),
                        std::move(post), [](MpiOperation&) {});
}

std::shared_ptr<Work> MpiProcessGroup::run_recv(Tensor tensor, int src, int tag) {
  const int n = count_of("irecv", tensor.numel());
  TANDEM_CHECK(tag <= engine_->tag_upper_bound(), "[mpi] irecv: tag ", tag,
               " is above MPI's largest, ", engine_->tag_upper_bound(), " (MPI_TAG_UB)");
  wait_for_devices({tensor});
  const MPI_Datatype type = mpi_datatype(tensor.dtype());
  Stage post = [comm = shared_->comm, tensor, n, type, src, tag](MpiOperation& operation) {
    check_mpi(MPI_Irecv(tensor.data_ptr(), n, type, src == kAnySource ? MPI_ANY_SOURCE : src, tag,
                        comm, next_request(operation)),
              "MPI_Irecv");
  };
  // A longer message fails the receive (MPI_ERR_TRUNCATE); a shorter one is caught here.
  Stage finish = [n, type](MpiOperation& operation) {
    MPI_Status& status = operation.statuses.front();
    int received = 0;
    MPI_Get_count(&status, type, &received);
    TANDEM_CHECK(received == n, "received ", received, " elements from rank ", status.MPI_SOURCE,
                 " but the tensor has ", n);
    operation.work->set_source_rank(status.MPI_SOURCE);
  };
  const std::string from = src == kAnySource ? "any rank" : "rank " + std::to_string(src);
  return point_to_point("irecv", " from " + from + ", tag " + std::to_string(tag), std::move(post),
                        std::move(finish));
}

}  // namespace tandem::parallel
