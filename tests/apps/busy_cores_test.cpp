// The bf16 warning on a busy machine (Note [bf16 on busy cores]): when it is said, and the load
// it reads.
#include "apps/common/busy_cores.h"

#include <gtest/gtest.h>

#include <fstream>

#include "tests/support/temp_dir.h"

namespace tandem::apps {
namespace {

using nn::Precision;

TEST(BusyCores, Bf16OnSeveralThreadsOfBusyCoresIsWarnedWithTheRemedy) {
  const std::string line =
      bf16_on_busy_cores_warning("train_cifar", Precision::BFloat16, 2, 5.26, 2);
  EXPECT_EQ(
      line.rfind("train_cifar: warning: other work keeps the cores busy (load 5.3 on 2 cores)", 0),
      0u)
      << line;
  EXPECT_NE(line.find("--threads 1"), std::string::npos) << line;
  EXPECT_EQ(line.find('\n'), std::string::npos) << "one line";
}

TEST(BusyCores, NothingIsSaidWhereTheMeasurementShowedNoCollapse) {
  EXPECT_EQ(bf16_on_busy_cores_warning("p", Precision::Float32, 2, 9.0, 2), "") << "fp32";
  EXPECT_EQ(bf16_on_busy_cores_warning("p", Precision::BFloat16, 1, 9.0, 2), "") << "1 thread";
  EXPECT_EQ(bf16_on_busy_cores_warning("p", Precision::BFloat16, 2, 1.9, 2), "") << "quiet";
  EXPECT_NE(bf16_on_busy_cores_warning("p", Precision::BFloat16, 2, 2.0, 2), "") << "load = cores";
}

TEST(BusyCores, TheLoadIsTheFirstFieldOfLoadavgAndAnUnreadableFileGivesNone) {
  const testing::TempDir dir;
  const std::string path = dir.file("loadavg");
  std::ofstream(path) << "5.26 4.69 4.57 2/130 1832\n";
  ASSERT_TRUE(read_load_average(path).has_value());
  EXPECT_DOUBLE_EQ(*read_load_average(path), 5.26);
  for (const char* broken : {"garbage\n", "5.26x 4.69\n", "-1 0 0\n", "nan 0 0\n", ""}) {
    std::ofstream(path) << broken;
    EXPECT_FALSE(read_load_average(path).has_value()) << broken;
  }
  EXPECT_FALSE(read_load_average(dir.file("missing")).has_value());
  EXPECT_TRUE(read_load_average().has_value()) << "/proc/loadavg on Linux";
}

}  // namespace
}  // namespace tandem::apps
