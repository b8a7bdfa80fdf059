// Volumes (api.md §12): a read-only dataset bucket and a writable checkpoint bucket, mounted on
// every node before any call runs and unmounted when the pool ends. Each node reads its shard
// of the dataset from /data, "trains" on it, and saves a checkpoint to /checkpoints, which
// lands in the checkpoint bucket.
//
//   example_volumes --provider ssh --hosts A,B --endpoint https://s3.example:9000 \
//                   --data-bucket my-datasets --checkpoint-bucket my-checkpoints
//
// The dataset is `datasets/train.csv` in the data bucket (--dataset-prefix, --dataset-file);
// checkpoints go under `run-1/` in the checkpoint bucket (--run). Credentials: the buckets' own
// keys from S3_ACCESS_KEY_ID / S3_SECRET_ACCESS_KEY when set (an S3-compatible service's, or an
// AWS key that reaches only these buckets), else sky mints temporary ones scoped to the two
// buckets from the pool's AWS credentials with STS (docs/security.md). sky::Local and
// sky::Simulated do not mount volumes: they refuse this pool with a ConfigError.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sky/sky.hpp>
#include <string>
#include <vector>

#include "example_provider.hpp"

namespace demo {

// Trains on this node's shard of the dataset's lines (here: counts them and sums their first
// column), saves the model as this node's checkpoint, and returns the checkpoint's name.
std::string train(std::string dataset, std::string checkpoint_dir) {
    std::ifstream in(dataset);
    if (!in) throw std::runtime_error("cannot read " + dataset + ": " + std::strerror(errno));
    std::vector<std::string> lines;
    for (std::string l; std::getline(in, l);)
        if (!l.empty() && l.find_first_not_of("0123456789.-,") == std::string::npos)
            lines.push_back(l);
    double rows = 0, sum = 0;
    for (const auto& l : sky::shard(lines)) {
        rows += 1;
        sum += std::stod(l.substr(0, l.find(',')));
    }
    const std::string name = "node-" + std::to_string(sky::instance_info().node) + ".ckpt";
    std::ofstream out(checkpoint_dir + "/" + name);
    out << "rows " << rows << " sum " << sum << "\n";
    out.close();
    if (!out) throw std::runtime_error("cannot write " + checkpoint_dir + "/" + name);
    return name;
}

// A write to the read-only dataset volume: its errno (EROFS), or 0 if it was allowed.
int try_to_modify(std::string path) {
    int fd = ::open(path.c_str(), O_WRONLY | O_APPEND);
    if (fd < 0) return errno;
    ::close(fd);
    return 0;
}

}  // namespace demo

int main(int argc, char** argv) {
    sky::init(argc, argv);  // in a worker process this serves calls and never returns
    using examples::flag;
    const std::string endpoint = flag(argc, argv, "endpoint");
    const std::string data_bucket = flag(argc, argv, "data-bucket");
    const std::string checkpoint_bucket = flag(argc, argv, "checkpoint-bucket");
    if (data_bucket.empty() || checkpoint_bucket.empty()) {
        std::cerr << "usage: " << argv[0]
                  << " [--provider ... as every example] [--endpoint URL] --data-bucket B "
                     "--checkpoint-bucket C\n";
        return 2;
    }
    const std::string data_path = flag(argc, argv, "data-path", "/data");
    const std::string checkpoint_path = flag(argc, argv, "checkpoint-path", "/checkpoints");
    const std::string dataset = data_path + "/" + flag(argc, argv, "dataset-file", "train.csv");
    // From the environment, never the command line (ps shows that to every user).
    auto env = [](const char* name) {
        const char* v = std::getenv(name);
        return std::string(v ? v : "");
    };
    try {
        sky::ComputePool pool{{
            .provider = examples::provider_from_args(argc, argv),
            .nodes = examples::nodes_from_args(argc, argv, 2),
            .volumes = {sky::S3Volume{.mount_path = data_path,
                                      .bucket = data_bucket,
                                      .prefix = flag(argc, argv, "dataset-prefix", "datasets/"),
                                      .read_only = true,
                                      .endpoint = endpoint,
                                      .access_key_id = env("S3_ACCESS_KEY_ID"),
                                      .secret_access_key = env("S3_SECRET_ACCESS_KEY")},
                        sky::S3Volume{.mount_path = checkpoint_path,
                                      .bucket = checkpoint_bucket,
                                      .prefix = flag(argc, argv, "run", "run-1"),
                                      .read_only = false,
                                      .endpoint = endpoint,
                                      .access_key_id = env("S3_ACCESS_KEY_ID"),
                                      .secret_access_key = env("S3_SECRET_ACCESS_KEY")}},
        }};
        const std::string run = flag(argc, argv, "run", "run-1");
        std::vector<std::string> saved = sky::compute<demo::train>(dataset, checkpoint_path) | pool;
        for (const auto& name : saved)
            std::cout << "checkpoint saved: " << checkpoint_bucket << "/" << run << "/" << name
                      << "\n";
        int err = sky::compute<demo::try_to_modify>(dataset) >> pool;
        std::cout << "writing to the read-only dataset: "
                  << (err == 0 ? std::string("allowed (unexpected)") : std::strerror(err)) << "\n";
        return err == EROFS ? 0 : 1;
    } catch (const sky::BootstrapError& e) {
        std::cerr << "the pool could not start: " << e.what() << " (phase " << e.phase() << ")\n";
        for (const auto& line : e.output()) std::cerr << "  " << line << "\n";
        return 1;
    } catch (const std::exception& e) {
        std::cerr << "error: " << e.what() << "\n";
        return 1;
    }
}
