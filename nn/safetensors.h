#pragma once
/// The safetensors file format (https://github.com/huggingface/safetensors):
/// an 8-byte little-endian header length, a JSON header mapping each name to
/// {dtype, shape, data_offsets} (plus optional "__metadata__" strings), then the
/// raw little-endian data. PyTorch users read Tandem weights with
/// safetensors.torch.load_file.

#include <map>
#include <string>

#include "nn/module.h"

namespace tandem::nn {

using Metadata = std::map<std::string, std::string>;

/// Writes `tensors` (any device; copied to the host) atomically: a temporary file in the same
/// folder, fsync, then rename over `path`, so a crash never leaves a broken file where a good one
/// was. Names must be unique.
void save_safetensors(const std::string& path, const NamedTensors& tensors,
                      const Metadata& metadata = {});

struct SafetensorsFile {
  NamedTensors tensors;  ///< on the CPU, in file order (sorted by data offset)
  Metadata metadata;
};

/// Reads and validates a whole file: a truncated file, a malformed header, an unknown dtype,
/// offsets outside the data or overlapping, and a size/shape mismatch are errors naming the file
/// (and the tensor).
SafetensorsFile load_safetensors(const std::string& path);

/// Copies `state` into the module's parameters and buffers. Everything is checked before anything
/// is copied (check_state_dict), so a failed load changes nothing.
void load_state_dict(Module& module, const NamedTensors& state);

/// Throws what load_state_dict(module, state) would for keys missing or unexpected, shapes and
/// dtypes, and changes nothing.
void check_state_dict(const Module& module, const NamedTensors& state);

}  // namespace tandem::nn
