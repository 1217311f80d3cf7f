// The messages of the Unix socket between libgradgate and the gateway's ingress, shared by both
// sides so that they cannot drift apart.
//
// The socket is SOCK_SEQPACKET: one message per packet, boundaries kept, at most kMaxPacketBytes.
// Both ends run on the same host, so fields are in the host's byte order, packed without padding.
// Every message starts with a 16-byte header:
//
//   u32 magic (kMagic) | u16 version (kVersion) | u16 type | u64 request id
//
// The client numbers its requests (from 1); a reply carries the id of the request it answers.
// Client -> gateway:
//   HELLO      u32 local_rank                                  -> HELLO_OK or ERROR (then closed)
//   DECLARE    u16 name length, name bytes (1..255, no NUL), u64 elements, u8 dtype, u64 rows,
//              u64 cols, f64 data_volume; one memfd of elements * dtype bytes in SCM_RIGHTS
//                                                              -> DECLARE_OK or ERROR
//   ALLREDUCE  u32 key                                         -> ALLREDUCE_DONE or ERROR
//   DECLARE_CUDA  the fields of DECLARE, then u8[16] device_uuid, u8[64] memory_handle
//              (cudaIpcMemHandle_t), u64 offset, u8[64] ready_event_handle (cudaIpcEventHandle_t);
//              no file descriptor: the tensor stays in the worker's GPU memory, which the gateway
//              opens through CUDA IPC                          -> DECLARE_OK or ERROR (GG_REJECTED
//              when the gateway cannot map it: the session goes on, the worker may DECLARE)
//   RELEASE    u32 key: the worker is done with the tensor (its buffer is unmapped; the gateway
//              drops the tensor and its state once every local worker released it or left)
//                                                              -> RELEASE_OK or ERROR
// Gateway -> client:
//   HELLO_OK        u32 node_rank, u32 nodes, u32 local_workers, u32 world_size,
//                   u32 collective_timeout_ms (from version 5)
//   DECLARE_OK      u32 key
//   RELEASE_OK      u32 key
//   ALLREDUCE_DONE  u8 status (a gg_status), u16 message length, message (<= 512 bytes), u64 step,
//                   u64 raw_bytes, u64 wire_bytes, f64 encode, communicate, decode seconds,
//                   u8 codec (from version 6: the wire frame's codec id of the step, a gg_codec;
//                   a client takes an id it does not know for GG_CODEC_UNKNOWN)
//   ERROR           u8 status (a gg_status), u16 message length, message (<= 512 bytes)
//
// A malformed message (bad magic or version, unknown type, wrong length, a missing or extra file
// descriptor, a request before HELLO) makes the gateway send ERROR (GG_PROTOCOL_ERROR) with the
// offending request id (0 if unknown) and close the session.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gradgate/base/dtype.h"

