// The JSON bodies of the controller's GET resources (docs/control.md, docs/openapi.yaml), made
// from a consistent view of its state.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>

#include "control/decider/policy_version.h"
#include "control/service/controller.h"

namespace gradgate::control {

/// GET /v1/jobs: every job with its size, registered and stale nodes, step and version.
nlohmann::json jobs_json(const ControllerView& view);
/// GET /v1/jobs/{id}: the job's membership; nullopt for an unknown job.
std::optional<nlohmann::json> job_json(const ControllerView& view, uint64_t job_id);
/// GET /v1/nodes: the nodes of one job, or of every job.
nlohmann::json nodes_json(const ControllerView& view, std::optional<uint64_t> job_id);
/// GET /v1/links: the links the nodes measured (from peer to reporting node).
nlohmann::json links_json(const ControllerView& view, std::optional<uint64_t> job_id);
/// GET /v1/policy?job_id=: the job's latest version (version 0 and no tensors before the first),
/// with every node's codec of every tensor. With `node` (?node=), the view of that gateway: each
/// tensor's codec on that node only, so that a job's gateways together fetch each codec once
/// rather than each the whole nodes x tensors matrix.
nlohmann::json policy_json(uint64_t job_id, const PolicyVersion& version,
                           std::optional<uint32_t> node = std::nullopt);
/// GET /v1/budget?job_id=: the budget and each node's data volume and top-k keep fraction.
nlohmann::json budget_json(const ControllerView& view, uint64_t job_id);

}  // namespace gradgate::control
