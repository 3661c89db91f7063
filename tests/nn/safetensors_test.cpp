#include <gtest/gtest.h>

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "engine/tandem.h"
#include "nn/resnet.h"
#include "nn/safetensors.h"
#include "tests/support/error_message.h"
#include "tests/support/temp_dir.h"

namespace tandem::nn {
namespace {

using testing::error_message;

namespace fs = std::filesystem;

class Safetensors : public ::testing::Test {
 protected:
  std::string path(const std::string& name) const { return dir_.file(name); }

  static std::string read_bytes(const std::string& file) {
    std::ifstream in(file, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), {}};
  }
  static void write_bytes(const std::string& file, const std::string& bytes) {
    std::ofstream(file, std::ios::binary) << bytes;
  }
  // A file written by hand from the spec, independent of our writer.
  static std::string spec_file(const std::string& header, const std::string& data) {
    const uint64_t size = header.size();
    std::string bytes(reinterpret_cast<const char*>(&size), 8);
    return bytes + header + data;
  }

  testing::TempDir dir_;
};

TEST_F(Safetensors, ModelRoundTripIsBitExact) {
  Generator generator(1);
  const auto model = make_resnet("resnet20", generator);
  (*model)(randn({2, 3, 32, 32}, generator));  // non-trivial running stats and counters
  save_safetensors(path("model.safetensors"), model->state_dict(), {{"format", "pt"}});

  const SafetensorsFile file = load_safetensors(path("model.safetensors"));
  EXPECT_EQ(file.metadata.at("format"), "pt");
  Generator other(2);
  const auto restored = make_resnet("resnet20", other);
  load_state_dict(*restored, file.tensors);
  const NamedTensors a = model->state_dict(), b = restored->state_dict();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i].second.dtype(), b[i].second.dtype()) << a[i].first;
    const Tensor x = a[i].second.contiguous(), y = b[i].second.contiguous();
    EXPECT_EQ(std::memcmp(x.data_ptr(), y.data_ptr(), x.nbytes()), 0) << a[i].first;
  }
  EXPECT_EQ(fs::directory_iterator(dir_.path())->path().filename(), "model.safetensors")
      << "no temporary left behind";
}

TEST_F(Safetensors, LayoutFollowsTheSpec) {
  save_safetensors(path("t.safetensors"),
                   {{"w", from_vector<float>({1.5f, -2.0f}, {2})},
                    {"n", from_vector<int64_t>({7}, {}, {.dtype = DType::Int64})}});
  const std::string bytes = read_bytes(path("t.safetensors"));
  uint64_t header_size = 0;
  std::memcpy(&header_size, bytes.data(), 8);
  EXPECT_EQ(header_size % 8, 0u);
  const std::string header = bytes.substr(8, header_size);
  EXPECT_NE(header.find(R"("w":{"data_offsets":[0,8],"dtype":"F32","shape":[2]})"),
            std::string::npos)
      << header;
  EXPECT_NE(header.find(R"("n":{"data_offsets":[8,16],"dtype":"I64","shape":[]})"),
            std::string::npos)
      << header;
  float w[2];
  std::memcpy(w, bytes.data() + 8 + header_size, 8);
  EXPECT_EQ(w[1], -2.0f);
}

TEST_F(Safetensors, HalfTensorsRoundTripAsBF16AndF16) {
  const Tensor weights = from_vector<float>({0.1f, -2.75f, 65504.0f}, {3});
  save_safetensors(path("half.safetensors"), {{"b", weights.to(DType::BFloat16)},
                                              {"h", weights.view({1, 3}).to(DType::Float16)}});
  const std::string bytes = read_bytes(path("half.safetensors"));
  uint64_t header_size = 0;
  std::memcpy(&header_size, bytes.data(), 8);
  const std::string header = bytes.substr(8, header_size);
  EXPECT_NE(header.find(R"("b":{"data_offsets":[0,6],"dtype":"BF16","shape":[3]})"),
            std::string::npos)
      << header;
  EXPECT_NE(header.find(R"("h":{"data_offsets":[6,12],"dtype":"F16","shape":[1,3]})"),
            std::string::npos)
      << header;

  const SafetensorsFile file = load_safetensors(path("half.safetensors"));
  ASSERT_EQ(file.tensors.size(), 2u);
  const Tensor& b = file.tensors[0].second;
  const Tensor& h = file.tensors[1].second;
  ASSERT_EQ(b.dtype(), DType::BFloat16);
  ASSERT_EQ(h.dtype(), DType::Float16);
  EXPECT_EQ(h.shape(), (Shape{1, 3}));
  // 0.1, -2.75, 65504 as bfloat16 (65504 rounds to 65536) and as float16 (torch 1.13's bits).
  std::vector<uint16_t> b_bits, h_bits;
  for (BFloat16 v : b.to_vector<BFloat16>()) b_bits.push_back(v.bits);
  for (Float16 v : h.to_vector<Float16>()) h_bits.push_back(v.bits);
  EXPECT_EQ(b_bits, (std::vector<uint16_t>{0x3dcd, 0xc030, 0x4780}));
  EXPECT_EQ(h_bits, (std::vector<uint16_t>{0x2e66, 0xc180, 0x7bff}));
}

