#include "prometheus_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <thread>

#include "common/http/client.h"

namespace gradgate::gateway::testing {
namespace {

using std::chrono::milliseconds;

// A TCP port that was free a moment ago (Prometheus cannot report a port 0 it bound).
uint16_t free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address));
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  ::close(fd);
  return ntohs(address.sin_port);
}

}  // namespace

std::string url_encode(const std::string& text) {
  std::string encoded;
  for (const char c : text) {
    if (std::isalnum(static_cast<unsigned char>(c)) || c == '_') {
      encoded += c;
    } else {
      char hex[4];
      std::snprintf(hex, sizeof(hex), "%%%02X", static_cast<unsigned char>(c));
      encoded += hex;
    }
  }
  return encoded;
}

PrometheusServer::PrometheusServer(const std::string& dir, const std::vector<uint16_t>& targets,
                                   const std::string& rules_file) {
  port_ = free_port();
  std::ofstream config(dir + "/prometheus.yml");
  config << "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n";
  if (!rules_file.empty()) config << "rule_files: [\"" << rules_file << "\"]\n";
  config << "scrape_configs:\n  - job_name: gradgate\n    static_configs:\n      - targets: [";
  for (size_t i = 0; i < targets.size(); ++i) {
    config << (i ? ", " : "") << "\"127.0.0.1:" << targets[i] << "\"";
  }
  config << "]\n";
  config.close();
  process_ = std::make_unique<bench::ChildProcess>(
      kBinary,
      std::vector<std::string>{"--config.file=" + dir + "/prometheus.yml",
                               "--storage.tsdb.path=" + dir + "/tsdb",
                               "--web.listen-address=127.0.0.1:" + std::to_string(port_)},
      dir + "/prometheus.log");
}

PrometheusServer::~PrometheusServer() {
  process_->signal(SIGTERM);
  process_->wait_exit(milliseconds(10000));
}

Result<nlohmann::json> PrometheusServer::api(const std::string& path) const {
  http::ClientOptions options;
  options.port = port_;
  auto answer = http::send_request(options, http::verb::get, path);
  if (!answer.ok()) return answer.status();
  auto body = nlohmann::json::parse(answer->body, nullptr, false);
  if (body.is_discarded()) {
    return Status(ErrorCode::kUnavailable,
                  "GET " + path + " answered " + std::to_string(answer->status) + " without JSON");
  }
  return body;
}

Result<nlohmann::json> PrometheusServer::query_answer(const std::string& promql) const {
  return api("/api/v1/query?query=" + url_encode(promql));
}

std::optional<double> PrometheusServer::query(const std::string& promql) const {
  const auto body = query_answer(promql);
  if (!body.ok() || body->value("status", "") != "success") return std::nullopt;
  const auto& result = (*body)["data"]["result"];
  if (!result.is_array() || result.size() != 1) return std::nullopt;
  return std::stod(result[0]["value"][1].get<std::string>());
}

std::optional<double> PrometheusServer::wait_for(const std::string& promql,
                                                 const std::function<bool(double)>& accept) const {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < deadline) {
    if (auto value = query(promql); value && accept(*value)) return value;
    std::this_thread::sleep_for(milliseconds(200));  // Prometheus scrapes on its own clock
  }
  return std::nullopt;
}

}  // namespace gradgate::gateway::testing
