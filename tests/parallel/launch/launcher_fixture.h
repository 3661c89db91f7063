#pragma once
/// LauncherTest: runs launch() with shell-script workers, their output going to a file that the
/// test reads back (launcher_test.cpp, launcher_restart_test.cpp).

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "parallel/launch/launcher.h"
#include "tests/support/temp_dir.h"

namespace tandem::parallel {

// Runs launch() with the workers' output going to a file, and reads it back.
class LauncherTest : public ::testing::Test {
 protected:
  LaunchResult run(LaunchOptions options) {
    const int fd = ::open(output_path().c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0644);
    EXPECT_GE(fd, 0);
    options.stdout_fd = fd;
    options.stderr_fd = fd;
    options.master_port = 0;
    LaunchResult result = launch(options);
    ::close(fd);
    return result;
  }
  std::string output() const {
    std::ifstream in(output_path());
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }
  std::string output_path() const { return dir_.file("output.txt"); }

  static LaunchOptions shell(int nproc, const std::string& script) {
    LaunchOptions options;
    options.nproc_per_node = nproc;
    options.command = {"/bin/sh", "-c", script};
    options.kill_grace = std::chrono::milliseconds(500);
    return options;
  }

  // Sends this process (and so launch()) SIGINT once both workers have created `ready` + RANK:
  // only then have they set their traps.
  static std::thread interrupt_when_ready(const std::string& ready) {
    return std::thread([ready] {
      while (::access((ready + "0").c_str(), F_OK) != 0 ||
             ::access((ready + "1").c_str(), F_OK) != 0) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      ::kill(::getpid(), SIGINT);
    });
  }

  tandem::testing::TempDir dir_;
};

}  // namespace tandem::parallel
