#pragma once
// sky::Simulated's machine records: each machine is also written to
// <sky home>/simulated/<id>.json (the client's and the worker's process identities), so that
// `sky ls` and `sky gc` in another process see it: a machine is running while its worker process
// (or, before it has one, its client) runs.
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sky/cloud.hpp"

namespace sky::detail::simulated {

inline constexpr const char* kProvider = "simulated";
/// The offers are AWS's catalog rows of this region, relabelled: real instance types and prices.
inline constexpr const char* kOffersFrom = "aws";
inline constexpr const char* kRegion = "us-east-1";

/// One machine, as other processes read it.
struct Record {
    std::string id, pool, instance_type;
    int node = 0;
    bool spot = false;
    long owner_pid = 0;
    std::string owner_start;
    long worker_pid = 0;
    std::string worker_start;
};

/// The directory of the records (empty without a sky home: records are this process's alone).
std::filesystem::path records_dir();
/// Ids name files: only what sky makes ("sim-<pool id>-<hex>") is looked up.
bool safe_id(std::string_view id);
void write_record(const Record& r) noexcept;
void remove_record(const std::string& id) noexcept;
/// A record is believed only in a private directory, from a file of this user that nobody else
/// could write (never through a symbolic link): it tells `sky gc` which process to SIGKILL.
std::optional<Record> read_record(const std::filesystem::path& file) noexcept;
std::optional<Record> find_record(const std::string& id);
std::vector<Record> all_records();
/// A machine runs while its worker does; before it has one, while its client does.
bool record_alive(const Record& r);
CloudInstance instance_of(const Record& r, bool alive);
CloudInstance describe_record(const std::string& id);
void terminate_record(const std::string& id);

}  // namespace sky::detail::simulated