namespace gradgate::ingress_protocol {

inline constexpr uint32_t kMagic = 0x50494747;  // "GGIP" in little-endian byte order
// 2: a step can end with GG_NONFINITE_GRADIENT (10), which a client of version 1 would take for a
// malformed reply.
// 3: a HELLO can be refused with GG_RANK_IN_USE (11), for the same reason.
// 4: RELEASE, which a gateway of version 3 would take for a malformed message.
// 5: HELLO_OK carries the gateway's collective timeout, which a client of version 4 would take for
// a malformed reply.
// 6: ALLREDUCE_DONE carries the step's codec, which a client of version 5 would take for a
// malformed reply.
// A gateway serves clients of versions kOldestVersion..kVersion and answers each in its own
// version (to a client of version 2, a rank in use is GG_REJECTED), so workers may be upgraded
// after their gateways.
inline constexpr uint16_t kVersion = 6;
inline constexpr uint16_t kOldestVersion = 2;
inline constexpr uint16_t kFirstVersionWithRankInUse = 3;
inline constexpr uint16_t kFirstVersionWithRelease = 4;
inline constexpr uint16_t kFirstVersionWithCollectiveTimeout = 5;
inline constexpr uint16_t kFirstVersionWithCodec = 6;
inline constexpr size_t kHeaderBytes = 16;
inline constexpr size_t kMaxNameBytes = 255;
inline constexpr size_t kMaxTextBytes = 512;
inline constexpr size_t kMaxPacketBytes = 1024;  // larger than any valid message

enum class MessageType : uint16_t {
  kHello = 1,
  kDeclare = 2,
  kAllreduce = 3,
  kDeclareCuda = 4,
  kRelease = 5,
  kHelloOk = 101,
  kDeclareOk = 102,
  kAllreduceDone = 103,
  kError = 104,
  kReleaseOk = 105,
};

/// Bytes per element of a dtype's wire byte (gradgate::Dtype, numbered as gg_dtype); 0 for a value
/// that names none.
inline size_t wire_dtype_bytes(uint8_t dtype) {
  const auto known = dtype_from_wire(dtype);
  return known ? dtype_bytes(*known) : 0;
}

struct Header {
  uint32_t magic = kMagic;
  uint16_t version = kVersion;
  MessageType type = MessageType::kError;
  uint64_t request_id = 0;
};

struct Hello {
  static constexpr MessageType kType = MessageType::kHello;
  uint32_t local_rank = 0;
};

struct HelloOk {
  static constexpr MessageType kType = MessageType::kHelloOk;
  uint32_t node_rank = 0, nodes = 0, local_workers = 0, world_size = 0;
  /// How long the gateway lets one all-reduce take (collective.timeout_ms); absent for a client
  /// older than kFirstVersionWithCollectiveTimeout.
  std::optional<uint32_t> collective_timeout_ms;
};

struct Declare {
  static constexpr MessageType kType = MessageType::kDeclare;
  std::string name;
  uint64_t elements = 0;
  uint8_t dtype = 0;
  uint64_t rows = 0, cols = 0;
  double data_volume = 0.0;
};

/// Where a tensor lies in the worker's GPU memory, for the gateway to open through CUDA IPC.
struct CudaBuffer {
  std::array<std::byte, 16> device_uuid{};         // cudaDeviceProp::uuid of the GPU
  std::array<std::byte, 64> memory_handle{};       // cudaIpcMemHandle_t of the allocation
  uint64_t offset = 0;                             // bytes from the allocation's base to the tensor
  std::array<std::byte, 64> ready_event_handle{};  // cudaIpcEventHandle_t of the ready event
  bool operator==(const CudaBuffer&) const = default;
};

struct DeclareCuda {
  static constexpr MessageType kType = MessageType::kDeclareCuda;
  Declare tensor;
  CudaBuffer buffer;
};

/// A message whose body is a tensor's key alone.
template <MessageType Type>
struct KeyMessage {
  static constexpr MessageType kType = Type;
  uint32_t key = 0;
};

using DeclareOk = KeyMessage<MessageType::kDeclareOk>;
using Allreduce = KeyMessage<MessageType::kAllreduce>;
using Release = KeyMessage<MessageType::kRelease>;
using ReleaseOk = KeyMessage<MessageType::kReleaseOk>;

struct AllreduceDone {
  static constexpr MessageType kType = MessageType::kAllreduceDone;
  uint8_t status = 0;  // a gg_status
  std::string message;
  uint64_t step = 0, raw_bytes = 0, wire_bytes = 0;
  double encode_seconds = 0.0, communicate_seconds = 0.0, decode_seconds = 0.0;
  /// The codec the gateways used for the step (a gg_codec, the wire frame's codec id); absent for
  /// a client older than kFirstVersionWithCodec.
  std::optional<uint8_t> codec;
};

struct Error {
  static constexpr MessageType kType = MessageType::kError;
  uint8_t status = 0;  // a gg_status
  std::string message;
};

/// Why a declared tensor is unusable ("" if it is fine): the rules both sides enforce.
inline std::string check_declare(const Declare& d) {
  if (d.name.empty()) return "empty tensor name";
  if (d.name.size() > kMaxNameBytes) return "tensor name longer than 255 bytes";
  if (d.name.find('\0') != std::string::npos) return "tensor name contains a NUL byte";
  const size_t element_bytes = wire_dtype_bytes(d.dtype);
  if (element_bytes == 0) return "unknown dtype " + std::to_string(d.dtype);
  if (d.elements == 0) return "0 elements";
  if (d.elements > (uint64_t{1} << 40) / element_bytes) return "tensor larger than 1 TiB";
  if ((d.rows == 0) != (d.cols == 0)) return "shape with one zero dimension";
  if (d.rows != 0 && (d.cols > d.elements / d.rows || d.rows * d.cols != d.elements)) {
    return "shape " + std::to_string(d.rows) + "x" + std::to_string(d.cols) + " does not hold " +
           std::to_string(d.elements) + " elements";
  }
  if (!(d.data_volume >= 0.0)) return "negative or NaN data volume";
  return "";
}

/// Appends fields in host byte order.
class Writer {
 public:
  Writer() { bytes_.reserve(kMaxPacketBytes); }
  template <typename T>
  void put(T value) {
    append(&value, sizeof(T));
  }
  /// A u16 length and the bytes, cut to `limit`.
  void put_text(std::string_view text, size_t limit) {
    const size_t n = text.size() < limit ? text.size() : limit;
    put(static_cast<uint16_t>(n));
    append(text.data(), n);
  }
  std::vector<std::byte> take() { return std::move(bytes_); }

 private:
  void append(const void* data, size_t n) {
    const size_t at = bytes_.size();
    bytes_.resize(at + n);
    std::memcpy(bytes_.data() + at, data, n);
  }

  std::vector<std::byte> bytes_;
};

/// Reads fields with bounds checks: every getter returns false once the input ran short.
class Reader {
 public:
  explicit Reader(std::span<const std::byte> bytes) : bytes_(bytes) {}
  template <typename T>
  bool get(T& value) {
    if (bytes_.size() - offset_ < sizeof(T)) return false;
    std::memcpy(&value, bytes_.data() + offset_, sizeof(T));
    offset_ += sizeof(T);
    return true;
  }
  bool get_text(std::string& text, size_t limit) {
    uint16_t n = 0;
    if (!get(n) || n > limit || bytes_.size() - offset_ < n) return false;
    text.assign(reinterpret_cast<const char*>(bytes_.data() + offset_), n);
    offset_ += n;
    return true;
  }
  bool at_end() const { return offset_ == bytes_.size(); }

