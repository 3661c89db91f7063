#include "parallel/comm/rendezvous/store_server.h"

#include <system_error>

#include "engine/error.h"
#include "parallel/comm/rendezvous/store_auth.h"
#include "parallel/comm/rendezvous/store_loop.h"

namespace tandem::parallel {

StoreServer::StoreServer(StoreServerOptions options) {
  raise_open_file_limit();
  auth::initialise_openssl();  // Note [OpenSSL before the loop]
  loop_ = std::make_unique<StoreLoop>(std::move(options));
  port_ = loop_->port();
  try {
    thread_ = std::thread([this] { loop_->run(); });
  } catch (const std::system_error& e) {
    TANDEM_FAIL("[store] cannot start the store's thread: ", e.what());
  }
}

StoreServer::~StoreServer() {
  loop_->stop();
  if (thread_.joinable()) thread_.join();
}

}  // namespace tandem::parallel
