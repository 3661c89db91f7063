#pragma once
/// What the libFuzzer targets share: a scratch folder for inputs that the code under test reads
/// from files (one per fuzzing process, in /dev/shm when it exists, so that writing an input per
/// execution costs little).

#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

namespace tandem::fuzz {

inline const std::filesystem::path& scratch_folder() {
  static const std::filesystem::path folder = [] {
    const std::filesystem::path base = std::filesystem::is_directory("/dev/shm")
                                           ? "/dev/shm"
                                           : std::filesystem::temp_directory_path();
    auto path = base / ("tandem-fuzz-" + std::to_string(::getpid()));
    std::filesystem::create_directories(path);
    return path;
  }();
  return folder;
}

/// Writes `size` bytes to `name` in the scratch folder and returns its path.
inline std::string write_scratch_file(const std::string& name, const uint8_t* data, size_t size) {
  const std::string path = (scratch_folder() / name).string();
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  return path;
}

}  // namespace tandem::fuzz
