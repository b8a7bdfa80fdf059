// Spot training that loses nothing when a machine is reclaimed (api.md §10a): every rank reports
// its step with sky::progress, checks sky::preemption() each step, and when the cloud warns that
// a node is about to go, every rank saves the same step (the notice's checkpoint_step) into a
// directory the user names. The rank on the reclaimed machine goes on until the machine goes;
// `.retries(1)` runs its call again on the replacement, where it resumes from what it saved.
//
// It runs on sky::Simulated by default: three spot nodes, the cloud warning 2 s before it
// reclaims node 1 (sky::Fault::preempt(node, after, notice)). With --provider the notice comes
// when the cloud gives one (docs/providers.md says which clouds do).
//
//   example_spot_checkpoint --dir /tmp/ckpt                 # sky::Simulated
//   example_spot_checkpoint --dir /mnt/shared/ckpt --provider aws
#include <chrono>
#include <example_provider.hpp>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <sky/sky.hpp>
#include <string>
#include <thread>

namespace job {

struct Run {
    std::string dir;  // where each rank keeps its checkpoint
    int steps = 60;

    template <class A>
    void serialize(A& ar) {
        ar(dir, steps);
    }
};

struct Outcome {
    int rank = 0;
    long long resumed_from = -1;  // the step this run started from (-1: from scratch)
    long long saved = -1;         // the step it saved when warned (-1: it was not warned)
    long long finished = 0;       // the steps it ran to

    template <class A>
    void serialize(A& ar) {
        ar(rank, resumed_from, saved, finished);
    }
};

std::string checkpoint_of(const std::string& dir, int rank) {
    return dir + "/rank-" + std::to_string(rank) + ".step";
}

long long load_checkpoint(const std::string& file) {
    long long step = -1;
    if (std::ifstream in(file); in >> step) return step;
    return -1;
}

void save_checkpoint(const std::string& file, long long step) {
    // Written aside and renamed: a machine that goes in the middle leaves the last whole one.
    {
        std::ofstream out(file + ".tmp");
        out << step << "\n";
    }
    std::filesystem::rename(file + ".tmp", file);
}

// One rank's training loop: a step is a short sleep standing in for forward, backward and the
// optimizer; a real loop saves its model and optimizer state where this saves the step.
Outcome train(Run run) {
    Outcome o;
    o.rank = sky::instance_info().node;
    const std::string file = checkpoint_of(run.dir, o.rank);
    o.resumed_from = load_checkpoint(file);
    long long step = o.resumed_from < 0 ? 0 : o.resumed_from;
    for (; step < run.steps; ++step) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));  // run_one_step()
        sky::progress(step);
        if (auto p = sky::preemption(); p && o.saved < 0 && step >= p->checkpoint_step) {
            save_checkpoint(file, step);  // every rank saves the same step
            o.saved = step;
        }
    }
    o.finished = step;
    return o;
}

}  // namespace job

using namespace std::chrono_literals;

int main(int argc, char** argv) {
    sky::init(argc, argv);  // in a worker process this serves calls and never returns
    const bool simulated = examples::flag(argc, argv, "provider").empty();
    std::string dir = examples::flag(argc, argv, "dir");
    const bool own_dir = dir.empty();
    if (own_dir) dir = (std::filesystem::temp_directory_path() / "sky-spot-checkpoint").string();
    try {
        std::filesystem::create_directories(dir);
        if (own_dir)
            for (int r = 0; r < 3; ++r) std::filesystem::remove(job::checkpoint_of(dir, r));
        sky::ComputePool pool{{
            .provider = simulated ? sky::Provider{sky::Simulated{
                                        .faults = {sky::Fault::preempt(1, 4s, 2s)}, .seed = 11}}
                                  : examples::provider_from_args(argc, argv),
            .nodes = 3,
            .spot = "always",
            .display = sky::Display::quiet,
        }};
        std::mutex m;  // the handlers run on the pool's event thread
        std::map<int, long long> notice_steps;
        pool.on<sky::PreemptionNotice>([&](const sky::PreemptionNotice& n) {
            std::lock_guard lk(m);
            std::cout << "notice: node " << n.node << " (" << n.instance_id
                      << ") will be reclaimed; every rank saves step " << n.checkpoint_step << "\n";
            notice_steps[n.node] = n.checkpoint_step;
        });
        pool.on<sky::InstancePreempted>([](const sky::InstancePreempted& e) {
            std::cout << "preempted: node " << e.node << "\n";
        });
        pool.on<sky::InstanceReplaced>([](const sky::InstanceReplaced& e) {
            std::cout << "replaced: node " << e.node << " now runs on " << e.new_instance_id
                      << "\n";
        });
        const std::vector<job::Outcome> out =
            sky::compute<job::train>(job::Run{.dir = dir, .steps = 60}).retries(1) | pool;
        long long agreed = -2;
        bool same = true, resumed = false;
        for (const auto& o : out) {
            std::cout << "rank " << o.rank << ": ran to step " << o.finished;
            if (o.resumed_from >= 0) std::cout << ", resumed from step " << o.resumed_from;
            if (o.saved >= 0) std::cout << ", saved step " << o.saved;
            std::cout << "\n";
            // The rank that was reclaimed saved in its first run and resumed in its second.
            const long long saved = o.saved >= 0 ? o.saved : o.resumed_from;
            if (agreed == -2) agreed = saved;
            same = same && saved == agreed && o.finished == 60;
            resumed = resumed || o.resumed_from >= 0;
        }
        if (simulated) {
            std::lock_guard lk(m);
            std::cout << "every rank saved the same step: " << (same ? "yes" : "no") << "\n";
            std::cout << "the reclaimed rank resumed from it on the replacement: "
                      << (resumed && notice_steps.count(1) && agreed >= notice_steps[1] ? "yes"
                                                                                        : "no")
                      << "\n";
        }
    } catch (const std::exception& e) {
        std::cerr << "error: " << e.what() << "\n";
        return 1;
    }
    std::error_code ec;
    if (own_dir) std::filesystem::remove_all(dir, ec);  // a directory the user named stays
    return 0;
}