TEST_F(Safetensors, ReadsAFileWrittenFromTheSpec) {
  const float values[3] = {1, 2, 3};
  write_bytes(
      path("spec.safetensors"),
      spec_file(
          R"({"__metadata__":{"k":"v"},"b":{"dtype":"U8","shape":[2],"data_offsets":[12,14]},)"
          R"("a":{"dtype":"F32","shape":[3],"data_offsets":[0,12]}})",
          std::string(reinterpret_cast<const char*>(values), 12) + "\x05\x06"));
  const SafetensorsFile file = load_safetensors(path("spec.safetensors"));
  ASSERT_EQ(file.tensors.size(), 2u);
  EXPECT_EQ(file.tensors[0].first, "a");
  EXPECT_EQ(file.tensors[0].second.to_vector<float>(), (std::vector<float>{1, 2, 3}));
  EXPECT_EQ(file.tensors[1].second.to_vector<uint8_t>(), (std::vector<uint8_t>{5, 6}));
  EXPECT_EQ(file.metadata.at("k"), "v");
}

TEST_F(Safetensors, CorruptFilesAreClearErrors) {
  save_safetensors(path("good.safetensors"), {{"w", ones({4, 4})}});
  const std::string good = read_bytes(path("good.safetensors"));
  for (size_t cut : {size_t{0}, size_t{5}, size_t{12}, good.size() - 1}) {
    write_bytes(path("cut.safetensors"), good.substr(0, cut));
    EXPECT_NE(error_message([&] { load_safetensors(path("cut.safetensors")); }).find("truncated"),
              std::string::npos)
        << "cut at " << cut;
  }
  write_bytes(path("garbage.safetensors"), spec_file("{not json", ""));
  EXPECT_NE(error_message([&] {
              load_safetensors(path("garbage.safetensors"));
            }).find("malformed header"),
            std::string::npos);
  write_bytes(path("dtype.safetensors"),
              spec_file(R"({"a":{"dtype":"F7","shape":[1],"data_offsets":[0,4]}})", "xxxx"));
  EXPECT_NE(error_message([&] {
              load_safetensors(path("dtype.safetensors"));
            }).find("unsupported dtype 'F7'"),
            std::string::npos);
  write_bytes(path("size.safetensors"),
              spec_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}})", "xxxx"));
  EXPECT_NE(error_message([&] {
              load_safetensors(path("size.safetensors"));
            }).find("has 4 bytes for shape [2]"),
            std::string::npos);
  EXPECT_NE(
      error_message([&] { load_safetensors(path("missing.safetensors")); }).find("cannot open"),
      std::string::npos);
}

// Review S9: a zero dimension makes a tensor empty, but its strides still multiply the others.
TEST_F(Safetensors, AZeroDimensionBesideHugeOnesIsRefused) {
  write_bytes(path("zero.safetensors"),
              spec_file(R"({"a":{"dtype":"F32","shape":[0,4611686018427387904,)"
                        R"(4611686018427387904],"data_offsets":[0,0]}})",
                        ""));
  const std::string message = error_message([&] { load_safetensors(path("zero.safetensors")); });
  EXPECT_NE(message.find("[safetensors] shape [0, 4611686018427387904, 4611686018427387904] is "
                         "too large: its dimensions multiply past 2^63"),
            std::string::npos)
      << message;
  write_bytes(path("empty.safetensors"),
              spec_file(R"({"a":{"dtype":"F32","shape":[0,1024],"data_offsets":[0,0]}})", ""));
  EXPECT_EQ(load_safetensors(path("empty.safetensors")).tensors.at(0).second.numel(), 0);
}

