// The factories of a codec library, one per row of the codec table: make_<stem>_codec, declared
// in the namespace of the library (cpu, cuda) that includes this and defines them in each codec's
// own file. make_cpu_codec and make_cuda_codec switch over the same table; a factory answers
// kUnsupported for parameters its library does not implement.
#pragma once

#include <memory>

#include "gradgate/base/codec_table.h"
#include "gradgate/kernels/codec.h"
#include "gradgate/kernels/codec_spec.h"

#define GRADGATE_DECLARE_CODEC_FACTORY(enumerator, id, name, c_suffix, factory, ...) \
  Result<std::unique_ptr<Codec>> make_##factory##_codec(const CodecParams& params);
