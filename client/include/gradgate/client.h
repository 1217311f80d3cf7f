/* libgradgate: the C interface between a training process and its node's gradgate gateway.
 *
 * A process connects to the gateway of its node over a Unix socket, declares each tensor it will
 * all-reduce (a DDP bucket, a layer), and gets for each a buffer in shared memory that both sides
 * map: the process writes its gradient there, starts an all-reduce, and after a successful wait
 * finds the sum over every worker of the job in the same buffer. A tensor already in GPU memory
 * can instead be declared with gg_declare_cuda: the gateway maps it through CUDA IPC and works on
 * it in place. No gradient byte passes through the socket.
 *
 * Every function returns a gg_status; on an error, gg_last_error() says what went wrong in the
 * calling thread's last failed call. All functions are thread-safe; one tensor may have at most one
 * all-reduce in flight at a time.
 */
#ifndef GRADGATE_CLIENT_H_
#define GRADGATE_CLIENT_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum gg_status {
  GG_OK = 0,
  GG_INVALID_ARGUMENT = 1,   /* a null pointer, a bad name, size, dtype or shape */
  GG_CONNECT_FAILED = 2,     /* no gateway answers on the socket path */
  GG_PROTOCOL_ERROR = 3,     /* the gateway's reply was not understood (version mismatch?) */
  GG_TIMEOUT = 4,            /* the wait ended before the all-reduce did; it is still running */
  GG_PEER_FAILED = 5,        /* another gateway of the job failed or timed out mid all-reduce */
  GG_CLOSED = 6,             /* the connection to the gateway is gone */
  GG_RESOURCE_EXHAUSTED = 7, /* the gateway's memory cap or limits refuse the tensor */
  GG_REJECTED = 8,           /* the gateway refused the request (see the message) */
  GG_INTERNAL = 9,
  GG_NONFINITE_GRADIENT = 10, /* a node's sum of this step holds NaN or infinite values: the step
                                 is skipped on every node (the buffer's values are unspecified)
                                 and the tensor goes on at its next step; mixed-precision loss
                                 scaling skips such a step too */
  GG_RANK_IN_USE = 11         /* another connection holds this local rank: a worker that has not
                                 left yet (a restarted one waits with gg_connect_wait), or two
                                 workers given the same rank */
} gg_status;

typedef enum gg_dtype { GG_FP32 = 0, GG_FP16 = 1, GG_BF16 = 2 } gg_dtype;

/* The codec the gateways used for an all-reduce (the codec ids of the wire frame). The result of
 * a sparse codec (top-k, random-k) is zero wherever no gateway sent the element. */
typedef enum gg_codec {
  GG_CODEC_NONE = 0,
  GG_CODEC_FP16 = 1,
  GG_CODEC_BF16 = 2,
  GG_CODEC_QSGD = 3,
  GG_CODEC_SIGN = 4,
  GG_CODEC_TOPK = 5,
  GG_CODEC_RANDOMK = 6,
  GG_CODEC_POWERSGD = 7,
  GG_CODEC_UNKNOWN = 255 /* none yet, or one newer than this library */
} gg_codec;

typedef struct gg_client gg_client;
typedef struct gg_tensor gg_tensor;
typedef struct gg_request gg_request;

/* What the gateway reports about the job when a client connects. */
typedef struct gg_job_info {
  uint32_t node_rank;     /* this gateway's rank among the job's gateways */
  uint32_t nodes;         /* gateways in the job */
  uint32_t local_workers; /* workers the gateway expects on this node */
  uint32_t world_size;    /* workers in the job (the sum is over all of them) */
} gg_job_info;

/* How one all-reduce went, filled by gg_wait. */
typedef struct gg_allreduce_info {
  uint64_t step;              /* the tensor's all-reduce count, from 0 */
  uint64_t raw_bytes;         /* bytes of the node's sum in the tensor's dtype */
  uint64_t wire_bytes;        /* bytes this gateway sent to other gateways for it */
  double encode_seconds;      /* compression, error feedback included */
  double communicate_seconds; /* waiting for and moving frames */
  double decode_seconds;      /* decompression and summation */
} gg_allreduce_info;

/* The message of the calling thread's last failed call ("" if none). Valid until its next call. */
const char* gg_last_error(void);
/* A stable name for a status ("ok", "timeout", ...). */
const char* gg_status_name(gg_status status);
/* The name of a codec ("none", "topk", ...; "unknown" for GG_CODEC_UNKNOWN or any other value):
 * the codec names of the gateway's configuration. */
const char* gg_codec_name(gg_codec codec);

/* Connects as worker `local_rank` (0 .. local_workers - 1) of this node, in one attempt: never
 * blocks on a gateway that does not accept (GG_CONNECT_FAILED at once) and waits at most 30 s for
 * its answer (GG_TIMEOUT). */
gg_status gg_connect(const char* socket_path, uint32_t local_rank, gg_client** out);
/* gg_connect, tried again for up to `timeout_ms` while the gateway is not there yet (no socket,
 * nobody listening on it, or not accepting now: a gateway that starts or restarts), closes the
 * connection before answering (it is stopping), answers GG_CLOSED (it is not serving yet: it
 * joins its job, and its message says what it waits for), or GG_RANK_IN_USE (a restarted worker
 * whose predecessor the gateway has not seen leave); waiting 10 ms after the first attempt and
 * twice as long after each next one, up to 1 s. Any other failure returns at once. When the time
 * is up: GG_TIMEOUT, its message naming the attempts made and the last failure (not a HELLO that
 * the deadline cut short, when an attempt before it failed otherwise). */
