// safetensors: round trips of every dtype, byte-exact files built by hand in the test (so the
// format is checked independently of coil's writer and reader), malformed files, and
// Module::save / load.
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "testing.h"

using namespace coil;
using namespace coil::testing;

namespace {

using Bytes = std::vector<unsigned char>;

// A fresh path under the temp directory, removed at the end of the test.
class SafetensorsTest : public ::testing::Test {
 protected:
  std::string path(const std::string& name) {
    auto p = std::filesystem::temp_directory_path() /
             ("coil_nn_" + std::to_string(::getpid()) + "_" + name + ".safetensors");
    paths_.push_back(p.string());
    return p.string();
  }
  void TearDown() override {
    for (const auto& p : paths_) std::filesystem::remove(p);
  }

 private:
  std::vector<std::string> paths_;
};

void append_u64(Bytes& b, uint64_t v) {
  for (int i = 0; i < 8; ++i) b.push_back(static_cast<unsigned char>(v >> (8 * i)));
}
void append(Bytes& b, std::initializer_list<unsigned> bytes) {
  for (unsigned x : bytes) b.push_back(static_cast<unsigned char>(x));
}
// length + header (padded with spaces to `pad_to` bytes) + data.
Bytes file_bytes(const std::string& header, const Bytes& data, size_t pad_to = 0) {
  std::string h = header;
  if (pad_to > h.size()) h.append(pad_to - h.size(), ' ');
  Bytes b;
  append_u64(b, h.size());
  b.insert(b.end(), h.begin(), h.end());
  b.insert(b.end(), data.begin(), data.end());
  return b;
}
void write_file(const std::string& path, const Bytes& b) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}
Bytes read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(in), {});
}

}  // namespace

TEST_F(SafetensorsTest, RoundTripsEveryDtype) {
  manual_seed(11);
  nn::StateDict sd;
  const DType dtypes[] = {kFloat64, kFloat32, kFloat16, kBFloat16, kInt64,
                          kInt32,   kInt8,    kUInt8,   kBool};
  for (DType t : dtypes) {
    double lo = t == kUInt8 || t == kBool ? 0 : -50;
    sd.insert(std::string("t_") + dtype_name(t), random({3, 4}, t, lo, 50));
  }
  sd.insert("scalar", full({}, 3.5));
  sd.insert("empty", zeros({0, 3}));
  sd.insert("transposed", noncontiguous(random({4, 5})));
  sd.insert("sliced", random({6, 4}).slice(0, 1, 6, 2));
  std::string p = path("roundtrip");
  nn::save_safetensors(p, sd, {{"format", "pt"}, {"note", "coil test"}});
  nn::StateDict back = nn::load_safetensors(p);
  EXPECT_EQ(back.keys(), sd.keys());  // the writer's order is kept
  for (const auto& [name, t] : sd) {
    const Tensor& u = back[name];
    EXPECT_EQ(u.dtype(), t.dtype()) << name;
    EXPECT_EQ(u.sizes(), t.sizes()) << name;
    EXPECT_TRUE(u.is_contiguous()) << name;
    EXPECT_TRUE(equal(u, t)) << name;
  }
  auto meta = nn::load_safetensors_metadata(p);
  EXPECT_EQ(meta.size(), 2u);
  EXPECT_EQ(meta["note"], "coil test");
}