 private:
  std::span<const std::byte> bytes_;
  size_t offset_ = 0;
};

inline void write_body(Writer& w, const Hello& m) { w.put(m.local_rank); }
inline void write_body(Writer& w, const HelloOk& m) {
  w.put(m.node_rank);
  w.put(m.nodes);
  w.put(m.local_workers);
  w.put(m.world_size);
  if (m.collective_timeout_ms) w.put(*m.collective_timeout_ms);
}
inline void write_body(Writer& w, const Declare& m) {
  w.put_text(m.name, kMaxNameBytes);
  w.put(m.elements);
  w.put(m.dtype);
  w.put(m.rows);
  w.put(m.cols);
  w.put(m.data_volume);
}
inline void write_body(Writer& w, const DeclareCuda& m) {
  write_body(w, m.tensor);
  w.put(m.buffer.device_uuid);
  w.put(m.buffer.memory_handle);
  w.put(m.buffer.offset);
  w.put(m.buffer.ready_event_handle);
}
template <MessageType Type>
void write_body(Writer& w, const KeyMessage<Type>& m) {
  w.put(m.key);
}
inline void write_body(Writer& w, const AllreduceDone& m) {
  w.put(m.status);
  w.put_text(m.message, kMaxTextBytes);
  w.put(m.step);
  w.put(m.raw_bytes);
  w.put(m.wire_bytes);
  w.put(m.encode_seconds);
  w.put(m.communicate_seconds);
  w.put(m.decode_seconds);
  if (m.codec) w.put(*m.codec);
}
inline void write_body(Writer& w, const Error& m) {
  w.put(m.status);
  w.put_text(m.message, kMaxTextBytes);
}

inline bool read_body(Reader& r, Hello& m) { return r.get(m.local_rank); }
inline bool read_body(Reader& r, HelloOk& m) {
  if (!r.get(m.node_rank) || !r.get(m.nodes) || !r.get(m.local_workers) || !r.get(m.world_size)) {
    return false;
  }
  if (r.at_end()) return true;
  return r.get(m.collective_timeout_ms.emplace());
}
inline bool read_body(Reader& r, Declare& m) {
  return r.get_text(m.name, kMaxNameBytes) && r.get(m.elements) && r.get(m.dtype) &&
         r.get(m.rows) && r.get(m.cols) && r.get(m.data_volume);
}
inline bool read_body(Reader& r, DeclareCuda& m) {
  return read_body(r, m.tensor) && r.get(m.buffer.device_uuid) && r.get(m.buffer.memory_handle) &&
         r.get(m.buffer.offset) && r.get(m.buffer.ready_event_handle);
}
template <MessageType Type>
bool read_body(Reader& r, KeyMessage<Type>& m) {
  return r.get(m.key);
}
inline bool read_body(Reader& r, AllreduceDone& m) {
  if (!r.get(m.status) || !r.get_text(m.message, kMaxTextBytes) || !r.get(m.step) ||
      !r.get(m.raw_bytes) || !r.get(m.wire_bytes) || !r.get(m.encode_seconds) ||
      !r.get(m.communicate_seconds) || !r.get(m.decode_seconds)) {
    return false;
  }
  if (r.at_end()) return true;
  return r.get(m.codec.emplace());
}
inline bool read_body(Reader& r, Error& m) {
  return r.get(m.status) && r.get_text(m.message, kMaxTextBytes);
}

/// One message, header included, ready for send; `version` is the reader's (the gateway answers
/// a client in the client's version).
template <typename Message>
std::vector<std::byte> encode(uint64_t request_id, const Message& message,
                              uint16_t version = kVersion) {
  Writer w;
  w.put(kMagic);
  w.put(version);
  w.put(static_cast<uint16_t>(Message::kType));
  w.put(request_id);
  write_body(w, message);
  return w.take();
}

/// The header of a received packet; nullopt if it is too short or its magic is wrong. The
/// version and type are returned as read, for the caller to check.
inline std::optional<Header> decode_header(std::span<const std::byte> packet) {
  Reader r(packet);
  Header h;
  uint16_t type = 0;
  if (!r.get(h.magic) || !r.get(h.version) || !r.get(type) || !r.get(h.request_id)) {
    return std::nullopt;
  }
  if (h.magic != kMagic) return std::nullopt;
  h.type = static_cast<MessageType>(type);
  return h;
}

/// The body of a packet whose header said Message::kType; nullopt if its length is wrong.
template <typename Message>
std::optional<Message> decode_body(std::span<const std::byte> packet) {
  if (packet.size() < kHeaderBytes) return std::nullopt;
  Reader r(packet.subspan(kHeaderBytes));
  Message m;
  if (!read_body(r, m) || !r.at_end()) return std::nullopt;
  return m;
}

}  // namespace gradgate::ingress_protocol
