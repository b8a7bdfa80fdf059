#pragma once
// How a worker process is started: what a launcher (the Local provider, a node's start script,
// a worker that starts one process per GPU) tells the worker through its environment, and what
// the worker reads back. The one place that knows the SKY_WORKER_* variables.
#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace sky::detail {

struct WorkerLaunch {
    /// SKY_WORKER_FD: an inherited, connected socket to serve (Local workers and the processes
    /// of a worker with one per GPU). Either this or `listen`.
    std::optional<int> fd;
    /// SKY_WORKER_LISTEN: where to listen instead: "unix:/absolute/path" (shorter than a socket
    /// address holds) or "HOST:PORT" (port 0: any).
    std::string listen;
    /// SKY_WORKER_TOKEN: the pool's token, in the environment (a secret: env() only, never a
    /// script).
    std::string token;
    /// SKY_WORKER_TOKEN_FILE: a 0600 file holding the token, which the worker reads and removes
    /// (remote workers: no token in a script or on a command line). A file that holds the
    /// client's public key instead (public_key_text, runtime/auth.hpp) means: agree on the
    /// token (agreed_token) with a key of the worker's own, whose public half goes into the
    /// port file after the port ("PORT x25519:..."): only public keys travel to and from the
    /// node.
    std::string token_file;
    /// SKY_WORKER_PORT_FILE: where a listening worker writes its port ("unix" for a socket).
    std::string port_file;
    /// SKY_WORKER_READY_FD: an inherited pipe a listening worker writes its port to (one line,
    /// as in the port file), then closes: its launcher learns at once that it listens.
    std::optional<int> ready_fd;
    /// SKY_WORKER_HEARTBEAT_FILE: a file the worker touches whenever the client is heard from
    /// (the node's watchdog reads its age).
    std::string heartbeat_file;
    /// SKY_WORKER_ACCEPT_TIMEOUT (whole seconds, > 0): how long a listening worker waits for its
    /// client; none: the worker's default.
    std::optional<std::chrono::seconds> accept_timeout;
    /// SKY_WORKER_CRASH_FILE: where the worker writes its crash report when a call kills it
    /// (runtime/crash_report.hpp); the launcher reads it once the worker has ended.
    std::string crash_file;
    /// SKY_WORKER_NOTICE_FILE: where the node's launcher writes a notice its provider gave
    /// (runtime/preemption.hpp, NodeNotice); the worker forwards it to its client.
    std::string notice_file;
    /// SKY_WORKER_ALLOW_FROM: the one IP address a listening worker accepts connections from
    /// (where its client's connection comes from, when the launcher knows it); empty: any.
    std::string allow_from;
    /// SKY_WORKER_SEAL ("1"): a listening worker whose stream crosses a network sky does not
    /// otherwise encrypt: it answers only a client that seals the stream (runtime/auth.hpp).
    bool seal = false;
    /// SKY_PARENT_PID (> 0): the client's process; the worker dies with it. 0: none.
    long parent_pid = 0;
    /// SKY_PARENT_POOL: the pool of a worker this machine's client started (Local): `sky gc`
    /// kills a dead client's leftover worker only when /proc/PID/environ has this entry.
    std::string parent_pool;

    /// "NAME=value" for each field that is set, for a child's environment.
    [[nodiscard]] std::vector<std::string> env() const;
    /// One line `export NAME='value' ...` (values shell-quoted) for a start script. Throws
    /// std::logic_error when `token` is set: a token never goes into a script.
    [[nodiscard]] std::string shell_exports() const;

    /// Reads the variables from this process's environment; an unset or empty variable leaves
    /// its field unset. Throws sky::ConfigError naming the variable (never a token's value) when
    /// a value is malformed. Checks each value, not whether the set is complete.
    static WorkerLaunch from_env();
    /// The same from `lookup(name)` (nullptr: unset).
    static WorkerLaunch from_env(const std::function<const char*(const char*)>& lookup);

    /// Throws sky::ConfigError unless a worker has what it needs: a token (SKY_WORKER_TOKEN or
    /// SKY_WORKER_TOKEN_FILE) and a connection (SKY_WORKER_FD or SKY_WORKER_LISTEN).
    void check_complete() const;

    /// The SKY_PARENT_POOL entry of a worker of `pool_id` ("SKY_PARENT_POOL=<pool id>").
    [[nodiscard]] static std::string parent_pool_entry(std::string_view pool_id);

    /// Whether an environment entry ("NAME=value" or "NAME") is one of these variables, or
    /// another SKY_WORKER_* one: a launcher passes none of its own on to the worker it starts.
    static bool is_launch_variable(std::string_view entry) noexcept;

    /// Overwrites the token's value in this process's environment block, then unsets
    /// SKY_WORKER_TOKEN and SKY_WORKER_TOKEN_FILE (a worker's children need neither).
    static void erase_token_from_env() noexcept;
};

}  // namespace sky::detail
