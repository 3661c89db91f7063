#pragma once
/// A TCP port that nothing listens on, for a test that needs a port number before anything binds
/// it (a rendezvous address handed to programs it starts, a port to find closed).

#include "parallel/comm/socket.h"

namespace tandem::testing {

/// Bound once on every interface to find it, then released. Another program could take it before
/// the test binds it again; unlikely within a test.
inline int free_port() {
  const parallel::net::Socket probe = parallel::net::listen_on("[test]", "", 0);
  return parallel::net::local_port(probe);
}

}  // namespace tandem::testing
