#include <gtest/gtest.h>

#include <map>
#include <string>

#include "parallel/comm/rendezvous/launch_env.h"
#include "tests/support/error_message.h"

namespace tandem::parallel {
namespace {

using tandem::testing::error_message;
using Vars = std::map<std::string, std::string>;

void expect_error(const Vars& vars, const std::string& expected) {
  const std::string message = error_message([&] { from_variables(vars); });
  EXPECT_NE(message.find(expected), std::string::npos) << message;
  EXPECT_EQ(message.rfind("[env] ", 0), 0u) << message;
}

Vars torchrun() {
  return {{"RANK", "5"},
          {"WORLD_SIZE", "8"},
          {"LOCAL_RANK", "1"},
          {"LOCAL_WORLD_SIZE", "4"},
          {"MASTER_ADDR", "node0"},
          {"MASTER_PORT", "29400"}};
}

TEST(LaunchEnv, ReadsTorchrunVariables) {
  const DistributedEnv env = from_variables(torchrun());
  EXPECT_EQ(env.rank, 5);
  EXPECT_EQ(env.world_size, 8);
  EXPECT_EQ(env.local_rank, 1);
  EXPECT_EQ(env.local_world_size, 4);
  EXPECT_EQ(env.master_addr, "node0");
  EXPECT_EQ(env.master_port, 29400);
  EXPECT_EQ(env.launcher, "torchrun");
  EXPECT_EQ(env.store_host, StoreHost::Rank0);
  Vars hosted = torchrun();
  hosted["TANDEM_STORE_HOSTED"] = "1";
  EXPECT_EQ(from_variables(hosted).store_host, StoreHost::TandemRun);
}

// torchrun (static rendezvous) hosts PyTorch's TCPStore in its agent and says so; the restart
// count scopes each attempt's keys.
TEST(LaunchEnv, TorchrunAgentStore) {
  Vars agent = torchrun();
  agent["TORCHELASTIC_USE_AGENT_STORE"] = "True";
  agent["TORCHELASTIC_RESTART_COUNT"] = "2";
  const DistributedEnv env = from_variables(agent);
  EXPECT_EQ(env.store_host, StoreHost::TorchrunAgent);
  EXPECT_EQ(env.restart_count, 2);
  agent["TORCHELASTIC_USE_AGENT_STORE"] = "False";  // the c10d rendezvous: rank 0 hosts
  EXPECT_EQ(from_variables(agent).store_host, StoreHost::Rank0);
  agent["TORCHELASTIC_USE_AGENT_STORE"] = "True";
  agent["TORCHELASTIC_RESTART_COUNT"] = "two";
  expect_error(agent, "TORCHELASTIC_RESTART_COUNT='two' is not an integer");
}

// A launcher-hosted store keeps every attempt's keys, so each attempt scopes its own (tandem-run
// --max-restarts, torchrun); a store rank 0 hosts starts empty and needs no prefix.
TEST(LaunchEnv, LauncherHostedStoresScopeKeysByAttempt) {
  Vars hosted = torchrun();
  hosted["TANDEM_STORE_HOSTED"] = "1";
  hosted["TORCHELASTIC_RESTART_COUNT"] = "2";
  DistributedEnv env = from_variables(hosted);
  EXPECT_EQ(env.restart_count, 2);
  EXPECT_EQ(worker_store_prefix(env), "/worker/attempt_2/");
  hosted.erase("TORCHELASTIC_RESTART_COUNT");  // tandem-run without --max-restarts: attempt 0
  EXPECT_EQ(worker_store_prefix(from_variables(hosted)), "/worker/attempt_0/");
  hosted["TORCHELASTIC_USE_AGENT_STORE"] = "True";
  hosted["TORCHELASTIC_RESTART_COUNT"] = "3";
  EXPECT_EQ(worker_store_prefix(from_variables(hosted)), "/worker/attempt_3/");
  Vars rank0 = torchrun();
  rank0["TORCHELASTIC_RESTART_COUNT"] = "2";
  env = from_variables(rank0);
  EXPECT_EQ(env.restart_count, 0);
  EXPECT_EQ(worker_store_prefix(env), "");
  hosted["TORCHELASTIC_RESTART_COUNT"] = "two";
  hosted.erase("TORCHELASTIC_USE_AGENT_STORE");
  expect_error(hosted, "TORCHELASTIC_RESTART_COUNT='two' is not an integer");
}

TEST(LaunchEnv, TorchrunLocalVariablesDefaultToOneMachine) {
  const DistributedEnv env = from_variables(
      {{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", "1234"}});
  EXPECT_EQ(env.local_rank, 1);
  EXPECT_EQ(env.local_world_size, 2);
}

TEST(LaunchEnv, ReadsOpenMpiVariables) {
  const DistributedEnv env = from_variables({{"OMPI_COMM_WORLD_RANK", "3"},
                                             {"OMPI_COMM_WORLD_SIZE", "4"},
                                             {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                                             {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"},
                                             {"MASTER_ADDR", "10.0.0.1"},
                                             {"MASTER_PORT", "29500"}});
  EXPECT_EQ(env.rank, 3);
  EXPECT_EQ(env.world_size, 4);
  EXPECT_EQ(env.local_rank, 1);
  EXPECT_EQ(env.local_world_size, 2);
  EXPECT_EQ(env.master_addr, "10.0.0.1");
  EXPECT_EQ(env.launcher, "mpirun");
}

TEST(LaunchEnv, RanksOnOneMachineShareItsCores) {
  // Under mpirun (and srun) nothing divides the cores, so each rank takes its share itself.
  const DistributedEnv env = from_variables({{"OMPI_COMM_WORLD_RANK", "0"},
                                             {"OMPI_COMM_WORLD_SIZE", "4"},
                                             {"OMPI_COMM_WORLD_LOCAL_RANK", "0"},
                                             {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"},
                                             {"MASTER_ADDR", "10.0.0.1"},
                                             {"MASTER_PORT", "29500"}});
  EXPECT_EQ(threads_per_local_rank(env, 16), 8);
  EXPECT_EQ(threads_per_local_rank(env, 3), 1);
  EXPECT_EQ(threads_per_local_rank(env, 1), 1);  // never 0
}

TEST(LaunchEnv, ReadsSlurmVariables) {
  Vars vars = {{"SLURM_PROCID", "6"},   {"SLURM_NTASKS", "7"},
               {"SLURM_LOCALID", "0"},  {"SLURM_TASKS_PER_NODE", "2(x3),1"},
               {"SLURM_NODEID", "3"},   {"MASTER_ADDR", "gpu01"},
               {"MASTER_PORT", "29500"}};
  DistributedEnv env = from_variables(vars);
  EXPECT_EQ(env.rank, 6);
  EXPECT_EQ(env.world_size, 7);
  EXPECT_EQ(env.local_rank, 0);
  EXPECT_EQ(env.local_world_size, 1);  // the fourth node runs the one leftover task
  EXPECT_EQ(env.launcher, "srun");
  vars["SLURM_NTASKS_PER_NODE"] = "2";  // when given, it wins
  vars["SLURM_PROCID"] = "5";
  vars["SLURM_LOCALID"] = "1";
  env = from_variables(vars);
  EXPECT_EQ(env.local_world_size, 2);
  EXPECT_EQ(env.local_rank, 1);
}

TEST(LaunchEnv, TorchrunWinsOverTheOthers) {
  Vars vars = torchrun();
  vars["OMPI_COMM_WORLD_RANK"] = "0";
  vars["SLURM_PROCID"] = "0";
  EXPECT_EQ(from_variables(vars).launcher, "torchrun");
}

TEST(LaunchEnv, SlurmTaskCounts) {
  EXPECT_EQ(slurm_tasks_on_node("4", 0), 4);
  EXPECT_EQ(slurm_tasks_on_node("2(x3),1", 0), 2);
  EXPECT_EQ(slurm_tasks_on_node("2(x3),1", 2), 2);
  EXPECT_EQ(slurm_tasks_on_node("2(x3),1", 3), 1);
  EXPECT_EQ(slurm_tasks_on_node("1,3(x2)", 2), 3);
  for (const char* bad : {"", "x", "2(x", "2(x0)", "0", "2(3)", "2,,1"}) {
    EXPECT_NE(error_message([&] {
                slurm_tasks_on_node(bad, 0);
              }).find("[env] SLURM_TASKS_PER_NODE='" + std::string(bad) + "' is malformed"),
              std::string::npos)
        << bad;
  }
  EXPECT_NE(error_message([&] {
              slurm_tasks_on_node("2(x3)", 3);
            }).find("[env] SLURM_NODEID=3 is out of range"),
            std::string::npos);
}

TEST(LaunchEnv, NothingSetSaysHowToLaunch) {
  expect_error({}, "[env] not started by a launcher");
  expect_error({}, "tandem-run --nproc-per-node");
  EXPECT_FALSE(launched_distributed([](const std::string&) { return std::nullopt; }));
}

TEST(LaunchEnv, LaunchedDistributedSeesEachLauncher) {
  for (const Vars& vars : {Vars{{"RANK", "0"}, {"WORLD_SIZE", "1"}},
                           Vars{{"OMPI_COMM_WORLD_RANK", "0"}}, Vars{{"SLURM_PROCID", "0"}}}) {
    EXPECT_TRUE(launched_distributed([&](const std::string& name) -> std::optional<std::string> {
      const auto it = vars.find(name);
      if (it == vars.end()) return std::nullopt;
      return it->second;
    })) << vars.begin()->first;
  }
}

TEST(LaunchEnv, MissingVariablesAreNamed) {
  Vars vars = torchrun();
  vars.erase("WORLD_SIZE");
  expect_error(vars, "[env] WORLD_SIZE is not set");
  vars = torchrun();
  vars.erase("MASTER_ADDR");
  expect_error(vars, "[env] MASTER_ADDR is not set (launched by torchrun)");
  vars = torchrun();
  vars.erase("MASTER_PORT");
  expect_error(vars, "[env] MASTER_PORT is not set");
}

TEST(LaunchEnv, MpirunAndSrunSayHowToSetTheRendezvous) {
  Vars mpi = {{"OMPI_COMM_WORLD_RANK", "0"},
              {"OMPI_COMM_WORLD_SIZE", "2"},
              {"OMPI_COMM_WORLD_LOCAL_RANK", "0"},
              {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}};
  expect_error(mpi, "[env] MASTER_ADDR is not set (launched by mpirun)");
  expect_error(mpi, "mpirun -x MASTER_ADDR -x MASTER_PORT");
  mpi["MASTER_ADDR"] = "host";
  expect_error(mpi, "[env] MASTER_PORT is not set (launched by mpirun)");
  mpi.erase("OMPI_COMM_WORLD_LOCAL_SIZE");
  expect_error(mpi, "[env] OMPI_COMM_WORLD_LOCAL_SIZE is not set");

  Vars slurm = {{"SLURM_PROCID", "0"},
                {"SLURM_NTASKS", "2"},
                {"SLURM_LOCALID", "0"},
                {"SLURM_NTASKS_PER_NODE", "2"}};
  expect_error(slurm, "[env] MASTER_ADDR is not set (launched by srun)");
  expect_error(slurm, "scontrol show hostnames");
  slurm.erase("SLURM_NTASKS_PER_NODE");
  expect_error(slurm, "neither SLURM_NTASKS_PER_NODE nor SLURM_TASKS_PER_NODE is set");
}

TEST(LaunchEnv, ValuesAreChecked) {
  auto with = [](const std::string& name, const std::string& value) {
    Vars vars = torchrun();
    vars[name] = value;
    return vars;
  };
  expect_error(with("RANK", "abc"), "[env] RANK='abc' is not an integer");
  expect_error(with("RANK", "3x"), "[env] RANK='3x' is not an integer");
  expect_error(with("RANK", "8"), "[env] RANK=8 is out of range for WORLD_SIZE=8 (ranks are 0..7)");
  expect_error(with("RANK", "-1"), "[env] RANK=-1 is out of range");
  expect_error(with("WORLD_SIZE", "0"), "[env] WORLD_SIZE=0 must be at least 1");
  expect_error(with("LOCAL_WORLD_SIZE", "9"), "[env] LOCAL_WORLD_SIZE=9 must be in 1..WORLD_SIZE");
  expect_error(with("LOCAL_RANK", "4"),
               "[env] LOCAL_RANK=4 is out of range for LOCAL_WORLD_SIZE=4");
  expect_error(with("MASTER_PORT", "70000"), "[env] MASTER_PORT=70000 is out of range");
  expect_error(with("MASTER_PORT", "0"), "[env] MASTER_PORT=0 cannot work with 8 processes");
  expect_error(with("MASTER_ADDR", ""), "[env] MASTER_ADDR is not set");
  expect_error({{"OMPI_COMM_WORLD_RANK", "2"},
                {"OMPI_COMM_WORLD_SIZE", "2"},
                {"OMPI_COMM_WORLD_LOCAL_RANK", "0"},
                {"OMPI_COMM_WORLD_LOCAL_SIZE", "1"},
                {"MASTER_ADDR", "h"},
                {"MASTER_PORT", "1"}},
               "[env] OMPI_COMM_WORLD_RANK=2 is out of range for OMPI_COMM_WORLD_SIZE=2");
  // One process needs no agreed port.
  EXPECT_EQ(
      from_variables(
          {{"RANK", "0"}, {"WORLD_SIZE", "1"}, {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", "0"}})
          .master_port,
      0);
}

}  // namespace
}  // namespace tandem::parallel
