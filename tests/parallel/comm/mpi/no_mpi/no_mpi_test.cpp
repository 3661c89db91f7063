// The MPI backend of a build without MPI (parallel/comm/mpi/no_mpi.cpp), built in every build: what
// `--backend mpi` and init_process_group("mpi") answer where CMake found no MPI.
#include <gtest/gtest.h>

#include <string>

#include "parallel/comm/mpi/mpi_process_group.h"
#include "tests/support/error_message.h"

namespace tandem::parallel {
namespace {

TEST(NoMpi, EveryEntryPointSaysHowToGetMpiInOneLine) {
  EXPECT_FALSE(mpi_available());
  const std::string expected =
      "[mpi] this build has no MPI backend: install Open MPI (apt-get install libopenmpi-dev "
      "openmpi-bin, or scripts/install_deps.sh) and configure again (the summary then shows ✓ "
      "MPI); or use --backend gloo";
  for (const std::string& message :
       {testing::error_message([] { mpi_environment(); }),
        testing::error_message([] { make_mpi_process_group(DistributedEnv{}); })}) {
    EXPECT_EQ(message.rfind(expected, 0), 0u) << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  }
}

}  // namespace
}  // namespace tandem::parallel
