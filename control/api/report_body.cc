#include "control/api/report_body.h"

#include <cstdint>
#include <limits>
#include <set>
#include <string>

#include "common/config/value_text.h"
#include "control/policy/measurements_check.h"
#include "gradgate/base/job_limits.h"
#include "gradgate/kernels/frame.h"

namespace gradgate::control {
namespace {

using http::IntegerRange;
using http::JsonObject;
using http::NumberRange;

constexpr int64_t kMaxLocalRank = std::numeric_limits<uint32_t>::max();
constexpr int64_t kMaxElements = std::numeric_limits<uint32_t>::max();
constexpr NumberRange kNonNegative{.min = 0};
// Rates and data volumes are summed over a job's nodes and workers: bounded far above any real
// value (1e14 bytes per second, 1e15 samples), so that no sum overflows to infinity.
constexpr NumberRange kRate{.min = 0, .exclusive_min = true, .max = 1e14};
constexpr NumberRange kVolume{.min = 0, .max = 1e15};
// Steps are compared and added to (lead steps): bounded to what a double holds exactly.
constexpr int64_t kMaxStep = int64_t{1} << 53;

void read_links(const JsonObject& root, NodeReport& report) {
  std::set<uint32_t> peers;
  for (const JsonObject& link :
       root.optional_objects("links").value_or(std::vector<JsonObject>{})) {
    const auto peer = link.integer("peer", {.min = 0, .max = kMaxJobNodes});
    const auto goodput = link.number("goodput_bytes_per_second", kRate);
    const auto rtt = link.number("rtt_seconds", kNonNegative);
    const auto age = link.number("age_seconds", kNonNegative);
    if (!peer || !goodput || !rtt || !age) continue;
    const auto index = static_cast<uint32_t>(*peer);
    if (index >= report.nodes) {
      link.reject("peer", "must be below /nodes (" + std::to_string(report.nodes) + ")");
    } else if (index == report.node) {
      link.reject("peer", "must be another node than /node");
    } else if (!peers.insert(index).second) {
      link.reject("peer", "appears twice");
    }
    report.links.push_back({index, *goodput, *rtt, *age});
  }
}

void read_workers(const JsonObject& root, NodeReport& report) {
  for (const JsonObject& worker :
       root.optional_objects("workers").value_or(std::vector<JsonObject>{})) {
    const auto local_rank = worker.integer("local_rank", {.min = 0, .max = kMaxLocalRank});
    const auto volume = worker.number("data_volume", kVolume);
    if (local_rank && volume) {
      report.workers.push_back({static_cast<uint32_t>(*local_rank), *volume});
    }
  }
}

void read_tensors(const JsonObject& root, NodeReport& report) {
  std::set<std::string> names;
  for (const JsonObject& tensor :
       root.optional_objects("tensors").value_or(std::vector<JsonObject>{})) {
    const auto name = tensor.string("name");
    const auto elements = tensor.integer("elements", {.min = 1, .max = kMaxElements});
    const auto rows = tensor.optional_integer("rows", {.min = 0, .max = kMaxElements});
    const auto cols = tensor.optional_integer("cols", {.min = 0, .max = kMaxElements});
    const auto dtype = tensor.optional_string("dtype", {"fp32", "fp16", "bf16"});
    if (!name || !elements) continue;
    if (name->empty()) tensor.reject("name", "must not be empty");
    if (!names.insert(*name).second) tensor.reject("name", "appears twice");
    const auto shape_rows = static_cast<uint64_t>(rows.value_or(0));
    const auto shape_cols = static_cast<uint64_t>(cols.value_or(0));
    // Both below 2^32: their product fits in 64 bits.
    if ((shape_rows != 0 || shape_cols != 0) &&
        shape_rows * shape_cols != static_cast<uint64_t>(*elements)) {
      tensor.reject("rows", "rows * cols must equal elements (or both be 0)");
    }
    const Dtype type = dtype_from_name(dtype.value_or("fp32")).value_or(Dtype::kFp32);
    report.tensors.push_back(
        {*name, static_cast<uint64_t>(*elements), shape_rows, shape_cols, type});
  }
}

void read_codec_speeds(const JsonObject& root, NodeReport& report) {
  std::set<std::string> codecs;
  for (const JsonObject& speed :
       root.optional_objects("codec_speeds").value_or(std::vector<JsonObject>{})) {
    const auto codec = speed.string("codec");
    const auto encode = speed.number("encode_bytes_per_second", kRate);
    const auto decode = speed.number("decode_bytes_per_second", kRate);
    if (!codec || !encode || !decode) continue;
    if (!codec_from_name(*codec).ok()) {
      speed.reject("codec",
                   "is not a codec name (none, fp16, bf16, qsgd, sign, topk, randomk, "
                   "powersgd)");
    }
    if (!codecs.insert(*codec).second) speed.reject("codec", "appears twice");
    report.codec_speeds.push_back({*codec, *encode, *decode});
  }
}

void read_timings(const JsonObject& root, NodeReport& report) {
  const auto timings = root.optional_object("timings");
  if (!timings) return;
  report.timings.steps =
      static_cast<uint64_t>(timings->optional_integer("steps", {.min = 0}).value_or(0));
  report.timings.compute_seconds =
      timings->optional_number("compute_seconds", kNonNegative).value_or(0);
  report.timings.encode_seconds =
      timings->optional_number("encode_seconds", kNonNegative).value_or(0);
  report.timings.communicate_seconds =
      timings->optional_number("communicate_seconds", kNonNegative).value_or(0);
  report.timings.decode_seconds =
      timings->optional_number("decode_seconds", kNonNegative).value_or(0);
}

}  // namespace

std::optional<http::BodyError> read_report(std::string_view body, NodeReport& report) {
  http::JsonBody json(body);
  const JsonObject root = json.root();
  const auto job_id = root.unsigned_integer("job_id");
  const auto nodes = root.integer("nodes", {.min = 1, .max = kMaxJobNodes});
  const auto node = root.integer("node", {.min = 0, .max = kMaxJobNodes});
  const auto address = root.string("address");
  const auto admin = root.optional_string("admin");
  const auto step = root.integer("step", {.min = 0, .max = kMaxStep});
  // Versions are 32-bit on the gateways.
  const auto policy_version = root.integer("policy_version", {.min = 0, .max = UINT32_MAX});
  const auto received_policy_version =
      root.optional_integer("received_policy_version", {.min = 0, .max = UINT32_MAX});
  const auto fail_static = root.optional_boolean("fail_static");
  if (job_id && nodes && node && address && step && policy_version) {
    report.job_id = *job_id;
    report.nodes = static_cast<uint32_t>(*nodes);
    report.node = static_cast<uint32_t>(*node);
    if (report.node >= report.nodes) root.reject("node", "must be below /nodes");
    report.address = *address;
    // The other gateways dial it (membership by the controller): refused here, not skipped there.
    if (auto endpoint = config::parse_endpoint(*address); !endpoint.ok()) {
      root.reject("address", endpoint.status().message());
    }
    report.admin = admin.value_or("");
    report.step = static_cast<uint64_t>(*step);
    report.policy_version = static_cast<uint64_t>(*policy_version);
    report.received_policy_version = static_cast<uint64_t>(received_policy_version.value_or(0));
    report.fail_static = fail_static.value_or(false);
  }
  read_links(root, report);
  read_workers(root, report);
  read_tensors(root, report);
  // A decision holds a codec per node and tensor: bounded, so that one report cannot make the
  // controller build billions of them (the policy checks the job's measurements again).
  if (std::string size = policy_size_error(report.nodes, report.tensors.size()); !size.empty()) {
    root.reject("tensors", std::move(size));
  }
  read_codec_speeds(root, report);
  read_timings(root, report);
  return json.finish();
}

}  // namespace gradgate::control
