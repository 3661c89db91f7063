// The fuzz targets' bodies (see targets.h).
#include "tests/fuzz/targets.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <string>

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "data/cifar10.h"
#include "engine/error.h"
#include "nn/checkpoint.h"
#include "nn/linear.h"
#include "nn/safetensors.h"
#include "parallel/comm/rendezvous/file_store_records.h"
#include "parallel/comm/rendezvous/launch_env.h"
#include "parallel/comm/rendezvous/store_protocol.h"
#include "parallel/comm/rendezvous/store_server.h"
#include "parallel/comm/rendezvous/store_table.h"
#include "parallel/comm/socket.h"
#include "tests/fuzz/fuzz_input.h"

namespace tandem::fuzz {

// nn::load_safetensors on arbitrary bytes. Every input must end in a loaded file
// or a tandem::Error, never a crash, a sanitizer report, a hang or an allocation the file's size
// does not justify.
int safetensors(const uint8_t* input, size_t size) {
  const std::string path = write_scratch_file("input.safetensors", input, size);
  try {
    nn::load_safetensors(path);
  } catch (const Error&) {
  }
  return 0;
}

// nn::load_checkpoint, weights and sidecar (the training state) both from the
// input. Layout: a 4-byte little-endian length n, then n bytes of weights file, then the sidecar.
// The model is a Linear(2, 2) with an SGD optimizer, as in the seeds (tests/fuzz/make_seeds.py).
int checkpoint(const uint8_t* input, size_t size) {
  uint32_t weights_size = 0;
  if (size >= 4) std::memcpy(&weights_size, input, 4);
  const size_t rest = size >= 4 ? size - 4 : 0;
  const size_t split = std::min<size_t>(weights_size, rest);
  const uint8_t* body = input + (size >= 4 ? 4 : size);
  const std::string path = write_scratch_file("ckpt", body, split);
  write_scratch_file("ckpt.state", body + split, rest - split);
  static auto model = std::make_shared<nn::Linear>(nn::LinearConfig{2, 2});
  static nn::Sgd optimizer(model->parameters(), {.lr = 0.1f, .momentum = 0.9f});
  try {
    nn::load_checkpoint(path, *model, optimizer);
  } catch (const Error&) {
  }
  return 0;
}

// the CIFAR-10 binary reader on an arbitrary file (any record count).
int cifar10(const uint8_t* input, size_t size) {
  const std::string path = write_scratch_file("data_batch_1.bin", input, size);
  try {
    data::read_cifar10_files({path}, 0, /*official_sizes=*/false);
  } catch (const Error&) {
  }
  return 0;
}

// what the store server does with the bytes a client sends, short of acting on
// them: the stream is cut into frames by net::receive_frame (over a socket pair, the writer
// closed after the input) and each frame is decoded by protocol::parse_request.
int store_request(const uint8_t* input, size_t size) {
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM, 0, fds) != 0) return 0;
  parallel::net::Socket reader(fds[0]);
  // The default socket buffer holds far more than libFuzzer's inputs (-max_len 4096 by default).
  const ssize_t written = ::send(fds[1], input, size, MSG_NOSIGNAL);
  ::close(fds[1]);
  if (written != static_cast<ssize_t>(size)) return 0;
  try {
    while (auto frame = parallel::net::receive_frame("[store]", reader, std::nullopt,
                                                     std::chrono::milliseconds(100))) {
      try {
        parallel::protocol::parse_request(*frame);
      } catch (const Error&) {
      }
    }
  } catch (const Error&) {
  }
  return 0;
}

