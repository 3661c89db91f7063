// The MPI group itself: its communicator, sub-groups, and how its operations are built and
// queued (Note [MPI lanes]), with the consistency check in front of each collective. The
// collectives and point-to-point operations themselves are in mpi_collectives.cpp.
#include "parallel/comm/mpi/mpi_group.h"

#include <climits>

#include "engine/device_runtime.h"
#include "engine/error.h"
#include "parallel/comm/collective_checks.h"

namespace tandem::parallel {
namespace {

int rank_in(MPI_Comm comm) {
  int rank = 0;
  check_mpi(MPI_Comm_rank(comm, &rank), "MPI_Comm_rank");
  return rank;
}

int size_of(MPI_Comm comm) {
  int size = 0;
  check_mpi(MPI_Comm_size(comm, &size), "MPI_Comm_size");
  return size;
}

// Note [Collective consistency] on MPI: the exchanges Gloo's check makes (gloo_consistency.cpp),
// as stages of the collective's operation. The buffers live as long as the stages.
struct Consistency {
  std::string call;
  std::vector<int64_t> alltoall_counts;
  std::string where;  // "allreduce on rank 1 of 2", for the message
  int64_t mine[2] = {0, 0};
  std::vector<int64_t> prints{};  // fingerprint and length of each rank's call
  std::vector<int> lengths{}, offsets{};
  std::vector<char> calls{};
  std::vector<int64_t> counts{};  // each rank's alltoall_counts
};

void refuse(MpiOperation& operation, const Consistency& check, const std::string& mismatch) {
  operation.error = std::make_exception_ptr(Error("[mpi] " + check.where + ": " + mismatch));
  operation.stages.clear();
}

// Posted after the fingerprints differ: every rank's call, to name them all.
void compare_calls(MPI_Comm comm, const std::shared_ptr<Consistency>& check,
                   MpiOperation& operation) {
  const size_t n = check->prints.size() / 2;
  int total = 0;
  for (size_t r = 0; r < n; ++r) {
    check->lengths.push_back(static_cast<int>(check->prints[2 * r + 1]));
    check->offsets.push_back(total);
    total += check->lengths.back();
  }
  check->calls.resize(static_cast<size_t>(total));
  operation.requests.emplace_back();
  check_mpi(MPI_Iallgatherv(check->call.data(), static_cast<int>(check->call.size()), MPI_CHAR,
                            check->calls.data(), check->lengths.data(), check->offsets.data(),
                            MPI_CHAR, comm, &operation.requests.back()),
            "MPI_Iallgatherv");
  operation.stages.push_front([check](MpiOperation& op) {
    std::vector<std::string> by_rank;
    for (size_t r = 0; r < check->lengths.size(); ++r) {
      by_rank.emplace_back(check->calls.data() + check->offsets[r],
                           static_cast<size_t>(check->lengths[r]));
    }
    const std::string mismatch = describe_mismatch(by_rank);
    if (!mismatch.empty()) refuse(op, *check, mismatch);
  });
}

// Posted once the calls agree, for alltoall: who sends whom how many.
void compare_counts(MPI_Comm comm, const std::shared_ptr<Consistency>& check,
                    MpiOperation& operation) {
  const auto per_rank = static_cast<int>(check->alltoall_counts.size());
  check->counts.resize(check->alltoall_counts.size() * check->prints.size() / 2);
  operation.requests.emplace_back();
  check_mpi(
      MPI_Iallgather(check->alltoall_counts.data(), per_rank, MPI_INT64_T, check->counts.data(),
                     per_rank, MPI_INT64_T, comm, &operation.requests.back()),
      "MPI_Iallgather");
  operation.stages.push_front([check, per_rank](MpiOperation& op) {
    std::vector<std::vector<int64_t>> by_rank;
    for (auto it = check->counts.begin(); it != check->counts.end(); it += per_rank) {
      by_rank.emplace_back(it, it + per_rank);
    }
    const std::string mismatch = alltoall_counts_mismatch(by_rank);
    if (!mismatch.empty()) refuse(op, *check, mismatch);
  });
}

// The stages in front of a collective's own.
std::deque<MpiOperation::Stage> consistency_stages(MPI_Comm comm, int size,
                                                   const std::shared_ptr<Consistency>& check) {
  std::deque<MpiOperation::Stage> stages;
  stages.emplace_back([comm, size, check](MpiOperation& op) {
    check->mine[0] = static_cast<int64_t>(fingerprint(check->call));
    check->mine[1] = static_cast<int64_t>(check->call.size());
    check->prints.resize(2 * static_cast<size_t>(size));
    op.requests.emplace_back();
    check_mpi(MPI_Iallgather(check->mine, 2, MPI_INT64_T, check->prints.data(), 2, MPI_INT64_T,
                             comm, &op.requests.back()),
              "MPI_Iallgather");
  });
  stages.emplace_back([comm, check](MpiOperation& op) {
    op.all_ranks_joined = true;  // every rank's fingerprint is in (Note [MPI polling])
    bool agree = true;
    for (size_t i = 0; i < check->prints.size(); i += 2) {
      agree = agree && check->prints[i] == check->mine[0] && check->prints[i + 1] == check->mine[1];
    }
    if (!agree) {
      compare_calls(comm, check, op);
    } else if (!check->alltoall_counts.empty()) {
      compare_counts(comm, check, op);
    }
  });
  return stages;
}

}  // namespace

MpiProcessGroup::MpiProcessGroup(std::shared_ptr<MpiEngine> engine, MPI_Comm comm,
                                 ProcessGroupOptions options)
    : ProcessGroup(rank_in(comm), size_of(comm), std::move(options)),
      engine_(std::move(engine)),
      shared_(std::make_shared<Shared>()) {
  shared_->comm = comm;
  shared_->rank = rank();
  shared_->size = size();
  check_mpi(MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
  lane_ = engine_->new_lane();
}

MpiProcessGroup::~MpiProcessGroup() {
  // Receives nobody will answer any more fail at once (as on Gloo). The communicator is freed
  // behind everything queued on the lane; sends still pending complete normally after
  // MPI_Comm_free, which only marks it for deallocation.
  MpiOperation free_comm;
  free_comm.work = make_work("freeing the communicator");
  free_comm.timeout = options().timeout;
  free_comm.stages.emplace_back([shared = shared_](MpiOperation&) {
    check_mpi(MPI_Comm_free(&shared->comm), "MPI_Comm_free");
  });
  engine_->cancel_receives(lane_);
  engine_->submit(lane_, std::move(free_comm));
  engine_->close_lane(lane_);
}

// Note [Collective order] holds per group: a sub-group has its own communicator and lane, so
// its collectives and this group's interleave freely. MPI_Comm_create_group involves the
// members only (the ranks outside got their refusing group from new_group()), and its traffic
// on this group's communicator is apart from the collectives the engine may be running there.
std::shared_ptr<ProcessGroup> MpiProcessGroup::make_subgroup(int index, int, int,
                                                             const std::vector<int>& ranks) {
  MPI_Group all = MPI_GROUP_NULL, members = MPI_GROUP_NULL;
  check_mpi(MPI_Comm_group(shared_->comm, &all), "MPI_Comm_group");
  const int included = MPI_Group_incl(all, static_cast<int>(ranks.size()), ranks.data(), &members);
  MPI_Group_free(&all);
  check_mpi(included, "MPI_Group_incl");
  MPI_Comm comm = MPI_COMM_NULL;
  int created = MPI_SUCCESS;
  const std::string what = "[mpi] new_group #" + std::to_string(index) + " on rank " +
                           std::to_string(rank()) + " of " + std::to_string(size()) +
                           " (MPI_Comm_create_group: does every member call new_group()?)";
  engine_->watch(what, options().timeout, [&] {
    created =
        MPI_Comm_create_group(shared_->comm, members, index % engine_->tag_upper_bound(), &comm);
  });
  MPI_Group_free(&members);
  check_mpi(created, "new_group: MPI_Comm_create_group");
  return std::make_shared<MpiProcessGroup>(engine_, comm, options());
}

void MpiProcessGroup::check_placement(const std::string& op, size_t index, const Tensor& t) const {
  TANDEM_CHECK(t.defined(), "[mpi] ", op, ": tensor ", index, " is undefined");
  TANDEM_CHECK(t.device().is_cpu() || engine_->cuda_aware(), "[mpi] ", op, ": tensor ", index,
               " is on ", t.device().str(),
               ", but this MPI is not CUDA-aware (MPIX_Query_cuda_support() says no), so the MPI "
               "process group takes CPU tensors only; use the nccl backend for CUDA tensors, or "
               "an Open MPI built --with-cuda");
  TANDEM_CHECK(t.is_dense(), "[mpi] ", op, ": tensor ", index,
               " is not dense (collectives work in place on contiguous or channels-last "
               "tensors)");
}

void MpiProcessGroup::wait_for_devices(const std::vector<Tensor>& tensors) {
  for (const Tensor& t : tensors) {
    if (t.defined() && t.device().is_cuda()) runtime_for(t.device()).synchronize(t.device());
  }
}

int MpiProcessGroup::count_of(const std::string& op, int64_t count) {
  TANDEM_CHECK(count <= INT_MAX, "[mpi] ", op, ": ", count,
               " elements in one call; MPI counts are int, at most ", INT_MAX);
  return static_cast<int>(count);
}

// --- operations

std::shared_ptr<Work> MpiProcessGroup::make_work(const std::string& what,
                                                 const std::string& detail) {
  return std::make_shared<Work>("[mpi] " + what + " #" + std::to_string(++submitted_) +
                                    " on rank " + std::to_string(rank()) + " of " +
                                    std::to_string(size()) + detail,
                                options().timeout);
}

std::shared_ptr<Work> MpiProcessGroup::collective(const std::string& op, std::string call,
                                                  std::vector<int64_t> alltoall_counts,
                                                  std::deque<MpiOperation::Stage> stages) {
  const std::string where =
      op + " on rank " + std::to_string(rank()) + " of " + std::to_string(size());
  MpiOperation operation;
  operation.work = make_work(op);
  operation.timeout = options().timeout;
  operation.fail = [shared = shared_, where](const std::string& failure) {
    std::lock_guard<std::mutex> lock(shared->mutex);
    if (shared->broken.empty()) shared->broken = failure;
    return std::make_exception_ptr(Error("[mpi] " + where + " failed: " + failure));
  };
  operation.stages.push_back(unless_broken(where));
  if (options().check_consistency && size() > 1) {
    auto check = std::make_shared<Consistency>(Consistency{
        .call = std::move(call), .alltoall_counts = std::move(alltoall_counts), .where = where});
    for (auto& stage : consistency_stages(shared_->comm, size(), check)) {
      operation.stages.push_back(std::move(stage));
    }
  }
  for (auto& stage : stages) operation.stages.push_back(std::move(stage));
  std::shared_ptr<Work> work = operation.work;
  engine_->submit(lane_, std::move(operation));
  return work;
}

MpiOperation::Stage MpiProcessGroup::unless_broken(const std::string& where) const {
  return [shared = shared_, where](MpiOperation& operation) {
    std::lock_guard<std::mutex> lock(shared->mutex);
    if (shared->broken.empty()) return;
    operation.error = std::make_exception_ptr(Error("[mpi] " + where +
                                                    " not run: the group is broken by an "
                                                    "earlier failure (" +
                                                    shared->broken + ")"));
    operation.stages.clear();
  };
}

std::shared_ptr<Work> MpiProcessGroup::point_to_point(const std::string& what,
                                                      const std::string& detail,
                                                      MpiOperation::Stage post,
                                                      MpiOperation::Stage finish) {
  MpiOperation operation;
  if (what == "irecv") operation.receive_of = lane_;
  operation.work = make_work(what, detail);
  operation.timeout = options().timeout;
  operation.fail = [description = operation.work->description()](const std::string& failure) {
    return std::make_exception_ptr(Error(description + " failed: " + failure));
  };
  operation.stages.push_back(
      unless_broken(what + " on rank " + std::to_string(rank()) + " of " + std::to_string(size())));
  operation.stages.push_back(std::move(post));
  operation.stages.push_back(std::move(finish));
  std::shared_ptr<Work> work = operation.work;
  engine_->submit(0, std::move(operation));
  return work;
}

}  // namespace tandem::parallel
