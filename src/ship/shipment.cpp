#include "ship/shipment.hpp"

#include <fmt/format.h>
#include <zstd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <set>
#include <sstream>

#include "node/scripts.hpp"
#include "node/shell.hpp"
#include "runtime/auth.hpp"
#include "ship/scripts.hpp"
#include "util/shell.hpp"

namespace sky::detail::ship {

namespace {

using std::chrono::seconds;

std::vector<std::string> lines_of(const std::string& text) {
    std::vector<std::string> out;
    std::istringstream is(text);
    for (std::string l; std::getline(is, l);) out.push_back(l);
    return out;
}

std::vector<std::string> tail(const node::CommandOutcome& r) { return r.last_lines(20); }

// Every shipping command runs in bash (arrays, $'..', /dev/tcp), whatever the login shell is:
// its values, then prelude.sh (private files, the store's directories, sky_sha), then its steps
// (src/ship/scripts/*.sh). sky_sha hashes its stdin with OpenSSL's command where the node has it
// (it uses the CPU's SHA instructions, 3-5x faster than coreutils' sha256sum).
std::string shipping_script(const scripts::ScriptValues& values, std::string_view steps) {
    return values.then({scripts::prelude_sh(), "\n", steps});
}

std::vector<std::string> in_bash(const std::string& script) { return {"bash", "-c", script}; }

// Runs a shipping command on the node. A command that ran out of time throws TimeoutError, as
// a node that stops answering does.
node::CommandOutcome run_on(const NodeSite& site, const std::vector<std::string>& argv,
                            node::RunOptions options) {
    auto r = site.shell->run(argv, options);
    if (r.timed_out)
        throw TimeoutError(
            fmt::format("a shipping command on {} ran past {} s", site.shell->describe(),
                        std::chrono::duration_cast<seconds>(options.timeout).count()));
    return r;
}

// Streams a file through zstd: produces compressed bytes on demand.
class ZstdReader {
public:
    explicit ZstdReader(const std::filesystem::path& p) : in_(p, std::ios::binary) {
        if (!in_) throw ShipFailure("upload", "cannot read " + p.string());
        cctx_ = ZSTD_createCCtx();
        ZSTD_CCtx_setParameter(cctx_, ZSTD_c_compressionLevel, 3);
        ZSTD_CCtx_setParameter(cctx_, ZSTD_c_checksumFlag, 1);
        inbuf_.resize(ZSTD_CStreamInSize());
    }
    ~ZstdReader() { ZSTD_freeCCtx(cctx_); }

