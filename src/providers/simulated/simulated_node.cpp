#include "providers/simulated/simulated_node.hpp"

#include <fmt/format.h>

#include <sstream>
#include <thread>

#include "providers/local/local_worker.hpp"
#include "providers/simulated/counting_stream.hpp"
#include "providers/simulated/simulated_cloud.hpp"

namespace sky::detail::simulated {

namespace {

// The image's phases, as its bootstrap script announces them (bootstrap/image.cpp), and the one
// where a failing or slow bootstrap fault strikes: the first that runs the user's packages or
// commands (apt, pip, setup). An image with none of them gets a "setup" phase for the fault.
std::vector<std::string> image_phases(const Image& img, const PoolSpec& spec, bool fault,
                                      std::string& fault_phase) {
    std::vector<std::string> p;
    if (!img.apt.empty()) p.push_back("apt");
    if (!img.python.empty() || !img.pip.empty()) p.push_back("python");
    if (!img.pip.empty()) p.push_back("pip");
    p.push_back("env");
    if (!img.files.empty()) p.push_back("files");
    if (!img.setup.empty() || (fault && img.apt.empty() && img.pip.empty())) p.push_back("setup");
    if (spec.timeout.count() > 0) p.push_back("ttl");
    p.push_back("done");
    fault_phase = !img.apt.empty() ? "apt" : !img.pip.empty() ? "pip" : "setup";
    return p;
}

std::vector<std::string> lines_of(const std::string& text) {
    std::vector<std::string> out;
    std::istringstream in(text);
    for (std::string l; std::getline(in, l);) out.push_back(l);
    if (out.empty()) out.emplace_back();
    return out;
}

class SimulatedNode final : public NodeHandle {
public:
    static std::unique_ptr<SimulatedNode> start(const std::shared_ptr<SimCloud>& cloud,
                                                const NodeStartRequest& r,
                                                const std::function<void(Event)>& emit) {
        const std::string& id = r.machine.id;
        const PoolSpec& spec = *r.spec;
        emit(BootstrapStarting{id});
        const SimCloud::BootFaults faults = cloud->claim_boot_faults(r.node);
        std::string fault_phase;
        std::vector<std::string> phases = {"check", "upload"};
        const bool fault = faults.fail || faults.delay.count() > 0;
        for (auto& p : image_phases(spec.image, spec, fault, fault_phase)) phases.push_back(p);
        for (const auto& phase : phases) {
            emit(BootstrapProgress{id, phase});
            if (phase != fault_phase) continue;
            // A slow bootstrap: bounded by its delay, cut short when the pool ends the machine.
            const auto until = Clock::now() + faults.delay;
            while (Clock::now() < until) {
                if (cloud->machine_gone(id))
                    throw BootstrapError(r.node, id, phase, "the machine ended during bootstrap");
                std::this_thread::sleep_for(
                    std::min<Clock::duration>(until - Clock::now(), std::chrono::milliseconds(20)));
            }
            if (faults.fail) {
                auto out = lines_of(*faults.fail);
                std::string message =
                    fmt::format("the bootstrap script failed with exit status 100: {}", out.back());
                throw BootstrapError(r.node, id, phase, std::move(message), std::move(out));
            }
        }
        emit(BootstrapProgress{id, "worker"});
        std::unique_ptr<SimulatedNode> n(new SimulatedNode(cloud, id));
        try {
            n->worker_ = std::make_unique<LocalWorker>(spec, "");
        } catch (const std::exception& e) {
            throw BootstrapError(r.node, id, "worker", "could not start the worker", {e.what()});
        }
        cloud->attach(id, n->worker_.get(), emit);
        emit(BootstrapProgress{id, "watchdog"});
        emit(BootstrapCompleted{id});
        return n;
    }

    ~SimulatedNode() override {
        cloud_->detach(id_, worker_.get());
        worker_.reset();
    }

    std::unique_ptr<io::Stream> connect_worker() override {
        std::weak_ptr<SimCloud> cloud = cloud_;
        return std::make_unique<CountingStream>(worker_->connect_worker(), [cloud, id = id_] {
            if (auto c = cloud.lock()) c->call_completed(id);
        });
    }
    const std::string& token() const noexcept override { return worker_->token(); }
    void restart_worker(const std::function<void(Event)>& emit) override {
        emit(BootstrapProgress{id_, "worker"});
        worker_->restart_worker(emit);
        cloud_->attach(id_, worker_.get(), emit);
    }
    NodeExit exit_reason() override { return worker_->exit_reason(); }
    bool reachable() const override { return cloud_->machine_up(id_); }
    void stop() noexcept override { worker_->stop(); }

private:
    SimulatedNode(std::shared_ptr<SimCloud> cloud, std::string id)
        : cloud_(std::move(cloud)), id_(std::move(id)) {}

    std::shared_ptr<SimCloud> cloud_;
    std::string id_;
    std::unique_ptr<LocalWorker> worker_;
};

}  // namespace

std::unique_ptr<NodeHandle> start_node(const std::shared_ptr<SimCloud>& cloud,
                                       const NodeStartRequest& r,
                                       const std::function<void(Event)>& emit) {
    return SimulatedNode::start(cloud, r, emit);
}

}  // namespace sky::detail::simulated
