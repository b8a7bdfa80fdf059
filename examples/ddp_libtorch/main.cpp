// Data-parallel training with libtorch across a sky pool: every rank is one worker process, and
// everything the ranks need to find each other comes from the environment that
// sky::distributed::torch sets while the call runs (MASTER_ADDR, MASTER_PORT, WORLD_SIZE, RANK,
// GLOO_SOCKET_IFNAME). c10d's TCPStore is the rendezvous, ProcessGroupGloo does the collectives:
// rank 0's initial weights are broadcast, every step's gradients are averaged with allreduce.
//
//   ddp_libtorch --local 3                                   # 3 sky::Local nodes
//   ddp_libtorch --ssh h1,h2,h3 --identity KEY --known-hosts FILE [--port 22] [--user root]
//
// Exits 0 when every rank ends with identical weights and the loss fell, 1 otherwise.
#include <torch/torch.h>

#include <cereal/types/vector.hpp>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <sky/sky.hpp>
#include <sstream>
#include <string>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <vector>

namespace ddp {

/// What one rank reports: where it ran, its final weights, and the global loss per step.
struct Report {
    int rank = -1;
    int world = 0;
    std::string addr;  ///< the node's private address (where the rank ran)
    std::vector<float> weights;
    std::vector<double> losses;

    template <class Archive>
    void serialize(Archive& ar) {
        ar(rank, world, addr, weights, losses);
    }
};

std::string need(const char* name) {
    const char* v = std::getenv(name);
    if (!v || !*v)
        throw std::runtime_error(std::string(name) +
                                 " is not set: run with .with(sky::distributed::torch{})");
    return v;
}

/// One rank of the training run.
Report train(int steps) {
    const std::string addr = need("MASTER_ADDR");
    const int port = std::stoi(need("MASTER_PORT"));
    const int world = std::stoi(need("WORLD_SIZE"));
    const int rank = std::stoi(need("RANK"));
    const std::string ifname = need("GLOO_SOCKET_IFNAME");
    torch::set_num_threads(1);

    c10d::TCPStoreOptions so;
    so.port = static_cast<std::uint16_t>(port);
    so.isServer = rank == 0;
    so.numWorkers = world;
    so.waitWorkers = true;
    so.timeout = std::chrono::seconds(120);
    auto store = c10::make_intrusive<c10d::TCPStore>(addr, so);
    auto go = c10d::ProcessGroupGloo::Options::create();
    go->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(ifname));
    go->timeout = std::chrono::seconds(120);
    auto pg = c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, world, go);

    // Each rank starts from different random weights; rank 0's win (a broadcast), as DDP does.
    torch::manual_seed(1000 + rank);
    torch::nn::Sequential model(torch::nn::Linear(8, 16), torch::nn::Tanh(),
                                torch::nn::Linear(16, 1));
    for (auto& p : model->parameters()) {
        std::vector<at::Tensor> t{p.data()};
        pg->broadcast(t)->wait();
    }

    // One data set (same seed everywhere), split by rank: y = x·w + 0.5 + noise.
    torch::manual_seed(7);
    const auto x = torch::randn({96 * world, 8});
    const auto w = torch::linspace(-1, 1, 8).unsqueeze(1);
    const auto y = x.matmul(w) + 0.5 + 0.01 * torch::randn({96 * world, 1});
    const auto idx = torch::arange(rank, 96 * world, world);
    const auto xs = x.index_select(0, idx), ys = y.index_select(0, idx);

    torch::optim::SGD opt(model->parameters(), torch::optim::SGDOptions(0.1));
    Report r;
    r.rank = rank;
    r.world = world;
    r.addr = sky::instance_info().private_addr;
    for (int s = 0; s < steps; ++s) {
        opt.zero_grad();
        auto loss = torch::mse_loss(model->forward(xs), ys);
        loss.backward();
        for (auto& p : model->parameters()) {  // average the gradients over the ranks
            std::vector<at::Tensor> g{p.grad()};
            pg->allreduce(g)->wait();
            p.grad().div_(world);
        }
        opt.step();
        std::vector<at::Tensor> l{loss.detach().clone()};
        pg->allreduce(l)->wait();
        r.losses.push_back(l[0].item<double>() / world);
    }
    for (auto& p : model->parameters()) {
        auto flat = p.detach().flatten().contiguous();
        r.weights.insert(r.weights.end(), flat.data_ptr<float>(),
                         flat.data_ptr<float>() + flat.numel());
    }
    pg->barrier()->wait();  // rank 0's store outlives every rank's last use of it
    return r;
}

std::vector<std::string> split(const std::string& s) {
    std::vector<std::string> out;
    std::stringstream ss(s);
    for (std::string part; std::getline(ss, part, ',');)
        if (!part.empty()) out.push_back(part);
    return out;
}

}  // namespace ddp

int main(int argc, char** argv) {
    sky::init(argc, argv);  // in a worker process this serves calls and never returns
    sky::PoolSpec spec{.display = sky::Display::quiet};
    sky::SSH ssh;
    bool use_ssh = false;
    int steps = 60;
    for (int i = 1; i + 1 < argc; i += 2) {
        const std::string k = argv[i], v = argv[i + 1];
        if (k == "--local")
            spec.nodes = std::stoi(v);
        else if (k == "--ssh")
            use_ssh = true, ssh.hosts = ddp::split(v);
        else if (k == "--identity")
            ssh.identity_file = v;
        else if (k == "--known-hosts")
            ssh.known_hosts = v;
        else if (k == "--port")
            ssh.port = std::stoi(v);
        else if (k == "--user")
            ssh.user = v;
        else if (k == "--steps")
            steps = std::stoi(v);
        else {
            std::cerr << "unknown option " << k << "\n";
            return 2;
        }
    }
    if (use_ssh) {
        spec.provider = ssh;
        spec.nodes = static_cast<int>(ssh.hosts.size());
    }
    try {
        sky::ComputePool pool{spec};
        auto reports =
            sky::compute<ddp::train>(steps).with(sky::distributed::torch{.backend = "gloo"}) | pool;
        bool ok = !reports.empty();
        for (std::size_t r = 0; r < reports.size(); ++r) {
            const auto& rep = reports[r];
            std::cout << "rank " << rep.rank << "/" << rep.world << " on " << rep.addr << ": loss "
                      << rep.losses.front() << " -> " << rep.losses.back() << ", "
                      << rep.weights.size() << " weights\n";
            ok = ok && rep.rank == static_cast<int>(r) &&
                 rep.world == static_cast<int>(reports.size());
            ok = ok && rep.weights == reports[0].weights && rep.losses == reports[0].losses;
        }
        const bool fell = ok && reports[0].losses.back() < 0.5 * reports[0].losses.front();
        std::cout << (ok ? "every rank ended with identical weights" : "the ranks' weights differ")
                  << (fell ? "; the loss fell" : "; the loss did not fall") << "\n";
        return ok && fell ? 0 : 1;
    } catch (const std::exception& e) {
        std::cerr << "ddp_libtorch: " << e.what() << "\n";
        return 1;
    }
}
