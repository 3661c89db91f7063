#pragma once
// A Gloo group of one rank on a store of its own, for the argument checks and the one-rank
// collectives (gloo_process_group_test.cpp, gloo_groups_test.cpp).
#include <gtest/gtest.h>

#include <chrono>
#include <memory>

#include "parallel/comm/gloo/gloo_process_group.h"
#include "parallel/comm/rendezvous/store.h"
#include "parallel/comm/rendezvous/store_server.h"

namespace tandem::parallel::testing {

class GlooSoloGroup : public ::testing::Test {
 protected:
  GlooSoloGroup()
      : store_(std::make_shared<TcpStore>(
            TcpStoreOptions{.port = server_.port(), .timeout = std::chrono::seconds(10)})),
        group_(store_, 0, 1, {.timeout = std::chrono::seconds(10)}) {}

  StoreServer server_;
  std::shared_ptr<TcpStore> store_;
  GlooProcessGroup group_;
};

}  // namespace tandem::parallel::testing
