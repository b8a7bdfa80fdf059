#include "runtime/spawner.hpp"

#include <fmt/format.h>
#include <spawn.h>
#include <unistd.h>

#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <future>
#include <mutex>
#include <thread>

#include "sky/errors.hpp"

namespace sky::detail {

namespace {

int spawn_now(const SpawnRequest& r) {
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, r.child_fd, 3);
    if (r.output_fd >= 0) {
        posix_spawn_file_actions_adddup2(&fa, r.output_fd, 1);
        posix_spawn_file_actions_adddup2(&fa, r.output_fd, 2);
    }
    // Nothing else of the client's: a descriptor the program opened without O_CLOEXEC (a
    // socket, a file) must not stay open for as long as a worker lives (a peer would never see
    // the end of a connection the program closed).
    posix_spawn_file_actions_addclosefrom_np(&fa, 4);
    if (!r.workdir.empty()) posix_spawn_file_actions_addchdir_np(&fa, r.workdir.c_str());
    std::vector<char*> argv, envp;
    for (auto& a : r.argv) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    for (auto& e : r.env) envp.push_back(const_cast<char*>(e.c_str()));
    envp.push_back(nullptr);
    pid_t pid = 0;
    int rc = posix_spawn(&pid, r.path.c_str(), &fa, nullptr, argv.data(), envp.data());
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0)
        throw Error(fmt::format("cannot start worker process {}: {}", r.path, std::strerror(rc)));
    return pid;
}

class Spawner {
public:
    Spawner() : thread_([this] { run(); }) { thread_.detach(); }
    int spawn(const SpawnRequest& r) {
        std::packaged_task<int()> task([&r] { return spawn_now(r); });
        auto fut = task.get_future();
        {
            std::lock_guard lk(m_);
            queue_.push_back(std::move(task));
        }
        cv_.notify_one();
        return fut.get();
    }

private:
    void run() {
        for (;;) {
            std::packaged_task<int()> t;
            {
                std::unique_lock lk(m_);
                cv_.wait(lk, [&] { return !queue_.empty(); });
                t = std::move(queue_.front());
                queue_.pop_front();
            }
            t();
        }
    }
    std::mutex m_;
    std::condition_variable cv_;
    std::deque<std::packaged_task<int()>> queue_;
    std::thread thread_;
};

}  // namespace

int spawn_process(const SpawnRequest& req) {
    static auto* s = new Spawner();  // lives as long as the process; never destroyed
    return s->spawn(req);
}

}  // namespace sky::detail
