// The environment on every node (seeds 002, 003: `Image(python="3.13", pip=["torch", "numpy"],
// apt=["ffmpeg", "libsndfile1"], env={"KERAS_BACKEND": "jax"})`, `content_hash()`,
// `bootstrap(ttl)`). sky::Image is a declaration; each node turns it into an idempotent shell
// script (`image.bootstrap(ttl)`) and runs it before its worker starts: apt packages that are
// missing, a Python venv with the pip packages, the environment variables, files, set-up commands.
// `content_hash()` names the environment (12 hex characters, stable across runs and machines), for
// caches of prepared machines.
//
// Providers apply it differently: on SSH and the clouds the node runs the script; Local's nodes
// are processes of this machine, which get the image's `env` and what else Local applies of it
// here (docs/providers.md says what). `--offline` gives the pool the image without its Python, apt
// and pip packages, for machines that cannot reach a package index (as this project's ctest runs
// it, on Local and on the SSH test hosts).
//
//   example_image [--offline] [--script]                # 1 worker process on this machine
//   example_image --provider ssh --hosts A --identity KEY --known-hosts FILE [--offline]
//   example_image --provider aws                        # a fresh EC2 instance runs the script
#include <cstdlib>
#include <example_provider.hpp>
#include <iostream>
#include <sky/sky.hpp>
#include <string>

namespace job {

// What the worker's environment holds.
std::string keras_backend() {
    const char* v = std::getenv("KERAS_BACKEND");
    return v ? v : "(unset)";
}

}  // namespace job

int main(int argc, char** argv) {
    sky::init(argc, argv);  // in a worker process this serves calls and never returns
    try {
        const bool offline = examples::has_flag(argc, argv, "offline");

        sky::Image image{.python = "3.13",
                         .pip = {"torch", "numpy"},
                         .apt = {"ffmpeg", "libsndfile1"},
                         .env = {{"KERAS_BACKEND", "jax"}}};

        std::cout << "image hash: " << image.content_hash() << "\n";
        sky::Image same = image;
        std::cout << "an equal image has the same hash: "
                  << (same.content_hash() == image.content_hash() ? "yes" : "no") << "\n";
        sky::Image other = image;
        other.env["KERAS_BACKEND"] = "torch";
        std::cout << "another env, another hash: "
                  << (other.content_hash() != image.content_hash() ? "yes" : "no") << "\n";

        // The script a node runs (with a one-hour lifetime); --script prints it.
        const std::string script = image.bootstrap(3600);
        std::cout << "bootstrap script: " << script.size() << " bytes\n";
        if (examples::has_flag(argc, argv, "script")) std::cout << script << "\n";

        // What the pool gets: the image as declared, or with --offline only its environment.
        sky::Image pool_image = image;
        if (offline) {
            pool_image.python.clear();
            pool_image.pip.clear();
            pool_image.apt.clear();
        }
        std::cout << "pool image: " << (offline ? "env only (--offline)" : "as declared")
                  << ", hash " << pool_image.content_hash() << "\n";

        sky::ComputePool pool{{.provider = examples::provider_from_args(argc, argv),
                               .nodes = examples::nodes_from_args(argc, argv, 1),
                               .image = pool_image}};
        std::cout << "KERAS_BACKEND on the node: " << (sky::compute<job::keras_backend>() >> pool)
                  << "\n";
    } catch (const std::exception& e) {
        std::cerr << "error: " << e.what() << "\n";
        return 1;
    }
    return 0;
}