// The store's request handlers, then a whole session with a live server (review S1-S3, S9): the
// input is frames. First every frame goes to a StoreTable (the handlers, no socket); then the
// input (after its first byte, which picks a server with a job token or one without) is what one
// client sends to a running StoreServer: the handshake, then requests. Every input must end in
// replies or a closed connection, never a crash, a hang or memory past the servers' small budget.
namespace {

void feed_table(std::string_view input) {
  parallel::StoreTable table({.max_bytes = 1 << 16, .max_keys_per_request = 64});
  while (input.size() >= 4) {
    const size_t n = (size_t{static_cast<uint8_t>(input[0])} << 24) |
                     (size_t{static_cast<uint8_t>(input[1])} << 16) |
                     (size_t{static_cast<uint8_t>(input[2])} << 8) | static_cast<uint8_t>(input[3]);
    input.remove_prefix(4);
    const std::string_view frame = input.substr(0, std::min(n, input.size()));
    input.remove_prefix(frame.size());
    if (table.refuse_early(frame)) continue;
    try {
      parallel::protocol::Request request = parallel::protocol::parse_request(frame);
      if (!table.answer(request)) {
        size_t cursor = 0;
        table.ready(request, cursor);
        table.timed_out(request);
      }
    } catch (const Error&) {
    }
  }
}

const parallel::StoreServer& session_server(bool with_token) {
  using namespace std::chrono_literals;
  const auto options = [](std::string token) {
    return parallel::StoreServerOptions{
        .frame_timeout = 200ms,
        .first_frame_timeout = 200ms,
        .send_timeout = 500ms,
        .limits = {.max_bytes = 1 << 20, .max_keys_per_request = 64},
        .token = std::move(token),
        .log = [](const std::string&) {}};
  };
  static const parallel::StoreServer open_server(options(""));
  static const parallel::StoreServer token_server(options("fuzz-token-0123456789abcdef"));
  return with_token ? token_server : open_server;
}

}  // namespace

int store_session(const uint8_t* input, size_t size) {
  if (size == 0) return 0;
  const std::string_view bytes(reinterpret_cast<const char*>(input) + 1, size - 1);
  feed_table(bytes);
  std::string error;
  parallel::net::Socket client = parallel::net::connect_with_retry(
      "127.0.0.1", session_server((input[0] & 1) != 0).port(), std::chrono::seconds(2), error);
  if (!client.valid()) return 0;
  if (::send(client.fd(), bytes.data(), bytes.size(), MSG_NOSIGNAL) < 0) return 0;
  ::shutdown(client.fd(), SHUT_WR);
  // Whatever the server answers, it must close the connection soon (EOF, or its deadlines).
  char reply[4096];
  const auto deadline = parallel::net::deadline_after(std::chrono::seconds(3));
  while (parallel::net::Clock::now() < deadline) {
    pollfd entry{client.fd(), POLLIN, 0};
    if (::poll(&entry, 1, 100) == 1 && ::recv(client.fd(), reply, sizeof reply, 0) <= 0) break;
  }
  return 0;
}

// the launch environment (torchrun, mpirun and srun variables) from arbitrary
// "NAME=VALUE" lines.
int launch_env(const uint8_t* input, size_t size) {
  const std::string text(reinterpret_cast<const char*>(input), size);
  std::map<std::string, std::string> variables;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(start, end - start);
    const size_t equals = line.find('=');
    if (equals != std::string::npos) variables[line.substr(0, equals)] = line.substr(equals + 1);
    start = end + 1;
  }
  try {
    parallel::from_variables(variables);
  } catch (const Error&) {
  }
  return 0;
}

// FileStore's log read from a file of arbitrary bytes (Note [FileStore records]): from the start,
// then again from wherever the first read left off, as a later call reads what was appended.
// No read may go past the file, nor ask for more than a key or value may hold.
int file_store_records(const uint8_t* input, size_t size) {
  const std::string_view file(reinterpret_cast<const char*>(input), size);
  const parallel::file_store::ReadAt read_at = [&](off_t offset, size_t n) {
    if (offset < 0 || n > parallel::file_store::kMaxFieldBytes + size_t{4} ||
        static_cast<size_t>(offset) + n > file.size()) {
      __builtin_trap();  // read_records checks every length against the file first
    }
    return std::string(file.substr(static_cast<size_t>(offset), n));
  };
  std::map<std::string, std::string> cache;
  const auto keep = [&](std::string key, std::string value) { cache[key] = std::move(value); };
  const off_t half = static_cast<off_t>(size / 2);
  off_t at = 0;
  try {
    at = parallel::file_store::read_records(read_at, 0, half, "tandem/file_store", "file:///fuzz",
                                            keep);
    parallel::file_store::read_records(read_at, at, static_cast<off_t>(size), "tandem/file_store",
                                       "file:///fuzz", keep);
  } catch (const Error&) {
  }
  return 0;
}

}  // namespace tandem::fuzz