TEST_F(SafetensorsTest, WritesTheExactBytes) {
  // a: F32 [2] = {1, -2.5}; b: I64 [] = 7; c: BF16 [1, 1] = 1; d: BOOL [2] = {true, false}.
  nn::StateDict sd;
  sd.insert("a", tensor<float>({1.0f, -2.5f}));
  sd.insert("b", full({}, int64_t{7}));
  sd.insert("c", ones({1, 1}, kBFloat16));
  sd.insert("d", tensor<int64_t>({1, 0}).to(kBool));
  std::string p = path("exact");
  nn::save_safetensors(p, sd);
  const std::string header = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                             R"("b":{"dtype":"I64","shape":[],"data_offsets":[8,16]},)"
                             R"("c":{"dtype":"BF16","shape":[1,1],"data_offsets":[16,18]},)"
                             R"("d":{"dtype":"BOOL","shape":[2],"data_offsets":[18,20]}})";
  Bytes data;
  append(data, {0x00, 0x00, 0x80, 0x3f});  // 1.0f
  append(data, {0x00, 0x00, 0x20, 0xc0});  // -2.5f
  append(data, {0x07, 0, 0, 0, 0, 0, 0, 0});
  append(data, {0x80, 0x3f});  // bfloat16 1.0
  append(data, {0x01, 0x00});
  // The header is padded with spaces so that the data start 8-byte aligned.
  size_t padded = (header.size() + 7) / 8 * 8;
  EXPECT_EQ(read_file(p), file_bytes(header, data, padded));
}

TEST_F(SafetensorsTest, ReadsAHandWrittenFile) {
  // As another writer might lay it out: metadata first, spaces, fields in another order,
  // tensors in the data in a different order from the header's.
  const std::string header = R"({"__metadata__": {"format": "pt"}, )"
                             R"("w": {"shape": [2, 2], "dtype": "F16", "data_offsets": [8, 16]}, )"
                             R"("n": {"dtype": "I32", "shape": [2], "data_offsets": [0, 8]}})";
  Bytes data;
  append(data, {0x05, 0, 0, 0, 0xfe, 0xff, 0xff, 0xff});           // int32 5, -2
  append(data, {0x00, 0x3c, 0x00, 0xc0, 0x00, 0x38, 0x00, 0x00});  // half 1, -2, 0.5, 0
  std::string p = path("handwritten");
  write_file(p, file_bytes(header, data, 200));
  nn::StateDict sd = nn::load_safetensors(p);
  EXPECT_EQ(sd.keys(), (std::vector<std::string>{"w", "n"}));
  EXPECT_EQ(sd["w"].dtype(), kFloat16);
  expect_close(sd["w"], {1, -2, 0.5, 0}, {2, 2});
  EXPECT_EQ(sd["n"].dtype(), kInt32);
  expect_close(sd["n"], {5, -2}, {2});
  EXPECT_EQ(nn::load_safetensors_metadata(p).at("format"), "pt");
}