// Note [Header limits]: a 200 MB header is refused before it is read (a sparse file: no disk),
// and a deeply nested one while it is parsed, each in one line.
TEST_F(Safetensors, AHugeOrDeeplyNestedHeaderIsRefusedInOneLine) {
  const uint64_t header_size = 200000000;
  {
    std::ofstream out(path("huge.safetensors"), std::ios::binary);
    out.write(reinterpret_cast<const char*>(&header_size), 8);
  }
  fs::resize_file(path("huge.safetensors"), 8 + header_size);
  const std::string huge = error_message([&] { load_safetensors(path("huge.safetensors")); });
  EXPECT_NE(huge.find(": header of 200000000 bytes is over the 100 MB limit"), std::string::npos)
      << huge;
  write_bytes(path("deep.safetensors"), spec_file(std::string(100000, '[') + "]", ""));
  const std::string deep = error_message([&] { load_safetensors(path("deep.safetensors")); });
  EXPECT_NE(deep.find(": the header nests deeper than 3 levels; not a checkpoint"),
            std::string::npos)
      << deep;
  for (const std::string& message : {huge, deep}) {
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  }
}

// Review S8: the temporary's name is predictable; a symlink planted there is replaced, never
// followed, so its target keeps its bytes.
TEST_F(Safetensors, ASymlinkAtTheTemporaryNameIsNotFollowed) {
  write_bytes(path("victim.txt"), "precious data");
  fs::create_symlink(path("victim.txt"), path("w.safetensors.tmp." + std::to_string(::getpid())));
  save_safetensors(path("w.safetensors"), {{"w", ones({2})}});
  EXPECT_EQ(read_bytes(path("victim.txt")), "precious data");
  EXPECT_EQ(load_safetensors(path("w.safetensors")).tensors.at(0).second.numel(), 2);
}

// Note [Payload checksum]: one flipped bit in the data is an error, not a different weight.
TEST_F(Safetensors, AFlippedBitInTheDataIsCaughtByTheChecksum) {
  save_safetensors(path("good.safetensors"), {{"w", ones({4, 4})}}, {{"epoch", "3"}});
  const SafetensorsFile good = load_safetensors(path("good.safetensors"));
  EXPECT_EQ(good.metadata, (Metadata{{"epoch", "3"}}));  // the checksum stays internal
  std::string bytes = read_bytes(path("good.safetensors"));
  bytes[bytes.size() - 3] ^= 0x10;  // inside the last float's exponent
  write_bytes(path("flipped.safetensors"), bytes);
  EXPECT_NE(error_message([&] {
              load_safetensors(path("flipped.safetensors"));
            }).find("is corrupted: its data does not match the checksum"),
            std::string::npos);
}

TEST_F(Safetensors, LoadStateDictChecksEverythingBeforeCopying) {
  Generator generator(3);
  const auto model = make_resnet("resnet20", generator);
  const std::vector<float> before = model->parameters().front().to_vector<float>();
  NamedTensors state = make_resnet("resnet20", generator)->state_dict();

  NamedTensors missing(state.begin(), state.end() - 1);  // no fc.bias
  EXPECT_NE(
      error_message([&] { load_state_dict(*model, missing); }).find("missing key 'fc.bias' ([10])"),
      std::string::npos);
  NamedTensors extra = state;
  extra.emplace_back("fc.extra", zeros({1}));
  EXPECT_NE(
      error_message([&] { load_state_dict(*model, extra); }).find("unexpected key 'fc.extra'"),
      std::string::npos);
  NamedTensors reshaped = state;
  reshaped.back().second = zeros({11});
  EXPECT_NE(error_message([&] {
              load_state_dict(*model, reshaped);
            }).find("'fc.bias': checkpoint has [11] float32, model has [10] float32"),
            std::string::npos);
  // None of the failed loads touched the model (conv1.weight comes first and would have been
  // copied).
  EXPECT_EQ(model->parameters().front().to_vector<float>(), before);
}

TEST_F(Safetensors, SaveReplacesAtomicallyAndFailsCleanly) {
  save_safetensors(path("m.safetensors"), {{"w", ones({2})}});
  save_safetensors(path("m.safetensors"), {{"w", zeros({3})}});
  EXPECT_EQ(load_safetensors(path("m.safetensors")).tensors[0].second.shape(), (Shape{3}));
  EXPECT_NE(error_message([&] {
              save_safetensors(path("no/such/dir/m.safetensors"), {{"w", ones({2})}});
            }).find("cannot create"),
            std::string::npos);
  EXPECT_NE(error_message([&] {
              save_safetensors(path("d.safetensors"), {{"w", ones({2})}, {"w", ones({2})}});
            }).find("duplicate tensor name 'w'"),
            std::string::npos);
  EXPECT_FALSE(fs::exists(path("d.safetensors")));
}

}  // namespace
}  // namespace tandem::nn