    std::size_t read(std::byte* out, std::size_t n) {
        ZSTD_outBuffer ob{out, n, 0};
        while (ob.pos == 0 && !done_) {
            if (ib_.pos == ib_.size && !eof_) {
                in_.read(inbuf_.data(), static_cast<std::streamsize>(inbuf_.size()));
                if (in_.bad()) throw ShipFailure("upload", "error reading a file to ship");
                ib_ = {inbuf_.data(), static_cast<std::size_t>(in_.gcount()), 0};
                consumed_ += ib_.size;
                eof_ = in_.eof() || ib_.size == 0;
            }
            auto mode = eof_ && ib_.pos == ib_.size ? ZSTD_e_end : ZSTD_e_continue;
            std::size_t left = ZSTD_compressStream2(cctx_, &ob, &ib_, mode);
            if (ZSTD_isError(left))
                throw ShipFailure(
                    "upload", std::string("zstd compression failed: ") + ZSTD_getErrorName(left));
            if (mode == ZSTD_e_end && left == 0) done_ = true;
        }
        return ob.pos;
    }
    [[nodiscard]] std::uint64_t consumed() const { return consumed_; }

private:
    std::ifstream in_;
    ZSTD_CCtx* cctx_ = nullptr;
    std::vector<char> inbuf_;
    ZSTD_inBuffer ib_{nullptr, 0, 0};
    bool eof_ = false;
    bool done_ = false;
    std::uint64_t consumed_ = 0;
};

// Rate limit for progress events: a step, then at most every 250 ms, and the last one.
class ProgressEmitter {
public:
    ProgressEmitter(const std::function<void(Event)>& emit, std::string id, std::string step,
                    std::uint64_t total)
        : emit_(emit), id_(std::move(id)), step_(std::move(step)), total_(total) {}
    void update(std::uint64_t done, bool force = false) {
        auto now = std::chrono::steady_clock::now();
        if (!force && now - last_ < std::chrono::milliseconds(250)) return;
        last_ = now;
        emit_(BootstrapProgress{id_, step_, std::min(done, total_), total_});
    }

private:
    const std::function<void(Event)>& emit_;
    std::string id_, step_;
    std::uint64_t total_;
    std::chrono::steady_clock::time_point last_{};
};

}  // namespace

std::string program_dir(const std::string& home, const Manifest& m) {
    return home + "/.sky/prog/" + m.id;
}

std::uint64_t PoolShipment::bytes_from_client() const {
    std::lock_guard lk(m_);
    return sent_;
}

std::uint64_t PoolShipment::wire_bytes_from_client() const {
    std::lock_guard lk(m_);
    return wire_;
}

namespace node_scripts {

std::string node_command(const std::string& script) {
    return "exec bash -c " + shell_quote(script);
}

std::string inventory(const std::string& prog_dir) {
    scripts::ScriptValues v("sky ship: takes stock of the node's program store");
    v.word("prog", prog_dir);
    return shipping_script(v, scripts::inventory_sh());
}

std::string store_upload(const ShippedFile& f, const std::string& incoming,
                         const std::string& sent_path, bool zstd) {
    scripts::ScriptValues v("sky ship: one uploaded file into the store");
    v.word("in", incoming).word("h", f.sha256).word("sent", sent_path).number("zstd", zstd ? 1 : 0);
    return shipping_script(v, scripts::store_upload_sh());
}

}  // namespace node_scripts

std::vector<std::string> PoolShipment::inventory(const NodeSite& site, bool& complete,
                                                 bool& has_zstd) {
    // What the node lacks, and what its own system has (node_scripts::inventory).
    std::string in;
    for (auto& f : manifest_.files)
        in += fmt::format("{}\t{}\t{}\n", f.sha256, f.size, f.source.string());
    auto r = run_on(site, in_bash(node_scripts::inventory(program_dir(site.home, manifest_))),
                    {.timeout = std::chrono::minutes(10), .stdin_data = in});
    if (r.status != 0)
        throw ShipFailure("upload",
                          fmt::format("could not take stock of the node's program store (exit "
                                      "status {})",
                                      r.status),
                          tail(r));
    complete = false;
    has_zstd = false;
    std::vector<std::string> missing;
    for (auto& l : lines_of(r.out)) {
        if (l == "complete") complete = true;
        if (l == "zstd") has_zstd = true;
        if (l.rfind("need ", 0) == 0) missing.push_back(l.substr(5));
    }
    return missing;
}

void PoolShipment::upload_from_client(const NodeSite& site, const std::vector<std::string>& missing,
                                      bool zstd, const std::function<void(Event)>& emit) {
    std::uint64_t total = 0;
    std::vector<const ShippedFile*> files;
    for (auto& h : missing)
        for (auto& f : manifest_.files)
            if (f.sha256 == h) {
                files.push_back(&f);
                total += f.size;
                break;
            }
    ProgressEmitter progress(emit, site.instance_id, "upload", total);
    progress.update(0, true);
    std::uint64_t done = 0;
    auto& s = *site.shell;
    for (auto* f : files) {
        const std::string incoming =
            fmt::format("{}/.sky/cas/.in-{}-{}", site.home, f->sha256, random_hex(12));
        const std::string sent_path = zstd ? incoming + ".zst" : incoming;
        std::uint64_t wire = 0;
        try {
            if (zstd) {
                ZstdReader z(f->source);
                s.upload(
                    [&](std::byte* b, std::size_t n) {
                        std::size_t got = z.read(b, n);
                        wire += got;
                        return got;
                    },
                    sent_path, 0600, [&](std::uint64_t) { progress.update(done + z.consumed()); });
            } else {
                std::ifstream in(f->source, std::ios::binary);
                if (!in) throw ShipFailure("upload", "cannot read " + f->source.string());
                s.upload(
                    [&](std::byte* b, std::size_t n) {
                        in.read(reinterpret_cast<char*>(b), static_cast<std::streamsize>(n));
                        if (in.bad()) throw ShipFailure("upload", "error reading a file to ship");
                        wire += static_cast<std::size_t>(in.gcount());
                        return static_cast<std::size_t>(in.gcount());
                    },
                    sent_path, 0600, [&](std::uint64_t sent) { progress.update(done + sent); });
            }
        } catch (const ShipFailure&) {
            s.run({"rm", "-f", sent_path}, seconds(30));
            throw;
        } catch (const std::exception& e) {
            try {
                s.run({"rm", "-f", sent_path}, seconds(30));
            } catch (...) {
            }
            throw ShipFailure("upload", fmt::format("sending {} failed: {}", f->name, e.what()));
        }
        auto r = run_on(site, in_bash(node_scripts::store_upload(*f, incoming, sent_path, zstd)),
                        {.timeout = std::chrono::minutes(10)});
        if (r.status != 0)
            throw ShipFailure("upload",
                              fmt::format("{} could not be stored on the node (exit status {})",
                                          f->name, r.status),
                              tail(r));
        done += f->size;
        {
            std::lock_guard lk(m_);
            sent_ += f->size;
            wire_ += wire;
        }
        progress.update(done, true);
    }
}

bool PoolShipment::ensure_server(Holder& h) {
    std::lock_guard lk(h.server_m);
    if (h.server_started) return true;
    if (h.server_failed) return false;
    try {
        h.token = random_hex(64);
        const auto& run = h.site.run_dir;
        const auto exe = h.prog_dir + "/" + manifest_.program().name;
        // The server serves only this pool's files (the list after the token on stdin), listens
        // only on the address the pool's peers use, counts only requests with the token as
        // activity, and ends with the pool: when its run directory goes (stop() or the node's
        // watchdog), or at the pool's hard timeout.
        std::string in = h.token + "\n";
        for (const auto& f : manifest_.files) in += f.sha256 + "\n";
        scripts::ScriptValues v("sky ship: starts the node's peer file server");
        v.word("run", run)
            .word("addr", h.site.peer_address)
            .number("life", std::max<long long>(60, h.site.lifetime.count()))
            .word("lib", h.prog_dir + "/lib")
            .word("exe", exe);
        auto r = run_on(h.site, in_bash(shipping_script(v, scripts::serve_sh())),
                        {.timeout = seconds(30), .stdin_data = in});
        int port = r.status == 0 ? std::atoi(r.out.c_str()) : 0;
        if (port <= 0 || port > 65535) {
            h.server_failed = true;
            return false;
        }
        h.port = static_cast<std::uint16_t>(port);
        h.server_started = true;
        return true;
    } catch (const std::exception&) {
        h.server_failed = true;
        return false;
    }
}

std::vector<std::string> PoolShipment::fetch_from(Holder& from, const NodeSite& site,
                                                  const std::vector<std::string>& missing,
                                                  const std::function<void(Event)>& emit) {
    std::uint64_t total = 0;
    std::string in = from.token + "\n";
    for (auto& h : missing)
        for (auto& f : manifest_.files)
            if (f.sha256 == h) {
                in += fmt::format("{} {}\n", h, f.size);
                total += f.size;
                break;
            }
    ProgressEmitter progress(emit, site.instance_id, "fetch", total);
    progress.update(0, true);
    std::uint64_t done = 0;
    node::RunOptions eo;
    eo.stdin_data = in;
    eo.timeout = std::chrono::minutes(30);
    std::set<std::string> got;
    eo.on_stdout = [&](std::string_view line) {
        if (line.rfind("got ", 0) != 0) return;
        std::istringstream is{std::string(line.substr(4))};
        std::string h;
        std::uint64_t size = 0;
        is >> h >> size;
        got.insert(h);
        done += size;
        progress.update(done, true);
    };
    // fetch.sh receives through bash's /dev/tcp (this node cannot run the program yet), the
    // token in the transfer's environment, at most the manifest's size of each file, and only
    // what hashes to the name asked for enters the store.
    scripts::ScriptValues v("sky ship: fetches files from a peer node's file server");
    v.word("addr", from.site.peer_address).number("port", from.port);
    auto r = run_on(site, in_bash(shipping_script(v, scripts::fetch_sh())), eo);
    std::vector<std::string> failed;
    for (auto& h : missing)
        if (!got.count(h)) failed.push_back(h);
    (void)r;
    return failed;
}

std::string PoolShipment::compose(const NodeSite& site) {
    // The program directory: hard links into the store (copies where links are refused), made
    // in a private directory and renamed into place, so nobody sees half of it.
    std::string in;
    for (auto& f : manifest_.files) in += f.sha256 + "\t" + f.name + "\n";
    const auto prog = program_dir(site.home, manifest_);
    scripts::ScriptValues v("sky ship: assembles the program directory");
    v.word("prog", prog);
    auto r = run_on(site, in_bash(shipping_script(v, scripts::compose_sh())),
                    {.timeout = seconds(120), .stdin_data = in});
    if (r.status != 0)
        throw ShipFailure(
            "upload",
            fmt::format("could not assemble the program directory {} (exit status {})", prog,
                        r.status),
            tail(r));
    return prog;
}

void PoolShipment::add_holder(const NodeSite& site, const std::string& prog_dir) {
    auto h = std::make_unique<Holder>();
    h->site = site;
    h->prog_dir = prog_dir;
    std::lock_guard lk(m_);
    holders_.push_back(std::move(h));
    cv_.notify_all();
}

std::string PoolShipment::ship(const NodeSite& site, const std::function<void(Event)>& emit) {
    for (auto& f : manifest_.files)
        if (f.name.find_first_of("\t\n") != std::string::npos ||
            f.source.string().find_first_of("\t\n") != std::string::npos)
            throw ShipFailure("upload", "cannot ship a file whose name has a tab or newline: " +
                                            f.source.string());
    bool complete = false, zstd = false;
    auto missing = inventory(site, complete, zstd);
    if (complete || missing.empty()) {
        emit(BootstrapProgress{site.instance_id, "cached"});
        auto prog = compose(site);
        if (site.peers) add_holder(site, prog);
        return prog;
    }
    if (!site.peers) {
        // No network of its own to share: the client sends what this node lacks.
        upload_from_client(site, missing, zstd, emit);
        return compose(site);
    }
    // Peers first: a node of this pool that has everything sends what this one lacks. Each
    // peer is tried once; the client sends whatever is still missing after that.
    std::set<Holder*> tried;
    for (int round = 0; round < 64; ++round) {
        Holder* src = nullptr;
        bool seed = false;
        {
            std::unique_lock lk(m_);
            auto deadline = std::chrono::steady_clock::now() + std::chrono::hours(1);
            for (;;) {
                Holder* best = nullptr;
                for (auto& h : holders_)
                    if (!h->gone && !h->server_failed && !tried.count(h.get()) &&
                        h->site.node != site.node && (!best || h->users < best->users))
                        best = h.get();
                if (best) {
                    src = best;
                    ++src->users;
                    break;
                }
                if (!seeding_) {
                    seeding_ = true;
                    seed = true;
                    break;
                }
                // Another node is receiving from the client: wait for it to finish.
                if (cv_.wait_until(lk, deadline) == std::cv_status::timeout)
                    throw ShipFailure("upload", "timed out waiting for another node's upload");
            }
        }
        if (seed) {
            try {
                upload_from_client(site, missing, zstd, emit);
                auto prog = compose(site);
                {
                    std::lock_guard lk(m_);
                    seeding_ = false;
                }
                add_holder(site, prog);
                return prog;
            } catch (...) {
                std::lock_guard lk(m_);
                seeding_ = false;
                cv_.notify_all();
                throw;
            }
        }
        tried.insert(src);
        std::vector<std::string> still = missing;
        if (ensure_server(*src)) {
            try {
                still = fetch_from(*src, site, missing, emit);
            } catch (...) {
                // Peer transfer is an optimisation: any failure falls back below.
            }
        }
        {
            std::lock_guard lk(m_);
            --src->users;
            cv_.notify_all();
        }
        if (still.empty()) {
            auto prog = compose(site);
            add_holder(site, prog);
            return prog;
        }
        // What this peer could not send comes from another peer, or else from the client
        // (the loop becomes the seed once no untried peer is left).
        missing = still;
    }
    throw ShipFailure("upload", "could not gather the program's files on the node");
}

void PoolShipment::forget(int node) noexcept {
    std::unique_lock lk(m_);
    for (auto& h : holders_)
        if (h->site.node == node) h->gone = true;
    cv_.wait_for(lk, std::chrono::seconds(60), [&] {
        for (auto& h : holders_)
            if (h->site.node == node && h->users > 0) return false;
        return true;
    });
}

}  // namespace sky::detail::ship