TEST_F(SafetensorsTest, MalformedFilesAreErrorsNamingFileAndTensor) {
  std::string p = path("bad");
  auto load_bytes = [&](const Bytes& b) {
    write_file(p, b);
    return nn::load_safetensors(p);
  };
  const Bytes eight = {0, 0, 0, 0, 0, 0, 0, 0};
  auto header_with = [](const std::string& entry) { return "{\"x\":" + entry + "}"; };

  EXPECT_COIL_ERROR(nn::load_safetensors(p + ".missing"), "cannot open");
  EXPECT_COIL_ERROR(load_bytes({1, 2, 3}), "too short for a safetensors file");
  Bytes huge;
  append_u64(huge, 1000);
  append(huge, {'{', '}'});
  EXPECT_COIL_ERROR(load_bytes(huge), "declares a header of 1000 bytes but the file has 2");
  EXPECT_COIL_ERROR(load_bytes(file_bytes("[1, 2]", {})), "does not start with '{'");
  EXPECT_COIL_ERROR(load_bytes(file_bytes("{\"x\": ", {})), "is not valid JSON");
  EXPECT_COIL_ERROR(load_bytes(file_bytes(
                        header_with(R"({"dtype":"Q8","shape":[1],"data_offsets":[0,1]})"), {0})),
                    "tensor 'x' has an unknown dtype \"Q8\"");
  EXPECT_COIL_ERROR(
      load_bytes(
          file_bytes(header_with(R"({"dtype":"I16","shape":[1],"data_offsets":[0,2]})"), {0, 0})),
      "has dtype I16, which coil does not support");
  EXPECT_COIL_ERROR(
      load_bytes(file_bytes(header_with(R"({"dtype":"F32","shape":[2],"data_offsets":[0,8]})"),
                            {0, 0, 0, 0})),
      "run past the end of the data (4 bytes)");
  EXPECT_COIL_ERROR(load_bytes(file_bytes(
                        header_with(R"({"dtype":"F32","shape":[3],"data_offsets":[0,8]})"), eight)),
                    "hold 8 bytes, but shape [3] of F32 needs 12");
  EXPECT_COIL_ERROR(load_bytes(file_bytes(
                        header_with(R"({"dtype":"F32","shape":[2],"data_offsets":[8,0]})"), eight)),
                    "end before they begin");
  EXPECT_COIL_ERROR(
      load_bytes(
          file_bytes(header_with(R"({"dtype":"F32","shape":[-2],"data_offsets":[0,8]})"), eight)),
      "not a size >= 0");
  EXPECT_COIL_ERROR(load_bytes(file_bytes(header_with(R"({"dtype":"F32","shape":[2]})"), eight)),
                    "\"data_offsets\" is missing");
  EXPECT_COIL_ERROR(
      load_bytes(file_bytes(R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                            R"("y":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                            eight)),
      "tensor 'y': data_offsets [4, 8] overlap tensor 'x' [0, 8]");
  EXPECT_COIL_ERROR(load_bytes(file_bytes(
                        header_with(R"({"dtype":"F32","shape":[1],"data_offsets":[4,8]})"), eight)),
                    "leave a gap after byte 0");
  EXPECT_COIL_ERROR(load_bytes(file_bytes(
                        header_with(R"({"dtype":"F32","shape":[1],"data_offsets":[0,4]})"), eight)),
                    "has 4 bytes after its last tensor");
  EXPECT_COIL_ERROR(
      load_bytes(
          file_bytes(header_with(R"({"dtype":"BOOL","shape":[2],"data_offsets":[0,2]})"), {1, 2})),
      "holds byte 2 at element 1");
  // Every message names the file.
  try {
    load_bytes(file_bytes(header_with(R"({"dtype":"Q8","shape":[1],"data_offsets":[0,1]})"), {0}));
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
  }
}

TEST_F(SafetensorsTest, SaveErrors) {
  std::string p = path("save_errors");
  EXPECT_COIL_ERROR(nn::save_safetensors(p, {{"__metadata__", ones({1})}}), "is reserved");
  EXPECT_COIL_ERROR(nn::save_safetensors(p, {{"u", Tensor()}}), "tensor 'u' is undefined");
  EXPECT_COIL_ERROR(nn::save_safetensors("/nonexistent_dir/x.safetensors", {{"a", ones({1})}}),
                    "cannot write");
  EXPECT_FALSE(std::filesystem::exists(p));
}

TEST_F(SafetensorsTest, ModuleSaveAndLoad) {
  manual_seed(12);
  auto make = [] {
    return std::make_shared<nn::Sequential>(
        std::make_shared<nn::Conv2d>(1, 2, 3), std::make_shared<nn::BatchNorm2d>(2),
        std::make_shared<nn::Flatten>(), std::make_shared<nn::Linear>(2 * 4 * 4, 3));
  };
  auto a = make();
  a->forward(random({2, 1, 6, 6}));  // running statistics move away from their defaults
  a->eval();
  std::string p = path("module");
  a->save(p);
  auto b = make();
  b->eval();
  Tensor x = random({2, 1, 6, 6});
  EXPECT_FALSE(allclose(a->forward(x), b->forward(x)));
  b->load(p);
  EXPECT_TRUE(equal(a->forward(x), b->forward(x)));
  EXPECT_EQ(b->get_buffer("1.num_batches_tracked").item<int64_t>(), 1);

  auto other = std::make_shared<nn::Linear>(3, 3);
  EXPECT_COIL_ERROR(other->load(p), "(while loading " + p + ")");
  EXPECT_COIL_ERROR(other->load(p), "Missing key(s) in state_dict: \"weight\", \"bias\"");
}
