#include "job.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>
#include <thread>

#include "common/http/client.h"

namespace gradgate::gateway::testing {

bench::LocalJobOptions job_options(uint32_t nodes, uint32_t local_workers, std::string codec,
                                   std::string collective, uint32_t timeout_ms) {
  bench::LocalJobOptions options;
  options.program = GRADGATE_BINARY;
  options.nodes = nodes;
  options.local_workers = local_workers;
  options.codec = std::move(codec);
  options.collective = std::move(collective);
  options.timeout_ms = timeout_ms;
  return options;
}

std::unique_ptr<ChildProcess> start_worker(const bench::LocalJob& job, uint32_t rank,
                                           uint32_t local_rank,
                                           const std::vector<TensorArg>& tensors, int steps,
                                           uint64_t seed, const std::string& output,
                                           const std::vector<std::string>& extra) {
  const bool keeps_results = std::find(extra.begin(), extra.end(), "--out") == extra.end();
  std::vector<std::string> args = {
      "--socket", job.socket(rank),      "--local-rank", std::to_string(local_rank),
      "--steps",  std::to_string(steps), "--seed",       std::to_string(seed)};
  if (keeps_results) args.insert(args.end(), {"--out", output});
  if (std::find(extra.begin(), extra.end(), "--timeout-ms") == extra.end()) {
    args.insert(args.end(), {"--timeout-ms", "60000"});
  }
  for (const auto& tensor : tensors) {
    args.push_back("--tensor");
    args.push_back(tensor.text());
  }
  args.insert(args.end(), extra.begin(), extra.end());
  return std::make_unique<ChildProcess>(GRADGATE_TEST_WORKER, args, output + ".log");
}

bool wait_for_log(const ChildProcess& process, const std::string& text,
                  std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (process.log().find(text) != std::string::npos) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));  // polling a file, bounded
  }
  return false;
}

std::vector<float> read_floats(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<float> values(bytes.size() / sizeof(float));
  std::memcpy(values.data(), bytes.data(), values.size() * sizeof(float));
  return values;
}

double sample(const std::string& exposition, const std::string& series) {
  std::istringstream lines(exposition);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind(series + " ", 0) == 0) return std::stod(line.substr(series.size() + 1));
  }
  return -1.0;
}

std::string get_body(uint16_t port, const std::string& target) {
  http::ClientOptions options;
  options.port = port;
  auto answer = http::send_request(options, http::verb::get, target);
  return answer.ok() && answer->status == 200 ? answer->body : "";
}

}  // namespace gradgate::gateway::testing
