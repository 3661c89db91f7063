#include "nn/safetensors.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "engine/autograd/grad_mode.h"
#include "engine/ops/factory.h"

namespace tandem::nn {
namespace {

// Note [Payload checksum]: the format has no checksum, so a flipped bit in the data would load
// silently as a different weight. Tandem writes the CRC-32 (IEEE, as zlib's) of the whole data
// section into the metadata under this key and verifies it on load when present; files from
// other writers, which lack it, load as before. The key never reaches the caller's metadata.
constexpr const char* kChecksumKey = "tandem.data_crc32";

// Note [Header limits]: the reference reader refuses headers over 100 MB (MAX_HEADER_SIZE), so no
// writer makes one; Tandem refuses them too, before reading, and headers nested deeper than a
// checkpoint's, while parsing.
constexpr uint64_t kMaxHeaderSize = 100000000;
constexpr int kMaxHeaderDepth = 3;

uint32_t crc32_update(uint32_t crc, const void* data, size_t size) {
  static const auto table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  const auto* bytes = static_cast<const uint8_t*>(data);
  crc = ~crc;
  for (size_t i = 0; i < size; ++i) crc = table[(crc ^ bytes[i]) & 0xFFu] ^ (crc >> 8);
  return ~crc;
}

std::string hex32(uint32_t value) {
  char text[9];
  std::snprintf(text, sizeof text, "%08x", value);
  return text;
}

using nlohmann::json;

// The format is little-endian; so is every machine Tandem targets (x86-64, aarch64).
static_assert(std::endian::native == std::endian::little,
              "safetensors I/O assumes a little-endian host");

const char* format_dtype(DType dtype) {
  switch (dtype) {
    case DType::Float32: return "F32";
    case DType::Int64: return "I64";
    case DType::UInt8: return "U8";
    case DType::BFloat16: return "BF16";
    case DType::Float16: return "F16";
  }
  return "?";
}

DType parse_dtype(const std::string& name, const std::string& path, const std::string& key) {
  if (name == "F32") return DType::Float32;
  if (name == "I64") return DType::Int64;
  if (name == "U8") return DType::UInt8;
  if (name == "BF16") return DType::BFloat16;
  if (name == "F16") return DType::Float16;
  TANDEM_FAIL("[safetensors] ", path, ": tensor '", key, "' has unsupported dtype '", name, "'");
}

void write_all(int fd, const void* data, size_t size, const std::string& path) {
  const char* bytes = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t written = ::write(fd, bytes, size);
    if (written < 0 && errno == EINTR) continue;
    TANDEM_CHECK(written > 0, "[safetensors] cannot write ", path, ": ", std::strerror(errno));
    bytes += written;
    size -= static_cast<size_t>(written);
  }
}

// The bytes a tensor of `shape` takes, or `limit` + 1 when that exceeds `limit` (the file's data):
// shapes come from the file, so their product must not overflow (fuzzing: a shape of
// [2^62, 4] multiplied to 0 and matched an empty range, then asked for 2^64 bytes).
uint64_t byte_size(const Shape& shape, DType dtype, uint64_t limit) {
  uint64_t bytes = dtype_size(dtype);
  int64_t span = 1;  // the product of the nonzero dimensions: what the strides reach
  for (int64_t dim : shape) {
    TANDEM_CHECK(dim >= 0, "[safetensors] negative dimension in shape ", shape_str(shape));
    // A zero dimension makes the tensor empty whatever the others, but a tensor's strides are
    // still their product: [0, 2^62, 2^62] would overflow them (S9).
    TANDEM_CHECK(dim == 0 || !__builtin_mul_overflow(span, dim, &span), "[safetensors] shape ",
                 shape_str(shape), " is too large: its dimensions multiply past 2^63");
    if (dim != 0 && bytes > limit / static_cast<uint64_t>(dim)) return limit + 1;
    bytes *= static_cast<uint64_t>(dim);
  }
  return bytes;
}

// Creates `path` afresh: O_EXCL, so a symlink planted at the predictable temporary name is never
// followed (review S8). A file left there by a crashed writer of the same pid goes first.
int create_new(const std::string& path) {
  constexpr int kFlags = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC;
  int fd = ::open(path.c_str(), kFlags, 0644);
  if (fd < 0 && errno == EEXIST && ::unlink(path.c_str()) == 0) {
    fd = ::open(path.c_str(), kFlags, 0644);
  }
  TANDEM_CHECK(fd >= 0, "[safetensors] cannot create ", path, ": ", std::strerror(errno));
  return fd;
}

std::string build_header(const NamedTensors& tensors, const Metadata& metadata) {
  json header = json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  std::set<std::string> names;
  for (const auto& [name, tensor] : tensors) {
    TANDEM_CHECK(names.insert(name).second, "[safetensors] duplicate tensor name '", name, "'");
    TANDEM_CHECK(name != "__metadata__", "[safetensors] '__metadata__' is reserved");
    header[name] = {{"dtype", format_dtype(tensor.dtype())},
                    {"shape", tensor.shape()},
                    {"data_offsets", {offset, offset + tensor.nbytes()}}};
    offset += tensor.nbytes();
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8,
              ' ');  // data starts 8-byte aligned, as the reference writer does
  return text;
}

}  // namespace

