// StepThreads: every task runs; tasks that wait for each other each get a thread (a fixed pool
// would deadlock); tasks one after the other reuse one thread; the destructor joins.
#include "gateway/core/step_threads.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <set>

namespace gradgate::gateway {
namespace {

TEST(StepThreadsTest, TasksThatWaitForEachOtherEachGetAThread) {
  constexpr int kTasks = 6;
  StepThreads threads;
  std::mutex mutex;
  std::condition_variable all_started;
  int started = 0;
  std::vector<std::promise<bool>> finished(kTasks);
  for (int i = 0; i < kTasks; ++i) {
    threads.run([&, i] {
      std::unique_lock lock(mutex);
      ++started;
      all_started.notify_all();
      // Bounded: a missing thread shows as a task that never saw the others start.
      const bool met =
          all_started.wait_for(lock, std::chrono::seconds(10), [&] { return started == kTasks; });
      finished[i].set_value(met);
    });
  }
  for (auto& task : finished) EXPECT_TRUE(task.get_future().get());
  EXPECT_EQ(threads.threads(), static_cast<size_t>(kTasks));
}

TEST(StepThreadsTest, TasksOneAfterTheOtherReuseTheirThreads) {
  constexpr size_t kTasks = 100;
  StepThreads threads;
  std::set<std::thread::id> ran_on;
  for (size_t i = 0; i < kTasks; ++i) {
    std::promise<std::thread::id> done;
    threads.run([&done] { done.set_value(std::this_thread::get_id()); });
    ran_on.insert(done.get_future().get());
  }
  // A thread that has finished its task may not be back at its wait when the next task comes (a
  // busy machine, a sanitizer); then one more is made (and may find its task taken by the one
  // coming back). Usually one or two threads, under heavy load some more; never one per task.
  EXPECT_LE(ran_on.size(), kTasks / 2);
  EXPECT_LE(threads.threads(), kTasks / 2);
}

TEST(StepThreadsTest, DestructorRunsWhatIsQueuedAndJoins) {
  std::atomic<int> ran{0};
  {
    StepThreads threads;
    for (int i = 0; i < 50; ++i) threads.run([&ran] { ++ran; });
  }
  EXPECT_EQ(ran.load(), 50);
}

}  // namespace
}  // namespace gradgate::gateway
