#include "bench_workers.h"

#include <algorithm>
#include <random>
#include <stdexcept>

namespace gradgate::bench {

void check(gg_status status, const char* what) {
  if (status != GG_OK) {
    throw std::runtime_error(std::string(what) + ": " + gg_status_name(status) + ": " +
                             gg_last_error());
  }
}

double median_seconds(const std::function<double()>& run, int warmup, double min_seconds) {
  for (int i = 0; i < warmup; ++i) run();
  std::vector<double> times;
  double total = 0.0;
  while (times.size() < 50 && (times.size() < 3 || total < min_seconds)) {
    times.push_back(run());
    total += times.back();
  }
  std::nth_element(times.begin(), times.begin() + times.size() / 2, times.end());
  return times[times.size() / 2];
}

std::vector<float> random_gradient(size_t elements, uint32_t seed) {
  std::mt19937 random(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> values(elements);
  for (auto& value : values) value = normal(random);
  return values;
}

Workers::Workers(const LocalJob& job) {
  try {
    for (uint32_t rank = 0; rank < job.options().nodes; ++rank) {
      for (uint32_t local_rank = 0; local_rank < job.options().local_workers; ++local_rank) {
        gg_client* client = nullptr;
        check(gg_connect(job.socket(rank).c_str(), local_rank, &client), "gg_connect");
        clients_.push_back(client);
      }
    }
  } catch (...) {
    for (gg_client* client : clients_) gg_close(client);
    throw;
  }
}

Workers::~Workers() {
  for (gg_client* client : clients_) gg_close(client);
}

std::vector<gg_tensor*> Workers::declare(const std::string& name, size_t elements) {
  std::vector<gg_tensor*> tensors;
  for (gg_client* client : clients_) {
    gg_tensor* tensor = nullptr;
    check(gg_declare(client, name.c_str(), elements, GG_FP32, 0, 0, 0.0, &tensor), "gg_declare");
    tensors.push_back(tensor);
  }
  return tensors;
}

}  // namespace gradgate::bench
