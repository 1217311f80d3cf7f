/* A C caller of libgradgate: compiles the public header as C, and passes enum arguments holding
 * values that no enumerator names, as C allows. Four fp32 elements, no shape, no data volume. */
#include "gradgate/client.h"

gg_status c_declare_with_dtype(gg_client* client, const char* name, int dtype, gg_tensor** out) {
  return gg_declare(client, name, 4, (gg_dtype)dtype, 0, 0, 0.0, out);
}

gg_status c_declare_cuda_with_dtype(gg_client* client, const char* name, int dtype,
                                    const gg_cuda_buffer* buffer, gg_tensor** out) {
  return gg_declare_cuda(client, name, 4, (gg_dtype)dtype, 0, 0, 0.0, buffer, out);
}

const char* c_status_name(int status) { return gg_status_name((gg_status)status); }
