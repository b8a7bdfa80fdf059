#pragma once
// What a sky::Local node applies of its pool's Image on this machine. The machine's work is done
// once per pool (every Local node is this machine): a pip environment, kept by what it holds in
// <sky home>/local/venv-<key>/ for the next pool with the same Python and packages; the image's
// files, written where they would be on a node but never over a file of this machine, and
// removed again when the pool ends. What Local does not do here (install apt packages, run
// setup commands, find a Python version the machine lacks) each node says plainly in a
// BootstrapProgress step ("apt skipped on Local: ..."). Each node reports its own steps, in the
// order a cloud node's bootstrap script runs them.
#include <atomic>
#include <exception>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "sky/events.hpp"
#include "sky/image.hpp"

namespace sky::detail {

class LocalImage {
public:
    /// `sky_home` is where the venv is kept (empty: <sky home> from the ledger's directory).
    explicit LocalImage(Image image, std::string sky_home = {});
    /// Removes the files it wrote (remove_files()).
    ~LocalImage();
    LocalImage(const LocalImage&) = delete;
    LocalImage& operator=(const LocalImage&) = delete;

    /// Node `node`'s bootstrap steps for `instance_id` (apt, python, pip, env, files, setup as
    /// the image asks), each a BootstrapProgress event. Throws sky::BootstrapError naming the
    /// phase that failed (the same failure for every node of the pool).
    void apply(int node, const std::string& instance_id, const std::function<void(Event)>& emit);
    /// What the worker's environment gets besides the image's env: VIRTUAL_ENV and PATH with
    /// the venv's bin first, when the image asks for Python or pip packages (else empty).
    [[nodiscard]] std::map<std::string, std::string> worker_env() const;
    /// The venv's directory ("" when the image needs none).
    [[nodiscard]] const std::string& venv() const noexcept { return venv_; }
    /// The pool is closing: a running pip install or venv creation is ended. Never throws.
    void cancel() noexcept;
    /// Removes the files apply() wrote whose content is still what it wrote, and the directories
    /// it made for them when empty. Never throws.
    void remove_files() noexcept;

private:
    struct Outcome {
        bool done = false;
        std::vector<std::string> notes;  // said by every node, as BootstrapProgress steps
        bool failed = false;
        std::string message;
        std::vector<std::string> output;
    };
    // Runs `work` the first time `phase` is reached by any node; every node gets its outcome.
    const Outcome& once(const std::string& phase, const std::function<void(Outcome&)>& work);
    void check_apt(Outcome& o);
    void make_venv(Outcome& o);
    void install_pip(Outcome& o);
    void write_files(Outcome& o);

    Image image_;
    std::string home_;  // <sky home>/local
    std::string venv_;
    std::string python_;  // the interpreter the venv was made with
    std::atomic<bool> cancelled_{false};
    std::mutex m_;  // one phase's work at a time; guards what follows
    std::map<std::string, Outcome> outcomes_;
    std::vector<std::pair<std::string, std::string>> written_;  // path, content
    std::vector<std::string> made_dirs_;                        // outermost first
};

}  // namespace sky::detail
