#include "parallel/comm/rendezvous/init_method.h"

#include <charconv>
#include <string_view>

#include "engine/error.h"

namespace tandem::parallel {
namespace {

constexpr const char* kExpected = "; expected env://, tcp://HOST:PORT or file:///PATH";

// tcp://HOST:PORT, HOST an IPv6 address in brackets or anything without a colon; one trailing
// slash is allowed, as a URL may end in one.
void parse_tcp(std::string_view rest, InitMethod& method) {
  const auto fail = [&](const std::string& what) {
    TANDEM_FAIL("[init_method] '", method.url, "' ", what);
  };
  if (rest.ends_with('/')) rest.remove_suffix(1);
  std::string_view host, port;
  if (rest.starts_with('[')) {
    const size_t close = rest.find(']');
    if (close == std::string_view::npos) fail("opens an IPv6 address with '[' but never closes it");
    host = rest.substr(1, close - 1);
    if (rest.size() == close + 1) fail("has no port: expected tcp://[ADDRESS]:PORT");
    if (rest[close + 1] != ':') fail("has something but ':PORT' after the IPv6 address");
    port = rest.substr(close + 2);
  } else {
    const size_t colon = rest.rfind(':');
    if (colon == std::string_view::npos) fail("has no port: expected tcp://HOST:PORT");
    host = rest.substr(0, colon);
    port = rest.substr(colon + 1);
    if (host.find(':') != std::string_view::npos) {
      fail("has colons in its host: an IPv6 address goes in brackets, tcp://[ADDRESS]:PORT");
    }
  }
  if (host.empty()) fail("has no host: expected tcp://HOST:PORT (rank 0's host)");
  int number = 0;
  const auto [end, error] = std::from_chars(port.data(), port.data() + port.size(), number);
  if (error != std::errc() || end != port.data() + port.size() || port.empty() || number < 1 ||
      number > 65535) {
    fail("has port '" + std::string(port) + "': expected a number in 1..65535");
  }
  method.host = host;
  method.port = number;
}

// file:///PATH: "file://" and then an absolute path (the URL's empty host: this machine).
void parse_file(std::string_view rest, InitMethod& method) {
  if (rest.empty()) {
    TANDEM_FAIL("[init_method] '", method.url,
                "' has no path: expected file:///PATH, three slashes before an absolute path");
  }
  if (!rest.starts_with('/')) {
    TANDEM_FAIL("[init_method] '", method.url,
                "' is not file:///PATH: file:// is followed by an absolute path, three slashes "
                "in all (file:///",
                rest, ")");
  }
  if (rest.ends_with('/')) {
    TANDEM_FAIL("[init_method] '", method.url,
                "' names a folder; the store is a file in it, e.g. file://", rest, "tandem.store");
  }
  method.path = rest;
}

// Without a launcher, a rank and world size given under env:// stand in for RANK and WORLD_SIZE,
// as in PyTorch; with one they must say what its variables say.
DistributedEnv env_rendezvous(const InitOptions& init, const EnvLookup& lookup) {
  if (init.rank < 0) return from_environment(lookup);
  if (launched_distributed(lookup)) {
    DistributedEnv env = from_environment(lookup);
    TANDEM_CHECK(env.rank == init.rank && env.world_size == init.world_size, "[init_method] rank ",
                 init.rank, " of ", init.world_size, " was given, but the launcher's variables (",
                 env.launcher, ") say rank ", env.rank, " of ", env.world_size);
    return env;
  }
  return from_environment([&](const std::string& name) -> std::optional<std::string> {
    if (name == "RANK") return std::to_string(init.rank);
    if (name == "WORLD_SIZE") return std::to_string(init.world_size);
    return lookup(name);
  });
}

}  // namespace

InitMethod parse_init_method(const std::string& url) {
  InitMethod method{.url = url};
  const size_t separator = url.find("://");
  if (separator == std::string::npos) {
    TANDEM_FAIL("[init_method] '", url, "' is not a URL", kExpected);
  }
  const std::string scheme = url.substr(0, separator);
  const std::string_view rest = std::string_view(url).substr(separator + 3);
  if (rest.find('?') != std::string_view::npos) {
    TANDEM_FAIL("[init_method] '", url,
                "' has a query; give the rank and the world size as arguments instead");
  }
  if (scheme == "env") {
    TANDEM_CHECK(rest.empty(), "[init_method] '", url,
                 "' has something after env://, which takes nothing: the launcher's variables "
                 "say where rank 0 is");
    method.kind = InitMethod::Kind::Env;
  } else if (scheme == "tcp") {
    method.kind = InitMethod::Kind::Tcp;
    parse_tcp(rest, method);
  } else if (scheme == "file") {
    method.kind = InitMethod::Kind::File;
    parse_file(rest, method);
  } else {
    TANDEM_FAIL("[init_method] '", url, "' has the unknown scheme '", scheme, "'", kExpected);
  }
  return method;
}

void check_rank_and_world_size(const InitMethod& method, int rank, int world_size) {
  const bool rank_given = rank != -1, world_given = world_size != -1;
  if (method.kind == InitMethod::Kind::Env) {
    TANDEM_CHECK(rank_given == world_given,
                 "[init_method] env:// takes a rank and a world size together, or neither (then "
                 "a launcher's)");
  } else {
    TANDEM_CHECK(rank_given && world_given, "[init_method] ", method.url,
                 " needs this process's rank and the world size: without a launcher, each rank "
                 "is started by hand with its own rank and the same world size");
  }
  if (!world_given) return;
  TANDEM_CHECK(world_size >= 1, "[init_method] world size ", world_size, " must be at least 1");
  TANDEM_CHECK(rank >= 0 && rank < world_size, "[init_method] rank ", rank,
               " is out of range for world size ", world_size, " (ranks are 0..", world_size - 1,
               ")");
}

DistributedEnv rendezvous_env(const InitOptions& init, const EnvLookup& lookup) {
  const InitMethod method = parse_init_method(init.init_method);
  check_rank_and_world_size(method, init.rank, init.world_size);
  if (method.kind == InitMethod::Kind::Env) return env_rendezvous(init, lookup);
  DistributedEnv env;
  env.rank = init.rank;
  env.world_size = init.world_size;
  env.local_rank = env.local_world_size = -1;  // Note [Local ranks by hand]
  env.launcher = "";
  env.rendezvous_url = method.url;
  if (method.kind == InitMethod::Kind::Tcp) {
    env.master_addr = method.host;
    env.master_port = method.port;
    env.store_host = StoreHost::Rank0;
  } else {
    env.master_addr = "";
    env.master_port = 0;
    env.store_host = StoreHost::File;
    env.store_file = method.path;
  }
  return env;
}

}  // namespace tandem::parallel
