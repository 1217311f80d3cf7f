#include "gloo_reference.h"

#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>

#include "child_process.h"
#include "temp_dir.h"

namespace gradgate::bench {
namespace {

// The last non-empty line of `text` (a failed script's error).
std::string last_line(const std::string& text) {
  std::istringstream lines(text);
  std::string last;
  for (std::string line; std::getline(lines, line);) {
    if (!line.empty()) last = line;
  }
  return last;
}

GlooTiming unavailable(std::string why) { return {0.0, std::move(why)}; }

}  // namespace

GlooTiming time_gloo_allreduce(const GlooReferenceOptions& options, uint32_t ranks,
                               uint64_t bytes) {
  if (options.python.empty() || options.script.empty()) {
    return unavailable("no Python or no script given");
  }
  if (::access(options.python.c_str(), X_OK) != 0) {
    return unavailable("no Python at " + options.python);
  }
  if (!std::filesystem::exists(options.script)) {
    return unavailable("no script at " + options.script);
  }
  const TempDir dir("gradgate-gloo");  // the script's log and result
  const std::string result_path = dir.path() + "/result.json";
  ChildProcess script(options.python,
                      {options.script, "--ranks", std::to_string(ranks), "--bytes",
                       std::to_string(bytes), "--warmup", std::to_string(options.warmup),
                       "--min-seconds", std::to_string(options.min_seconds), "--timeout",
                       std::to_string(options.limit.count()), "--result", result_path},
                      dir.path() + "/log");
  const int code = script.wait_exit(options.limit);
  if (code == -1) {
    return unavailable("gloo's all-reduce did not finish within " +
                       std::to_string(options.limit.count()) + " s");
  }
  std::ifstream in(result_path);
  const nlohmann::json result = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (result.is_discarded()) {
    return unavailable(options.script + " exited with code " + std::to_string(code) + ": " +
                       last_line(script.log()));
  }
  if (result.contains("unavailable")) return unavailable(result.at("unavailable"));
  if (!result.value("checked", false)) {
    throw std::runtime_error("gloo's all-reduce of " + std::to_string(bytes) + " bytes between " +
                             std::to_string(ranks) + " processes gave wrong sums");
  }
  return {result.at("seconds").get<double>(), ""};
}

}  // namespace gradgate::bench
