// The table of process-group backends (parallel/comm/backends.h): what each row says, the
// default per device, and the errors that list the table's names.
#include "parallel/comm/backends.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

#include "parallel/comm/init_process_group.h"
#include "tests/support/error_message.h"

namespace tandem::parallel {
namespace {

using tandem::testing::contains;
using tandem::testing::error_message;

TEST(Backends, EveryRowIsCompleteAndNamedOnce) {
  std::set<std::string> names;
  for (const BackendInfo& backend : backends()) {
    EXPECT_TRUE(names.insert(backend.name).second) << backend.name;
    EXPECT_NE(std::string(backend.description), "") << backend.name;
    EXPECT_NE(backend.available, nullptr) << backend.name;
    EXPECT_NE(backend.environment, nullptr) << backend.name;
    EXPECT_NE(backend.make, nullptr) << backend.name;
    // A rank started by mpirun learns its place from MPI; the others meet at a store.
    EXPECT_EQ(backend.needs_store, backend.start == RankStart::Launcher) << backend.name;
    EXPECT_EQ(&find_backend(backend.name), &backend);
  }
  EXPECT_EQ(names, (std::set<std::string>{"gloo", "nccl", "mpi"}));
}

TEST(Backends, WhatEachTakesAndHowItStarts) {
  EXPECT_EQ(find_backend("nccl").devices, DeviceType::CUDA);
  EXPECT_EQ(find_backend("gloo").devices, DeviceType::CPU);
  EXPECT_EQ(find_backend("mpi").devices, DeviceType::CPU);
  EXPECT_EQ(find_backend("mpi").start, RankStart::Mpirun);
  EXPECT_TRUE(find_backend("gloo").available());
}

// As a PyTorch script picks: nccl for CUDA tensors, gloo for CPU ones (the first row of each).
TEST(Backends, TheDefaultIsTheFirstRowForTheDevice) {
  EXPECT_STREQ(default_backend(DeviceType::CUDA).name, "nccl");
  EXPECT_STREQ(default_backend(DeviceType::CPU).name, "gloo");
}

TEST(Backends, AnUnknownNameIsRefusedListingTheTable) {
  const std::string message = error_message([] { find_backend("ucc"); });
  EXPECT_TRUE(contains(message, "[process_group] unknown backend 'ucc'; choose ")) << message;
  for (const BackendInfo& backend : backends()) {
    EXPECT_TRUE(contains(message, std::string(backend.name) + " (" + backend.description + ")"))
        << message;
  }
  // init_process_group takes the names of the table alone, exactly spelled.
  EXPECT_TRUE(contains(error_message([] { init_process_group("GLOO", DistributedEnv{}); }),
                       "unknown backend 'GLOO'; choose " + backend_choices()));
}

TEST(Backends, ChoicesReadAsASentence) {
  EXPECT_EQ(backend_choices(),
            "nccl (CUDA tensors, a GPU per rank), gloo (CPU tensors) or mpi (CPU tensors, ranks "
            "started by mpirun)");
}

}  // namespace
}  // namespace tandem::parallel
