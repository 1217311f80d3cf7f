// The controller's configuration: what `gradgate control -c FILE` reads (config/control.yaml is
// the commented example, docs/control.md the reference). Loading checks every key and reports
// every problem with its key path ("policy.ladder[2]: ..."), so that a bad file fails at start.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "control/policy/policy.h"
#include "gradgate/base/status.h"

namespace gradgate::control {

struct ControlConfig {
  // server: the REST API.
  std::string listen_host = "127.0.0.1";
  uint16_t listen_port = 9400;  // 0: the system picks one
  uint64_t max_body_bytes = uint64_t{1} << 20;
  std::chrono::milliseconds request_timeout{10000};
  // At most this many connections are served at once; more are answered 503 and closed. A
  // gateway holds up to two (its long poll and a report).
  uint32_t max_connections = 4096;

  // auth: the bearer token of mutating calls; the file wins; neither set: no authentication.
  std::string token_file;
  std::string token_env = "GRADGATE_API_TOKEN";

  // nodes: how often gateways report, and when a silent one counts as stale.
  std::chrono::milliseconds report_interval{1000};
  std::chrono::milliseconds stale_after{5000};
  // A job none of whose gateways reported for this long is forgotten (0: never).
  std::chrono::milliseconds forget_after{3600000};
  // At most this many jobs are kept; reports and rank claims of a further one are refused (503).
  uint32_t max_jobs = 1024;

  // policy: the settings of every job's policy, and how new versions are scheduled.
  PolicySettings policy = {.name = "static", .default_codec = "topk:density=0.01"};
  double lead_seconds = 1.0;                     // a new policy takes effect this far ahead ...
  uint64_t min_lead_steps = 4;                   // ... and at least this many steps ahead
  std::chrono::milliseconds min_interval{1000};  // at most one new version per job per interval
  // Where the settings set through the API are kept (settings_file.h); "": in memory only. When
  // the file exists, its settings replace `policy` at start.
  std::string settings_file;

  // log
  std::string log_level = "info";   // trace, debug, info, warn, error
  std::string log_format = "text";  // text, json
};

/// Reads and checks a YAML file, then applies the environment variables GRADGATE_<SECTION>_<KEY>
/// (GRADGATE_NODES_STALE_AFTER_MS) and then `overrides` ("section.key=value", from --set).
/// Override values are taken as written for single-value keys; the list keys (policy.ladder,
/// policy.rules) take YAML flow text ("[none, fp16]"). kNotFound when the file does not exist,
/// kInvalidArgument with one line per problem otherwise.
Result<ControlConfig> load_control_config(const std::string& path,
                                          const std::vector<std::string>& overrides = {});

/// The same from YAML text (`origin` names it in messages) and an explicit environment.
Result<ControlConfig> parse_control_config(const std::string& yaml, const std::string& origin,
                                           const std::map<std::string, std::string>& env,
                                           const std::vector<std::string>& overrides = {});

}  // namespace gradgate::control