void save_safetensors(const std::string& path, const NamedTensors& tensors,
                      const Metadata& metadata) {
  // Host copies first: the header carries their checksum (Note [Payload checksum]).
  std::vector<Tensor> host;
  uint32_t crc = 0;
  for (const auto& [name, tensor] : tensors) {
    host.push_back(tensor.detach().to(Device::cpu()).contiguous());
    crc = crc32_update(crc, host.back().data_ptr(), host.back().nbytes());
  }
  Metadata with_checksum = metadata;
  with_checksum[kChecksumKey] = hex32(crc);
  const std::string header = build_header(tensors, with_checksum);
  const std::string temporary = path + ".tmp." + std::to_string(::getpid());
  const int fd = create_new(temporary);
  try {
    const uint64_t header_size = header.size();
    write_all(fd, &header_size, sizeof(header_size), temporary);
    write_all(fd, header.data(), header.size(), temporary);
    for (const Tensor& t : host) write_all(fd, t.data_ptr(), t.nbytes(), temporary);
    TANDEM_CHECK(::fsync(fd) == 0, "[safetensors] cannot flush ", temporary, ": ",
                 std::strerror(errno));
  } catch (...) {
    ::close(fd);
    ::unlink(temporary.c_str());
    throw;
  }
  ::close(fd);
  if (::rename(temporary.c_str(), path.c_str()) != 0) {
    const std::string reason = std::strerror(errno);
    ::unlink(temporary.c_str());
    TANDEM_FAIL("[safetensors] cannot move ", temporary, " to ", path, ": ", reason);
  }
  // The rename itself must reach the disk too: flush the folder's entry.
  const std::string folder =
      path.find('/') == std::string::npos ? "." : path.substr(0, path.rfind('/') + 1);
  const int dir_fd = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd >= 0) {
    ::fsync(dir_fd);
    ::close(dir_fd);
  }
}

namespace {

// One tensor of a file being read: where its bytes lie in the data, and the tensor they fill.
struct StoredTensor {
  uint64_t begin = 0, end = 0;
  std::string name;
  Tensor tensor;
};

// The header of an open file: its JSON object and its length in bytes (the data follows it).
std::pair<json, uint64_t> read_header(std::ifstream& in, const std::string& path,
                                      uint64_t file_size) {
  uint64_t header_size = 0;
  TANDEM_CHECK(file_size >= 8 && in.read(reinterpret_cast<char*>(&header_size), 8),
               "[safetensors] ", path, " is truncated: no header length");
  TANDEM_CHECK(header_size <= kMaxHeaderSize, "[safetensors] ", path, ": header of ", header_size,
               " bytes is over the ", kMaxHeaderSize / 1000000,
               " MB limit (safetensors' own); not a checkpoint");
  TANDEM_CHECK(header_size <= file_size - 8, "[safetensors] ", path,
               " is truncated or not safetensors: header of ", header_size, " bytes in a ",
               file_size, "-byte file");
  std::string text(header_size, '\0');
  in.read(text.data(), static_cast<std::streamsize>(header_size));
  json header;
  // The header nests three deep ({name: {"shape": [...]}}); a deeper one is no checkpoint, and
  // its parse tree would cost some 40 bytes per byte of text (review S11).
  const json::parser_callback_t shallow = [&](int depth, json::parse_event_t, json&) {
    TANDEM_CHECK(depth <= kMaxHeaderDepth, "[safetensors] ", path,
                 ": the header nests deeper than ", kMaxHeaderDepth, " levels; not a checkpoint");
    return true;
  };
  try {
    header = json::parse(text, shallow);
  } catch (const json::exception& e) {
    TANDEM_FAIL("[safetensors] ", path, " has a malformed header: ", e.what());
  }
  TANDEM_CHECK(header.is_object(), "[safetensors] ", path, ": the header is not a JSON object");
  return {std::move(header), header_size};
}

Metadata parse_metadata(const json& entry, const std::string& path) {
  // Found by fuzzing: a non-string value escaped as nlohmann's type_error, not an Error.
  TANDEM_CHECK(entry.is_object() && std::all_of(entry.begin(), entry.end(),
                                                [](const json& v) { return v.is_string(); }),
               "[safetensors] ", path, ": __metadata__ must map names to strings");
  return entry.get<Metadata>();
}

// A header entry, checked against the data's size; its tensor is allocated, not yet read.
StoredTensor parse_entry(const std::string& key, const json& entry, const std::string& path,
                         uint64_t data_size) {
  try {
    const DType dtype = parse_dtype(entry.at("dtype").get<std::string>(), path, key);
    // Integers only: nlohmann converts a float such as 4.6e19 to an integer with undefined
    // behaviour (found by fuzzing).
    const auto all_integers = [](const json& list) {
      return list.is_array() && std::all_of(list.begin(), list.end(),
                                            [](const json& v) { return v.is_number_integer(); });
    };
    TANDEM_CHECK(all_integers(entry.at("shape")) && all_integers(entry.at("data_offsets")),
                 "[safetensors] ", path, ": tensor '", key,
                 "' has a shape or data_offsets that are not lists of integers");
    const Shape shape = entry.at("shape").get<Shape>();
    const auto offsets = entry.at("data_offsets").get<std::vector<uint64_t>>();
    TANDEM_CHECK(offsets.size() == 2 && offsets[0] <= offsets[1] && offsets[1] <= data_size,
                 "[safetensors] ", path, ": tensor '", key,
                 "' lies outside the data (file truncated?)");
    TANDEM_CHECK(offsets[1] - offsets[0] == byte_size(shape, dtype, data_size), "[safetensors] ",
                 path, ": tensor '", key, "' has ", offsets[1] - offsets[0], " bytes for shape ",
                 shape_str(shape));
    return {offsets[0], offsets[1], key, empty(shape, {.dtype = dtype})};
  } catch (const json::exception& e) {
    TANDEM_FAIL("[safetensors] ", path, ": bad entry for tensor '", key, "': ", e.what());
  }
}

}  // namespace

