#include <coil/device.h>

#include <coil/error.h>

namespace coil {

Device::Device(const std::string& spec) {
  std::string kind = spec.substr(0, spec.find(':'));
  if (kind == "cpu") {
    type = DeviceType::CPU;
  } else if (kind == "cuda") {
    type = DeviceType::CUDA;
  } else {
    throw Error("unknown device '" + spec + "': expected \"cpu\", \"cuda\" or \"cuda:N\"");
  }
  index = 0;
  if (auto colon = spec.find(':'); colon != std::string::npos) {
    try {
      size_t used = 0;
      index = std::stoi(spec.substr(colon + 1), &used);
      COIL_CHECK(used == spec.size() - colon - 1 && index >= 0, "");
    } catch (const std::exception&) {
      throw Error("bad device index in '" + spec + "': expected a non-negative integer after ':'");
    }
  }
}

std::string Device::str() const {
  return is_cpu() ? std::string("cpu") : "cuda:" + std::to_string(index);
}

}  // namespace coil
