// Reading and writing safetensors files (the format is described in coil/nn/safetensors.h).
// Only this file includes the JSON library (nlohmann-json): it is heavy to compile.
#include <coil/nn/safetensors.h>
#include <coil/ops.h>

#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

#include "runtime/copy.h"

namespace coil::nn {

static_assert(std::endian::native == std::endian::little,
              "safetensors stores little-endian data; coil writes its memory as it is");

namespace {

using Json = nlohmann::ordered_json;

// Headers above this are refused, as the reference implementation does.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;

struct DTypeCode {
  const char* code;
  DType dtype;
};
constexpr DTypeCode kCodes[] = {
    {"F64", kFloat64}, {"F32", kFloat32}, {"F16", kFloat16}, {"BF16", kBFloat16}, {"I64", kInt64},
    {"I32", kInt32},   {"I8", kInt8},     {"U8", kUInt8},    {"BOOL", kBool},
};
// Valid safetensors dtypes that coil has no dtype for.
constexpr const char* kUnsupported[] = {
    "I16",     "U16",     "U32", "U64", "F8_E4M3",     "F8_E5M2",    "F8_E8M0",
    "F6_E2M3", "F6_E3M2", "F4",  "C64", "F8_E4M3FNUZ", "F8_E5M2FNUZ"};

const char* code_of(DType t) {
  for (const DTypeCode& c : kCodes)
    if (c.dtype == t) return c.code;
  throw InternalError("safetensors: no code for dtype " + std::string(dtype_name(t)));
}

std::string where(const std::string& path, const std::string& name) {
  return "safetensors file '" + path + "', tensor '" + name + "'";
}

DType dtype_of_code(const std::string& code, const std::string& path, const std::string& name) {
  for (const DTypeCode& c : kCodes)
    if (code == c.code) return c.dtype;
  for (const char* u : kUnsupported)
    COIL_CHECK(code != u, "load_safetensors: ", where(path, name), " has dtype ", code,
               ", which coil does not support; convert it (in PyTorch) to one of F64 F32 F16 BF16 "
               "I64 I32 I8 U8 BOOL before saving");
  throw Error("load_safetensors: " + where(path, name) + " has an unknown dtype \"" + code +
              "\"; expected one of F64 F32 F16 BF16 I64 I32 I8 U8 BOOL");
}

// One tensor's header entry.
struct Entry {
  std::string name;
  DType dtype;
  Shape shape;
  uint64_t begin, end;
};

Entry parse_entry(const std::string& path, const std::string& name, const Json& j) {
  auto fail = [&](const std::string& what) -> Error {
    return Error("load_safetensors: " + where(path, name) + ": " + what +
                 "; expected {\"dtype\": \"F32\", \"shape\": [...], \"data_offsets\": "
                 "[begin, end]}");
  };
  if (!j.is_object()) throw fail("the header entry is not a JSON object");
  auto dt = j.find("dtype");
  auto sh = j.find("shape");
  auto off = j.find("data_offsets");
  if (dt == j.end() || !dt->is_string()) throw fail("\"dtype\" is missing or not a string");
  if (sh == j.end() || !sh->is_array()) throw fail("\"shape\" is missing or not an array");
  if (off == j.end() || !off->is_array() || off->size() != 2)
    throw fail("\"data_offsets\" is missing or not a pair");
  Entry e;
  e.name = name;
  e.dtype = dtype_of_code(dt->get<std::string>(), path, name);
  uint64_t numel = 1;
  for (const Json& d : *sh) {
    if (!d.is_number_unsigned()) throw fail("the shape holds " + d.dump() + ", not a size >= 0");
    uint64_t v = d.get<uint64_t>();
    if (v > uint64_t(INT64_MAX) || __builtin_mul_overflow(numel, v, &numel))
      throw fail("the shape " + sh->dump() + " is too large");
    e.shape.push_back(static_cast<int64_t>(v));
  }
  for (const Json& o : *off)
    if (!o.is_number_unsigned()) throw fail("data_offsets holds " + o.dump() + ", not an offset");
  e.begin = (*off)[0].get<uint64_t>();
  e.end = (*off)[1].get<uint64_t>();
  uint64_t nbytes;
  if (__builtin_mul_overflow(numel, uint64_t(itemsize(e.dtype)), &nbytes))
    throw fail("the shape " + sh->dump() + " is too large");
  COIL_CHECK(e.begin <= e.end, "load_safetensors: ", where(path, name), ": data_offsets [", e.begin,
             ", ", e.end, "] end before they begin");
  COIL_CHECK(e.end - e.begin == nbytes, "load_safetensors: ", where(path, name), ": data_offsets [",
             e.begin, ", ", e.end, "] hold ", e.end - e.begin, " bytes, but shape ",
             shape_str(e.shape), " of ", dt->get<std::string>(), " needs ", nbytes);
  return e;
}

// The file's header: its entries (in the header's order), metadata and where the data start.
struct Header {
  std::vector<Entry> entries;
  std::map<std::string, std::string> metadata;
  uint64_t data_start = 0;
};

Header read_header(std::ifstream& in, const std::string& path) {
  COIL_CHECK(in.is_open(), "load_safetensors: cannot open '", path, "': ", std::strerror(errno));
  in.seekg(0, std::ios::end);
  const uint64_t file_size = static_cast<uint64_t>(in.tellg());
  in.seekg(0);
  COIL_CHECK(file_size >= 8, "load_safetensors: '", path, "' is ", file_size,
             " bytes long, too short for a safetensors file (8-byte header length, then the "
             "header)");
  unsigned char len_bytes[8];
  in.read(reinterpret_cast<char*>(len_bytes), 8);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | len_bytes[i];
  COIL_CHECK(n <= file_size - 8 && n <= kMaxHeaderBytes, "load_safetensors: '", path,
             "' declares a header of ", n, " bytes but the file has ", file_size - 8,
             " bytes after the length; it is not a safetensors file, or it is truncated");
  std::string text(n, '\0');
  in.read(text.data(), static_cast<std::streamsize>(n));
  COIL_CHECK(in.good(), "load_safetensors: cannot read the header of '", path, "'");
  COIL_CHECK(n > 0 && text[0] == '{', "load_safetensors: the header of '", path,
             "' does not start with '{'; it is not a safetensors file");
  Json j;
  try {
    j = Json::parse(text);
  } catch (const Json::exception& e) {
    throw Error("load_safetensors: the header of '" + path + "' is not valid JSON: " + e.what());
  }
  COIL_CHECK(j.is_object(), "load_safetensors: the header of '", path, "' is not a JSON object");

  Header h;
  h.data_start = 8 + n;
  const uint64_t data_size = file_size - h.data_start;
  for (const auto& [name, value] : j.items()) {
    if (name == "__metadata__") {
      COIL_CHECK(value.is_object(), "load_safetensors: '", path,
                 "': __metadata__ must be an object of strings");
      for (const auto& [k, v] : value.items()) {
        COIL_CHECK(v.is_string(), "load_safetensors: '", path, "': __metadata__ value of '", k,
                   "' is not a string");
        h.metadata[k] = v.get<std::string>();
      }
      continue;
    }
    Entry e = parse_entry(path, name, value);
    COIL_CHECK(e.end <= data_size, "load_safetensors: ", where(path, name), ": data_offsets [",
               e.begin, ", ", e.end, "] run past the end of the data (", data_size,
               " bytes); the file is truncated or corrupt");
    h.entries.push_back(std::move(e));
  }
  // The tensors must tile the data exactly: no overlap, no gap, nothing left over.
  std::vector<const Entry*> by_offset;
  for (const Entry& e : h.entries) by_offset.push_back(&e);
  std::stable_sort(by_offset.begin(), by_offset.end(), [](const Entry* a, const Entry* b) {
    return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
  });
  uint64_t covered = 0;
  const Entry* prev = nullptr;
  for (const Entry* e : by_offset) {
    COIL_CHECK(e->begin >= covered, "load_safetensors: ", where(path, e->name), ": data_offsets [",
               e->begin, ", ", e->end, "] overlap tensor '", prev ? prev->name : "", "' [",
               prev ? prev->begin : 0, ", ", prev ? prev->end : 0, "]");
    COIL_CHECK(e->begin == covered, "load_safetensors: ", where(path, e->name), ": data_offsets [",
               e->begin, ", ", e->end, "] leave a gap after byte ", covered,
               "; the tensors must cover the data exactly");
    covered = e->end;
    prev = e;
  }
  COIL_CHECK(covered == data_size, "load_safetensors: '", path, "' has ", data_size - covered,
             " bytes after its last tensor (", data_size, " bytes of data); the file is corrupt");
  return h;
}

}  // namespace

StateDict load_safetensors(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  Header h = read_header(in, path);
  StateDict out;
  for (const Entry& e : h.entries) {
    Tensor t = empty(e.shape, e.dtype);
    in.seekg(static_cast<std::streamoff>(h.data_start + e.begin));
    in.read(static_cast<char*>(t.data_ptr()), static_cast<std::streamsize>(e.end - e.begin));
    COIL_CHECK(in.good(), "load_safetensors: cannot read the data of ", where(path, e.name));
    if (e.dtype == kBool) {  // anything but 0 and 1 is not a bool
      const auto* b = static_cast<const unsigned char*>(t.data_ptr());
      for (uint64_t i = 0; i < e.end - e.begin; ++i)
        COIL_CHECK(b[i] <= 1, "load_safetensors: ", where(path, e.name), " (BOOL) holds byte ",
                   int(b[i]), " at element ", i, "; bools are 0 or 1");
    }
    out.insert(e.name, t);
  }
  return out;
}

std::map<std::string, std::string> load_safetensors_metadata(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return read_header(in, path).metadata;
}

void save_safetensors(const std::string& path, const StateDict& tensors,
                      const std::map<std::string, std::string>& metadata) {
  std::vector<Tensor> data;
  Json header = Json::object();
  if (!metadata.empty()) {
    Json m = Json::object();
    for (const auto& [k, v] : metadata) m[k] = v;
    header["__metadata__"] = m;
  }
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    COIL_CHECK(name != "__metadata__", "save_safetensors: '", path,
               "': \"__metadata__\" is reserved for the metadata; rename the tensor");
    COIL_CHECK(t.defined(), "save_safetensors: ", where(path, name), " is undefined");
    COIL_CHECK(t.has_storage(), "save_safetensors: ", where(path, name),
               " has no data (made while capturing a compiled function?); save real tensors");
    COIL_CHECK(t.device().is_cpu(), "save_safetensors: ", where(path, name), " is on ",
               t.device().str(), "; move it to the CPU first");
    Tensor c = t.is_contiguous() ? t : contiguous_copy(t);
    const uint64_t nbytes = c.nbytes();
    header[name] = {{"dtype", code_of(c.dtype())},
                    {"shape", c.sizes()},
                    {"data_offsets", {offset, offset + nbytes}}};
    offset += nbytes;
    data.push_back(c);
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // the data start 8-byte aligned

  const std::string tmp = path + ".tmp" + std::to_string(::getpid());
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  COIL_CHECK(f, "save_safetensors: cannot write '", tmp, "': ", std::strerror(errno));
  unsigned char len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>(uint64_t(text.size()) >> (8 * i));
  bool ok =
      std::fwrite(len, 1, 8, f) == 8 && std::fwrite(text.data(), 1, text.size(), f) == text.size();
  for (const Tensor& c : data)
    ok = ok && (c.nbytes() == 0 || std::fwrite(c.data_ptr(), 1, c.nbytes(), f) == c.nbytes());
  ok = (std::fclose(f) == 0) && ok;
  if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::string why = std::strerror(errno);
    std::remove(tmp.c_str());
    throw Error("save_safetensors: cannot write '" + path + "': " + why);
  }
}

}  // namespace coil::nn