SafetensorsFile load_safetensors(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  TANDEM_CHECK(in.good(), "[safetensors] cannot open ", path, ": ", std::strerror(errno));
  const uint64_t file_size = static_cast<uint64_t>(in.tellg());
  in.seekg(0);
  const auto [header, header_size] = read_header(in, path, file_size);
  const uint64_t data_size = file_size - 8 - header_size;

  SafetensorsFile file;
  std::vector<StoredTensor> entries;
  for (const auto& [key, entry] : header.items()) {
    if (key == "__metadata__") {
      file.metadata = parse_metadata(entry, path);
    } else {
      entries.push_back(parse_entry(key, entry, path, data_size));
    }
  }
  std::sort(entries.begin(), entries.end(),
            [](const StoredTensor& a, const StoredTensor& b) { return a.begin < b.begin; });
  uint64_t expected_begin = 0;
  uint32_t crc = 0;
  for (StoredTensor& stored : entries) {
    TANDEM_CHECK(stored.begin == expected_begin, "[safetensors] ", path, ": tensor '", stored.name,
                 "' overlaps another or leaves a gap in the data");
    in.seekg(static_cast<std::streamoff>(8 + header_size + stored.begin));
    TANDEM_CHECK(in.read(static_cast<char*>(stored.tensor.data_ptr()),
                         static_cast<std::streamsize>(stored.end - stored.begin)),
                 "[safetensors] ", path, " is truncated inside tensor '", stored.name, "'");
    file.tensors.emplace_back(stored.name, stored.tensor);
    crc = crc32_update(crc, stored.tensor.data_ptr(), stored.end - stored.begin);
    expected_begin = stored.end;
  }
  // Note [Payload checksum]
  const auto checksum = file.metadata.find(kChecksumKey);
  if (checksum != file.metadata.end()) {
    TANDEM_CHECK(expected_begin == data_size && checksum->second == hex32(crc), "[safetensors] ",
                 path, " is corrupted: its data does not match the checksum written with it");
    file.metadata.erase(checksum);
  }
  return file;
}

void check_state_dict(const Module& module, const NamedTensors& state) {
  const NamedTensors own = module.state_dict();
  std::map<std::string, Tensor> given;
  for (const auto& [name, tensor] : state) given.emplace(name, tensor);
  std::set<std::string> expected;
  for (const auto& [name, tensor] : own) {
    expected.insert(name);
    const auto found = given.find(name);
    TANDEM_CHECK(found != given.end(), "[load_state_dict] missing key '", name, "' (",
                 shape_str(tensor.shape()), ") for ", module.describe());
    TANDEM_CHECK(found->second.shape() == tensor.shape() && found->second.dtype() == tensor.dtype(),
                 "[load_state_dict] '", name, "': checkpoint has ",
                 shape_str(found->second.shape()), " ", dtype_name(found->second.dtype()),
                 ", model has ", shape_str(tensor.shape()), " ", dtype_name(tensor.dtype()));
  }
  for (const auto& [name, tensor] : state) {
    TANDEM_CHECK(expected.count(name) == 1, "[load_state_dict] unexpected key '", name, "' for ",
                 module.describe());
  }
}

void load_state_dict(Module& module, const NamedTensors& state) {
  check_state_dict(module, state);
  std::map<std::string, Tensor> given;
  for (const auto& [name, tensor] : state) given.emplace(name, tensor);
  NoGradGuard no_grad;
  for (const auto& [name, tensor] : module.state_dict()) {
    Tensor target = tensor;
    target.copy_(given.at(name).to(target.device()));
  }
}

}  // namespace tandem::nn
