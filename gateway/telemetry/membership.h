// Membership from the controller (job.size instead of job.nodes): a gateway registers its
// transport address with the controller and waits until every gateway of the job has, then dials
// the addresses the controller lists (GET /v1/jobs/{id}). With `job.node_rank: auto` it first
// claims its rank from the controller by name. A gateway that restarts registers its new address,
// and the others, listing the job again while they miss it, dial it there. See docs/control.md.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "common/http/client.h"
#include "common/net/endpoint.h"
#include "gradgate/base/status.h"

namespace gradgate::gateway {

/// Waits up to the given time between attempts; false when the daemon is asked to stop.
using Pause = std::function<bool(std::chrono::milliseconds)>;

/// What joining a job through the controller needs to know of this gateway and its job.
struct MembershipOptions {
  http::ClientOptions controller;  // control.url, with its token and request timeout
  uint64_t job_id = 0;
  uint32_t size = 0;        // job.size: the number of the job's gateways
  uint32_t node_rank = 0;   // this gateway's rank (once it has one)
  std::string node_name;    // the name a rank is claimed under (job.node_name or the host name)
  std::string listen_host;  // where peers reach this gateway's transport (transport.listen)
  std::chrono::milliseconds retry_interval{1000};  // between attempts (control.report_interval_ms)
  std::chrono::milliseconds join_timeout{120000};  // control.join_timeout_ms
};

/// This gateway's rank when `job.node_rank` is auto: claimed from the controller under
/// `node_name` (POST /v1/jobs/{id}/ranks); the same name gets the same rank back, so a restarted
/// gateway keeps its place. Retried while the controller is unreachable or every rank is held by
/// a live gateway; kTimeout after join_timeout, kAborted when stopped.
Result<uint32_t> claim_rank_through_controller(const MembershipOptions& options,
                                               const Pause& pause);

/// Every gateway's address by rank, once all `size` registered with the controller.
/// `listen_port` is this gateway's bound transport port; `pause(d)` waits between attempts and
/// returns false when the daemon is asked to stop. kTimeout after join_timeout, kAborted when
/// stopped.
Result<std::vector<net::Endpoint>> join_through_controller(const MembershipOptions& options,
                                                           uint16_t listen_port,
                                                           const Pause& pause);

/// The addresses by rank of the job's gateways that are registered and live now (an empty host
/// for the others): one GET /v1/jobs/{id}.
Result<std::vector<net::Endpoint>> live_members_through_controller(
    const MembershipOptions& options);

}  // namespace gradgate::gateway
