#pragma once
// Putting the program on a pool's nodes. Every file is stored on a node by its content hash
// (~/.sky/cas/<sha256>); the program directory a worker runs from (~/.sky/prog/<manifest id>) is
// made of hard links to those files, so a changed file is a new directory and no run can ever
// use a stale one. A node is sent only what it lacks: files an earlier pool left, or that the
// node's own system has with the same content, stay.
//
// One PoolShipment is shared by the start threads of a pool's nodes, so that each missing file
// leaves the client once whatever the node count: the first node that needs files receives them
// from the client (compressed with zstd when the node can decompress), and every other node
// copies them from a node that has them, over the pool's own network (the worker's file server,
// runtime/worker/file_server.hpp), checking each file's hash on arrival. A node that cannot reach
// its peers gets the files from the client instead.
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "ship/closure.hpp"
#include "sky/events.hpp"

namespace sky::detail::node {
class NodeShell;
}

namespace sky::detail::ship {

/// A node as shipping sees it.
struct NodeSite {
    int node = 0;
    std::string instance_id;
    node::NodeShell* shell = nullptr;  ///< how to reach the node
    std::string home;                  ///< $HOME on the node
    std::string run_dir;               ///< this pool's private (0700) directory on the node
    std::string peer_address;          ///< how the pool's other nodes reach this one
    /// False: this node neither serves program files to its peers nor fetches them from a peer
    /// (its address is shared with other tenants or public, where a transfer token would go to
    /// whoever listens there): everything it lacks comes from the client.
    bool peers = true;
    /// The pool's hard timeout: a file server started on this node ends by then at the latest.
    std::chrono::seconds lifetime{3600};
};

/// Why shipping failed: `phase` is "upload" or "fetch"; `output` holds the node's last lines.
struct ShipFailure : std::runtime_error {
    ShipFailure(std::string phase_, const std::string& message,
                std::vector<std::string> output_ = {})
        : std::runtime_error(message), phase(std::move(phase_)), output(std::move(output_)) {}
    std::string phase;
    std::vector<std::string> output;
};

class PoolShipment {
public:
    explicit PoolShipment(const Manifest& manifest) : manifest_(manifest) {}
    PoolShipment(const PoolShipment&) = delete;
    PoolShipment& operator=(const PoolShipment&) = delete;

    /// Makes the program directory present on `site` and returns its path there. Emits
    /// BootstrapProgress "cached", "upload" or "fetch" (with bytes). Throws ShipFailure.
    std::string ship(const NodeSite& site, const std::function<void(Event)>& emit);

    /// The node is going away: it serves no more files (waits for transfers from it to end).
    void forget(int node) noexcept;

    /// Bytes of file content this client sent to nodes (before compression).
    [[nodiscard]] std::uint64_t bytes_from_client() const;
    /// Bytes that went over the wire from this client to nodes (after compression).
    [[nodiscard]] std::uint64_t wire_bytes_from_client() const;

    [[nodiscard]] const Manifest& manifest() const { return manifest_; }

private:
    struct Holder {
        NodeSite site;
        std::string prog_dir;
        int users = 0;
        bool gone = false;
        bool server_failed = false;
        bool server_started = false;
        std::uint16_t port = 0;
        std::string token;
        std::mutex server_m;  // one start of the server at a time
    };

    std::vector<std::string> inventory(const NodeSite& site, bool& complete, bool& has_zstd);
    void upload_from_client(const NodeSite& site, const std::vector<std::string>& missing,
                            bool zstd, const std::function<void(Event)>& emit);
    // Returns the hashes that could not be fetched from `from`.
    std::vector<std::string> fetch_from(Holder& from, const NodeSite& site,
                                        const std::vector<std::string>& missing,
                                        const std::function<void(Event)>& emit);
    bool ensure_server(Holder& h);
    std::string compose(const NodeSite& site);
    void add_holder(const NodeSite& site, const std::string& prog_dir);

    const Manifest& manifest_;
    mutable std::mutex m_;
    std::condition_variable cv_;
    std::vector<std::unique_ptr<Holder>> holders_;
    bool seeding_ = false;
    std::uint64_t sent_ = 0;
    std::uint64_t wire_ = 0;
};

/// The program directory on a node for this manifest: "<home>/.sky/prog/<id>".
std::string program_dir(const std::string& home, const Manifest& m);

/// The node-side scripts of shipping (src/ship/scripts/), each whole: its values, the store's
/// prelude (`$cas` is the store, `sky_sha` hashes stdin), its steps; run as
/// `node_command(script)`. Exposed so that tests can run them against a scratch home exactly as
/// a node does.
namespace node_scripts {

/// Wraps a script as the command a node runs: `exec bash -c '<script>'`.
std::string node_command(const std::string& script);

/// Takes stock of the store. Reads "<sha256>\t<size>\t<client path>" lines on stdin; prints
/// "zstd" when the node has it, "complete" when `prog_dir` is complete, then per file the store
/// lacks "local <hash>" (a copy of the node's own file at the client's path, whose copied bytes
/// hashed to <hash>, entered the store) or "need <hash>".
std::string inventory(const std::string& prog_dir);

/// Moves an upload into the store: `incoming` (or `sent_path`, zstd-compressed) enters the store
/// as the file's hash only if its bytes hash to it; otherwise it is removed and the script exits
/// with status 3. Names no file name of the client's (a name is never shell text).
std::string store_upload(const ShippedFile& file, const std::string& incoming,
                         const std::string& sent_path, bool zstd);

}  // namespace node_scripts

}  // namespace sky::detail::ship
