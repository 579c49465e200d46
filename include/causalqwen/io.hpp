/// Umbrella header of the file layer: `#include <causalqwen/io.hpp>`.
///
///   dtype.hpp                  Dtype (F64, F32, BF16, F16, I64, …), names, sizes
///   half.hpp                   exact bfloat16 / binary16 ↔ float conversions
///   mapped_file.hpp            MappedFile: read-only mmap with a read fallback
///   atomic_file.hpp            AtomicFile, write_file_atomically: temp, fsync, rename
///   safetensors.hpp            SafetensorsFile: validated reader, converting to float/double/int64
///   safetensors_writer.hpp     SafetensorsWriter: the Python library's layout, written atomically
///   safetensors_checkpoint.hpp SafetensorsCheckpoint: model.safetensors or indexed shards
///   expected_tensors.hpp       check_expected: missing, extra, wrongly-shaped tensors at once
#pragma once
#include <causalqwen/version.hpp>  // namespace alias cq
#include <causalqwen/io/dtype.hpp>
#include <causalqwen/io/half.hpp>
#include <causalqwen/io/mapped_file.hpp>
#include <causalqwen/io/atomic_file.hpp>
#include <causalqwen/io/safetensors.hpp>
#include <causalqwen/io/safetensors_writer.hpp>
#include <causalqwen/io/safetensors_checkpoint.hpp>
#include <causalqwen/io/expected_tensors.hpp>
