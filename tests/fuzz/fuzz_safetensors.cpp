// safetensors bytes → SafetensorsFile::open (header, offsets, dtypes, shapes) → every tensor read:
// floating tensors converted to float and to double, integer tensors widened to int64.
#include "fuzz_target.hpp"

#include <causalqwen/format/safetensors.hpp>

#include <vector>

void run_one(std::string_view bytes) {
  namespace format = causalqwen::format;
  const auto path = cqfuzz::as_file(bytes, "x.safetensors");
  cqfuzz::refused_or_ok([&] {
    const auto file = format::SafetensorsFile::open(path);
    for (const auto& name : file.names()) {
      if (format::is_floating(file.info(name).dtype)) {
        (void)file.read_vector<float>(name);
        (void)file.read_vector<double>(name);
      } else {
        (void)file.read_int64_vector(name);
      }
    }
  });
}
