#pragma once
// Starts local worker processes from one long-lived thread: a worker's parent-death signal fires
// when the thread that forked it ends, so forking from a short-lived thread (a MultiPool's, say)
// would kill workers early.
// Not util/subprocess's run_subprocess: that one runs a command to its end and reaps it, while a
// worker lives as long as its node, talks over a socket pair handed in as fd 3 that the pool
// then drives, is reaped by its owner (LocalWorker, NodeWorker), and must be forked by the one
// long-lived thread above.
#include <string>
#include <vector>

namespace sky::detail {

struct SpawnRequest {
    std::string path;  ///< executable
    std::vector<std::string> argv;
    std::vector<std::string> env;  ///< "K=V"
    std::string workdir;           ///< empty: inherit
    int child_fd = -1;             ///< becomes fd 3 in the child
    int output_fd = -1;            ///< becomes fds 1 and 2 in the child; -1: inherited
};

/// Returns the child's pid; throws sky::Error when the process cannot be started.
int spawn_process(const SpawnRequest& req);

}  // namespace sky::detail