gg_status gg_connect_wait(const char* socket_path, uint32_t local_rank, uint32_t timeout_ms,
                          gg_client** out);
/* The job as the gateway sees it. */
gg_status gg_job(const gg_client* client, gg_job_info* out);
/* The gateway's collective.timeout_ms: it fails a step whose local workers or peers do not all
 * come within it, and an exchange that takes longer. A limit of the caller's own on gg_wait
 * should outlast twice that, so that the gateway's error, which says why, comes first. */
gg_status gg_collective_timeout(const gg_client* client, uint32_t* timeout_ms);
/* Closes the connection; tensors and requests of the client become invalid and are freed. */
gg_status gg_close(gg_client* client);

/* Declares a tensor: `name` identifies it across workers and nodes (every worker declares the same
 * names with the same sizes), `rows` x `cols` its 2-D shape for low-rank codecs (0, 0 if none),
 * `data_volume` the number of samples this worker trains on (for data-aware ratios; 0 if
 * unknown). Declaring a name again with the same size returns the same handle. */
gg_status gg_declare(gg_client* client, const char* name, uint64_t elements, gg_dtype dtype,
                     uint64_t rows, uint64_t cols, double data_volume, gg_tensor** out);

/* Where a tensor lies in this process's GPU memory, for gg_declare_cuda. The gateway opens the
 * memory through CUDA IPC and all-reduces it in place: no copy to or from the host. */
typedef struct gg_cuda_buffer {
  /* cudaDeviceProp.uuid of the GPU that holds the tensor. */
  uint8_t device_uuid[16];
  /* The cudaIpcMemHandle_t of the allocation holding the tensor. */
  uint8_t memory_handle[64];
  /* Bytes from the allocation's base to the tensor's first element. */
  uint64_t offset;
  /* The cudaIpcEventHandle_t of an event created with cudaEventInterprocess |
   * cudaEventDisableTiming that the process records on the stream that wrote the gradient, after
   * writing it and before every gg_allreduce: the gateway waits for it before it reads. */
  uint8_t ready_event_handle[64];
} gg_cuda_buffer;

/* Declares a tensor, as gg_declare, whose memory is the process's own GPU memory described by
 * `buffer` instead of a shared buffer. The allocation must stay allocated, and the tensor's bytes
 * untouched between gg_allreduce and the end of its gg_wait, for as long as the client is open or
 * until the tensor moves. On GG_OK from gg_wait the sum has been written into that memory (the
 * gateway's writes are complete). Declaring the name again with the same size and buffer returns
 * a fresh handle. With another GPU buffer of the same size it moves the tensor there (DDP
 * reallocates its buckets), under the same name on every worker: its all-reduces, through this
 * handle or an earlier one, read and write the new buffer from then on; GG_INVALID_ARGUMENT while
 * one of them runs. After gg_declare, or with another size or dtype, it is GG_INVALID_ARGUMENT.
 * A gateway that cannot map CUDA memory (built without CUDA, no GPU visible, another GPU) answers
 * GG_REJECTED with its reason: declare the tensor with gg_declare then. libgradgate itself does
 * not use CUDA. */
gg_status gg_declare_cuda(gg_client* client, const char* name, uint64_t elements, gg_dtype dtype,
                          uint64_t rows, uint64_t cols, double data_volume,
                          const gg_cuda_buffer* buffer, gg_tensor** out);
/* Releases a tensor this worker no longer uses (DDP's buckets of the first step, say, which it
 * rebuilds after it): its shared buffer is unmapped, and the gateway drops the tensor with its
 * state (residuals, codec state) once every local worker released it or left. The tensor must have
 * no all-reduce in flight (GG_INVALID_ARGUMENT). Afterwards the handle serves nothing (gg_allreduce
 * is GG_INVALID_ARGUMENT, gg_tensor_data NULL) and must not be used by another thread meanwhile;
 * declaring the name again makes a new tensor. Steps of the tensor that the node's other workers
 * ask for fail at once (GG_PEER_FAILED) until this worker declares it again: release a tensor on
 * every worker. */
gg_status gg_release(gg_tensor* tensor);

/* The tensor's shared buffer (elements of its dtype; NULL for a tensor of gg_declare_cuda, or one
 * released) and its size in bytes. */
void* gg_tensor_data(gg_tensor* tensor);
size_t gg_tensor_bytes(const gg_tensor* tensor);

/* Starts the all-reduce of the tensor's buffer. The buffer must not be touched until gg_wait
 * returns GG_OK or an error other than GG_TIMEOUT. */
gg_status gg_allreduce(gg_tensor* tensor, gg_request** out);
/* Waits up to timeout_ms (negative: no limit) for the request. On GG_OK the buffer holds the sum
 * and `info` (may be null) how it went. On another error the buffer's contents are unspecified:
 * the gateway reduces a single worker's fp32 buffer in place. The request is freed unless
 * GG_TIMEOUT is returned. */
gg_status gg_wait(gg_request* request, int64_t timeout_ms, gg_allreduce_info* info);
/* The codec of the all-reduce of the tensor's latest gg_wait that returned GG_OK
 * (GG_CODEC_UNKNOWN before the first). The gateways' policy may change a tensor's codec from one
 * step to the next. */
gg_status gg_tensor_codec(const gg_tensor* tensor, gg_codec* out);

#ifdef __cplusplus
}
#endif

#endif /* GRADGATE_CLIENT_H_ */
