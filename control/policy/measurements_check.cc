#include "control/policy/measurements_check.h"

#include <cmath>
#include <set>
#include <string>

#include "gradgate/kernels/frame.h"

namespace gradgate::control {
namespace {

Status invalid(const std::string& field, const std::string& what) {
  return Status(ErrorCode::kInvalidArgument, "measurements." + field + ": " + what);
}

std::string indexed(const char* list, size_t i, const char* field) {
  return std::string(list) + "[" + std::to_string(i) + "]." + field;
}

Status check_rate(const std::string& field, double value) {
  if (std::isfinite(value) && value > 0.0) return {};
  return invalid(field, "must be a positive finite number, got " + std::to_string(value));
}

Status check_node(const std::string& field, uint32_t node, uint32_t nodes) {
  if (node < nodes) return {};
  return invalid(field, "node " + std::to_string(node) + " is not in a job of " +
                            std::to_string(nodes) + " nodes");
}

Status check_node_samples(const Measurements& m) {
  std::set<uint32_t> seen;
  for (size_t i = 0; i < m.node_samples.size(); ++i) {
    const NodeSample& sample = m.node_samples[i];
    GRADGATE_RETURN_IF_ERROR(check_node(indexed("node_samples", i, "node"), sample.node, m.nodes));
    if (!seen.insert(sample.node).second) {
      return invalid(indexed("node_samples", i, "node"), "a second sample of the same node");
    }
    GRADGATE_RETURN_IF_ERROR(
        check_rate(indexed("node_samples", i, "data_volume"), sample.data_volume));
  }
  return {};
}

Status check_links(const Measurements& m) {
  for (size_t i = 0; i < m.links.size(); ++i) {
    const LinkSample& link = m.links[i];
    GRADGATE_RETURN_IF_ERROR(check_node(indexed("links", i, "from_node"), link.from_node, m.nodes));
    GRADGATE_RETURN_IF_ERROR(check_node(indexed("links", i, "to_node"), link.to_node, m.nodes));
    if (link.from_node == link.to_node) {
      return invalid(indexed("links", i, "to_node"), "a link needs two different nodes");
    }
    GRADGATE_RETURN_IF_ERROR(
        check_rate(indexed("links", i, "goodput_bytes_per_second"), link.goodput_bytes_per_second));
    if (!(std::isfinite(link.rtt_seconds) && link.rtt_seconds >= 0.0)) {
      return invalid(indexed("links", i, "rtt_seconds"), "must be a finite number >= 0");
    }
  }
  return {};
}

Status check_tensors(const Measurements& m) {
  std::set<std::string> seen;
  for (size_t i = 0; i < m.tensors.size(); ++i) {
    const TensorSample& tensor = m.tensors[i];
    if (tensor.name.empty()) return invalid(indexed("tensors", i, "name"), "must not be empty");
    if (!seen.insert(tensor.name).second) {
      return invalid(indexed("tensors", i, "name"), "a second tensor named '" + tensor.name + "'");
    }
    if (tensor.elements == 0 || tensor.elements > kernels::kMaxFrameElements) {
      return invalid(indexed("tensors", i, "elements"), "must be in 1..2^32-1");
    }
    const bool shaped = tensor.rows != 0 || tensor.cols != 0;
    if (shaped && (tensor.cols == 0 || tensor.elements % tensor.cols != 0 ||
                   tensor.rows != tensor.elements / tensor.cols)) {
      return invalid(indexed("tensors", i, "rows"), "rows * cols must equal elements");
    }
  }
  return {};
}

Status check_codec_speeds(const Measurements& m) {
  std::set<std::string> seen;
  for (size_t i = 0; i < m.codec_speeds.size(); ++i) {
    const CodecSpeed& speed = m.codec_speeds[i];
    if (!codec_from_name(speed.codec).ok()) {
      return invalid(indexed("codec_speeds", i, "codec"), "unknown codec '" + speed.codec + "'");
    }
    if (!seen.insert(speed.codec).second) {
      return invalid(indexed("codec_speeds", i, "codec"),
                     "a second sample of '" + speed.codec + "'");
    }
    GRADGATE_RETURN_IF_ERROR(check_rate(indexed("codec_speeds", i, "encode_bytes_per_second"),
                                        speed.encode_bytes_per_second));
    GRADGATE_RETURN_IF_ERROR(check_rate(indexed("codec_speeds", i, "decode_bytes_per_second"),
                                        speed.decode_bytes_per_second));
  }
  return {};
}

}  // namespace

std::string policy_size_error(uint64_t nodes, uint64_t tensors) {
  if (nodes * tensors <= kMaxPolicyCodecs) return {};
  return std::to_string(tensors) + " tensors on " + std::to_string(nodes) + " nodes exceed the " +
         std::to_string(kMaxPolicyCodecs) + " codecs (nodes x tensors) a job's policy may hold";
}

Status check_measurements(const Measurements& measurements) {
  if (measurements.nodes == 0) return invalid("nodes", "a job has at least one node");
  if (std::string size = policy_size_error(measurements.nodes, measurements.tensors.size());
      !size.empty()) {
    return invalid("tensors", size);
  }
  GRADGATE_RETURN_IF_ERROR(check_node_samples(measurements));
  GRADGATE_RETURN_IF_ERROR(check_links(measurements));
  GRADGATE_RETURN_IF_ERROR(check_tensors(measurements));
  return check_codec_speeds(measurements);
}

}  // namespace gradgate::control
