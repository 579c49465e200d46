/// Umbrella header of the file-format layer (no model needed): `#include <causalqwen/format.hpp>`.
///
///   dtype.hpp                  Dtype (F64, F32, BF16, F16, I64, …), names, sizes
///   half.hpp                   exact bfloat16 / binary16 ↔ float conversions
///   mapped_file.hpp            MappedFile: read-only mmap with a read fallback
///   atomic_file.hpp            AtomicFile, write_file_atomically: temp, fsync, rename
///   safetensors.hpp            SafetensorsFile: validated reader, converting to float/double/int64
///   safetensors_writer.hpp     SafetensorsWriter: the Python library's layout, written atomically
///   safetensors_checkpoint.hpp SafetensorsCheckpoint: model.safetensors or indexed shards
///   expected_tensors.hpp       check_expected: missing, extra, wrongly-shaped tensors at once
///   config_json.hpp            read_config_fields: config.json's fields, each checked
#pragma once
#include <causalqwen/version.hpp>  // namespace alias cq
#include <causalqwen/format/dtype.hpp>
#include <causalqwen/format/half.hpp>
#include <causalqwen/format/mapped_file.hpp>
#include <causalqwen/format/atomic_file.hpp>
#include <causalqwen/format/safetensors.hpp>
#include <causalqwen/format/safetensors_writer.hpp>
#include <causalqwen/format/safetensors_checkpoint.hpp>
#include <causalqwen/format/expected_tensors.hpp>
#include <causalqwen/format/config_json.hpp>
