#include "parallel/comm/init_process_group.h"

#include <string>

#include "engine/error.h"
#include "parallel/comm/backends.h"
#include "parallel/comm/process_group.h"
#include "parallel/comm/rendezvous/rendezvous.h"

namespace tandem::parallel {

std::shared_ptr<ProcessGroup> init_process_group(const std::string& name, const DistributedEnv& env,
                                                 ProcessGroupOptions options) {
  const BackendInfo& backend = find_backend(name);
  if (!backend.needs_store) {
    return backend.make(
        {.env = env, .store = nullptr, .device = -1, .options = std::move(options)});
  }
  // Before the store is touched, so that a machine that cannot run the backend fails at once.
  const int device = backend.before_meeting ? backend.before_meeting(env) : -1;
  Rendezvous met = meet(env, options.timeout);
  return backend.make({.env = std::move(met.env),
                       .store = std::move(met.store),
                       .device = device,
                       .options = std::move(options)});
}

std::shared_ptr<ProcessGroup> init_process_group(const std::string& name, Rendezvous met,
                                                 ProcessGroupOptions options) {
  const BackendInfo& backend = find_backend(name);
  TANDEM_CHECK(backend.needs_store, "[process_group] ", name,
               ": the ranks come from mpirun, not from a store; use init_process_group(\"", name,
               "\", mpi_environment())");
  return backend.make({.env = std::move(met.env),
                       .store = std::move(met.store),
                       .device = -1,
                       .options = std::move(options)});
}

std::shared_ptr<ProcessGroup> init_process_group(const std::string& name, const InitOptions& init,
                                                 ProcessGroupOptions options) {
  return init_process_group(name, rendezvous_env(init), std::move(options));
}

}  // namespace tandem::parallel
