// Calls into the C API made from C (c_caller.c), where an enum argument may hold any int: what a
// ctypes binding or a C program's own constant passes, and what C++ could not build without
// undefined behaviour.
#pragma once

#include "gradgate/client.h"

extern "C" {
gg_status c_declare_with_dtype(gg_client* client, const char* name, int dtype, gg_tensor** out);
gg_status c_declare_cuda_with_dtype(gg_client* client, const char* name, int dtype,
                                    const gg_cuda_buffer* buffer, gg_tensor** out);
const char* c_status_name(int status);
}
