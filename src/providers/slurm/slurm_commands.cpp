#include "providers/slurm/slurm_commands.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <utility>

#include "util/encoding.hpp"
#include "util/shell.hpp"
#include "util/text.hpp"

namespace sky::detail::slurm {

namespace {

// Slurm's job states: short code, long name, phase (squeue(1) "JOB STATE CODES").
struct StateRow {
    std::string_view code, name;
    JobPhase phase;
};
constexpr std::array<StateRow, 24> kStates{{
    {"PD", "PENDING", JobPhase::pending},       {"CF", "CONFIGURING", JobPhase::pending},
    {"RQ", "REQUEUED", JobPhase::pending},      {"RH", "REQUEUE_HOLD", JobPhase::pending},
    {"RF", "REQUEUE_FED", JobPhase::pending},   {"RD", "RESV_DEL_HOLD", JobPhase::pending},
    {"R", "RUNNING", JobPhase::running},        {"RS", "RESIZING", JobPhase::running},
    {"S", "SUSPENDED", JobPhase::suspended},    {"ST", "STOPPED", JobPhase::suspended},
    {"CG", "COMPLETING", JobPhase::completing}, {"SI", "SIGNALING", JobPhase::completing},
    {"SO", "STAGE_OUT", JobPhase::completing},  {"CD", "COMPLETED", JobPhase::ended},
    {"CA", "CANCELLED", JobPhase::ended},       {"F", "FAILED", JobPhase::ended},
    {"TO", "TIMEOUT", JobPhase::ended},         {"NF", "NODE_FAIL", JobPhase::ended},
    {"PR", "PREEMPTED", JobPhase::ended},       {"BF", "BOOT_FAIL", JobPhase::ended},
    {"DL", "DEADLINE", JobPhase::ended},        {"OOM", "OUT_OF_MEMORY", JobPhase::ended},
    {"RV", "REVOKED", JobPhase::ended},         {"SE", "SPECIAL_EXIT", JobPhase::ended},
}};

const StateRow* find_state(std::string_view s) {
    const std::string up = to_upper(trim(s));
    for (const auto& r : kStates)
        if (r.code == up || r.name == up) return &r;
    return nullptr;
}

std::vector<std::string_view> split(std::string_view s, char sep) {
    std::vector<std::string_view> out;
    std::size_t start = 0;
    for (std::size_t i = 0; i <= s.size(); ++i)
        if (i == s.size() || s[i] == sep) {
            out.push_back(s.substr(start, i - start));
            start = i + 1;
        }
    return out;
}

// Splits at `sep` outside brackets and parentheses ("gpu:h100:4(S:0,1),nic:1", "c[0,1],d").
std::vector<std::string_view> split_top(std::string_view s, char sep) {
    std::vector<std::string_view> out;
    int depth = 0;
    std::size_t start = 0;
    for (std::size_t i = 0; i <= s.size(); ++i) {
        if (i < s.size() && (s[i] == '[' || s[i] == '(')) ++depth;
        if (i < s.size() && (s[i] == ']' || s[i] == ')')) --depth;
        if (i == s.size() || (s[i] == sep && depth == 0)) {
            out.push_back(s.substr(start, i - start));
            start = i + 1;
        }
    }
    return out;
}

template <class F>
void for_each_line(std::string_view text, F&& f) {
    for (auto line : split(text, '\n')) {
        line = trim(line);
        if (!line.empty()) f(line);
    }
}

bool all_digits(std::string_view s) {
    return !s.empty() &&
           std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isdigit(c) != 0; });
}

// The value of `key=` in scontrol's one-line output ("NodeName=c0 Arch=x86_64 ...").
std::string field(std::string_view line, std::string_view key) {
    const std::string k = std::string(key) + "=";
    std::size_t at = 0;
    while ((at = line.find(k, at)) != std::string_view::npos) {
        if (at == 0 || line[at - 1] == ' ') {
            auto v = line.substr(at + k.size());
            return std::string(v.substr(0, v.find(' ')));
        }
        at += k.size();
    }
    return {};
}

JobState make_state(std::string id, std::string state_text) {
    JobState j;
    j.id = std::move(id);
    const auto words = split(trim(state_text), ' ');
    // sacct: "CANCELLED by 1000"
    if (words.size() >= 3 && words[1] == "by") j.cancelled_by = std::string(words[2]);
    j.state = long_state(words.empty() ? std::string_view() : words.front());
    j.phase = phase_of(j.state);
    return j;
}

}  // namespace

std::string long_state(std::string_view code_or_name) {
    if (const auto* r = find_state(code_or_name)) return std::string(r->name);
    return to_upper(trim(code_or_name));
}

JobPhase phase_of(std::string_view state) {
    const auto* r = find_state(state);
    return r ? r->phase : JobPhase::unknown;
}

std::vector<std::string> squeue_argv(const std::vector<std::string>& job_ids) {
    return {"squeue", "--noheader", "--states=all", "--jobs=" + join(job_ids, ","),
            "--format=%i|%j|%T|%r|%N"};
}

std::vector<std::string> squeue_user_argv(const std::vector<std::string>& names) {
    std::vector<std::string> a{"squeue", "--noheader", "--format=%i|%j|%T|%r|%N"};
    // The user comes from the login's own shell: `--user` takes the name id -un prints there.
    if (!names.empty()) a.push_back("--name=" + join(names, ","));
    return a;
}

std::vector<JobState> parse_squeue(std::string_view text) {
    std::vector<JobState> out;
    for_each_line(text, [&](std::string_view line) {
        const auto f = split(line, '|');
        if (f.size() < 5 || !all_digits(split(f[0], '_')[0])) return;
        // A job name may hold '|': the fields around it are fixed.
        JobState j = make_state(std::string(f[0]), std::string(f[f.size() - 3]));
        std::string name;
        for (std::size_t i = 1; i + 3 < f.size(); ++i)
            name += (i > 1 ? "|" : "") + std::string(f[i]);
        j.name = name;
        j.reason = std::string(trim(f[f.size() - 2]));
        j.nodes = std::string(trim(f.back()));
        if (j.nodes == "(null)") j.nodes.clear();
        out.push_back(std::move(j));
    });
    return out;
}

std::vector<std::string> sacct_argv(const std::vector<std::string>& job_ids) {
    return {"sacct",
            "--noheader",
            "--parsable2",
            "--allocations",
            "--jobs=" + join(job_ids, ","),
            "--format=JobID,State,Reason,NodeList,ExitCode"};
}

std::vector<JobState> parse_sacct(std::string_view text) {
    std::vector<JobState> out;
    for_each_line(text, [&](std::string_view line) {
        const auto f = split(line, '|');
        if (f.size() < 5) return;
        const std::string_view id = trim(f[0]);
        // Steps ("12.batch", "12.0") are not the job.
        if (id.find('.') != std::string_view::npos || !all_digits(split(id, '_')[0])) return;
        JobState j = make_state(std::string(id), std::string(f[1]));
        j.reason = std::string(trim(f[2]));
        j.nodes = std::string(trim(f[3]));
        if (j.nodes == "None assigned" || j.nodes == "(null)") j.nodes.clear();
        j.exit_code = std::string(trim(f[4]));
        out.push_back(std::move(j));
    });
    return out;
}

std::vector<std::string> scancel_argv(const std::vector<std::string>& job_ids) {
    std::vector<std::string> a{"scancel"};
    a.insert(a.end(), job_ids.begin(), job_ids.end());
    return a;
}

std::vector<std::string> scancel_name_argv(const std::string& job_name, const std::string& user) {
    return {"scancel", "--name=" + job_name, "--user=" + user};
}

std::vector<std::string> sbatch_argv(const BatchRequest& r) {
    std::vector<std::string> a{
        "sbatch", "--parsable", "--job-name=" + r.job_name, fmt::format("--nodes={}", r.nodes),
        "--ntasks-per-node=1", "--time=" + format_time_limit(r.time_limit),
        // A node failure ends the pool's job: requeued, it would come
        // back on other nodes without the pool's workers.
        "--no-requeue", "--chdir=/tmp", "--output=/dev/null", "--error=/dev/null",
        // The node launchers' notice (api.md §10a): ahead of the time limit, or of a preemption
        // where the cluster sends the job's signal then.
        fmt::format("--signal={}@{}", notice_signal_name, notice_lead(r.time_limit).count())};
    if (r.gres) a.push_back("--gres=" + *r.gres);
    if (r.min_cpus) a.push_back(fmt::format("--mincpus={}", *r.min_cpus));
    if (r.memory_mb) a.push_back(fmt::format("--mem={}M", *r.memory_mb));
    auto opt = [&](std::string_view name, const std::string& v) {
        if (!v.empty()) a.push_back(fmt::format("--{}={}", name, v));
    };
    opt("partition", r.partition);
    opt("account", r.account);
    opt("qos", r.qos);
    opt("constraint", r.constraint);
    opt("reservation", r.reservation);
    return a;
}

std::string batch_script(const std::string& pool_id) {
    return fmt::format(
        "#!/bin/bash\n"
        "# sky pool {}: this job holds the pool's nodes. sky starts its workers as job steps\n"
        "# beside this one (srun --overlap) and cancels the job when the pool ends.\n"
        "exec sleep infinity\n",
        pool_id);
}

std::chrono::seconds notice_lead(std::chrono::seconds time_limit) {
    const long long minutes = std::max<long long>(1, (time_limit.count() + 59) / 60);
    return std::chrono::seconds(std::min<long long>(minutes * 60 / 4, 120));
}

std::string parse_sbatch(std::string_view out) {
    // The last non-empty line: sbatch may print warnings before the id.
    std::string_view last;
    for_each_line(out, [&](std::string_view l) { last = l; });
    const std::string_view id = last.substr(0, last.find(';'));
    return all_digits(id) ? std::string(id) : std::string();
}

std::string format_time_limit(std::chrono::seconds limit) {
    const long long minutes = std::max<long long>(1, (limit.count() + 59) / 60);
    return fmt::format("{}-{:02}:{:02}:00", minutes / 1440, (minutes % 1440) / 60, minutes % 60);
}

std::vector<std::string> sinfo_gres_argv(const std::string& partition) {
    std::vector<std::string> a{"sinfo", "--noheader", "--format=%G"};
    if (!partition.empty()) a.push_back("--partition=" + partition);
    return a;
}

GresChoice choose_gres(const Accelerator& acc, std::string_view out, std::string_view partition) {
    struct Gpu {
        std::string type;  // empty: untyped
        std::string text;
    };
    std::vector<Gpu> gpus;
    for_each_line(out, [&](std::string_view line) {
        for (auto entry : split_top(line, ',')) {
            entry = trim(entry.substr(0, entry.find('(')));
            const auto parts = split(entry, ':');
            if (parts.empty() || parts[0] != "gpu") continue;
            Gpu g;
            g.text = std::string(entry);
            // "gpu:4", "gpu:h100:4", "gpu:h100" (a count of 1 may be left out)
            if (parts.size() == 3 || (parts.size() == 2 && !all_digits(parts[1])))
                g.type = std::string(parts[1]);
            gpus.push_back(std::move(g));
        }
    });
    const std::string where =
        partition.empty() ? std::string("the cluster") : fmt::format("partition {}", partition);
    const std::string declared = std::string(trim(out)).empty()
                                     ? std::string("nothing")
                                     : fmt::format("'{}'", std::string(trim(out)));
    if (gpus.empty())
        throw ProvisionError(
            fmt::format("slurm: the pool asks for {} but {} declares no GPUs (sinfo -o %G says {})",
                        acc.to_string(), where, declared));
    const int count = std::max(1, acc.count);
    GresChoice c;
    auto typed = [&](const std::string& type, std::string_view how) {
        c.gres = fmt::format("gpu:{}:{}", type, count);
        c.typed = true;
        c.note = fmt::format("--gres={}: {} declares the GPU type {}, {} {}", c.gres, where, type,
                             how, acc.name);
        return c;
    };
    for (const auto& g : gpus)
        if (!g.type.empty() && iequals(g.type, acc.name)) return typed(g.type, "which is");
    const std::string want = to_lower(acc.name);
    for (const auto& g : gpus) {
        std::string words = to_lower(g.type);
        std::replace_if(
            words.begin(), words.end(), [](char ch) { return ch == '-' || ch == '.'; }, '_');
        for (auto w : split(words, '_'))
            if (!w.empty() && w == want) return typed(g.type, "whose name holds");
    }
    std::vector<std::string> types;
    for (const auto& g : gpus)
        if (!g.type.empty() && std::find(types.begin(), types.end(), g.type) == types.end())
            types.push_back(g.type);
    c.gres = fmt::format("gpu:{}", count);
    c.note = types.empty()
                 ? fmt::format("--gres={}: {} declares its GPUs without a type", c.gres, where)
                 : fmt::format("--gres={}: no GPU type of {} is {} (it declares {}): any GPU",
                               c.gres, where, acc.name, join(types, ", "));
    return c;
}

std::vector<std::string> expand_hostlist(std::string_view list) {
    constexpr std::size_t limit = 65536;
    std::vector<std::string> out;
    auto bad = [&](const std::string& why) {
        throw Error(fmt::format("slurm: cannot read the host list '{}': {}", list, why));
    };
    for (auto item : split_top(trim(list), ',')) {
        item = trim(item);
        if (item.empty()) continue;
        std::vector<std::string> names{""};
        std::size_t i = 0;
        while (i < item.size()) {
            if (item[i] == ']') bad("']' without '['");
            if (item[i] != '[') {
                const auto next = item.find('[', i);
                const auto lit = item.substr(i, next == std::string_view::npos ? next : next - i);
                if (lit.find(']') != std::string_view::npos) bad("']' without '['");
                for (auto& n : names) n += lit;
                i = next == std::string_view::npos ? item.size() : next;
                continue;
            }
            const auto close = item.find(']', i);
            if (close == std::string_view::npos) bad("'[' without ']'");
            std::vector<std::string> values;
            for (auto range : split(item.substr(i + 1, close - i - 1), ',')) {
                const auto dash = range.find('-');
                const auto lo_s = range.substr(0, dash);
                const auto hi_s = dash == std::string_view::npos ? lo_s : range.substr(dash + 1);
                if (!all_digits(lo_s) || !all_digits(hi_s) || lo_s.size() > 9 || hi_s.size() > 9)
                    bad(fmt::format("'{}' is not a number or a range", range));
                long lo = 0, hi = 0;
                std::from_chars(lo_s.data(), lo_s.data() + lo_s.size(), lo);
                std::from_chars(hi_s.data(), hi_s.data() + hi_s.size(), hi);
                if (hi < lo) bad(fmt::format("the range '{}' runs backwards", range));
                // Counted before anything is built: a list of many ranges, or of brackets
                // whose product is large, must not allocate its way to the limit.
                if (static_cast<std::size_t>(hi - lo) >= limit - values.size())
                    bad("too many hosts");
                for (long v = lo; v <= hi; ++v)
                    values.push_back(fmt::format("{:0{}}", v, lo_s.size()));
            }
            if (!values.empty() && names.size() > (limit - out.size()) / values.size())
                bad("too many hosts");
            std::vector<std::string> next;
            next.reserve(names.size() * values.size());
            for (const auto& n : names)
                for (const auto& v : values) next.push_back(n + v);
            names = std::move(next);
            i = close + 1;
        }
        out.insert(out.end(), names.begin(), names.end());
        if (out.size() > limit) bad("too many hosts");
    }
    return out;
}

std::vector<std::string> scontrol_nodes_argv(const std::vector<std::string>& names) {
    return {"scontrol", "--oneliner", "show", "node", join(names, ",")};
}

std::vector<NodeInfo> parse_scontrol_nodes(std::string_view text) {
    std::vector<NodeInfo> out;
    for_each_line(text, [&](std::string_view line) {
        NodeInfo n;
        n.name = field(line, "NodeName");
        if (n.name.empty()) return;
        n.address = field(line, "NodeAddr");
        n.hostname = field(line, "NodeHostName");
        if (n.address.empty()) n.address = n.hostname.empty() ? n.name : n.hostname;
        out.push_back(std::move(n));
    });
    return out;
}

std::vector<std::string> srun_argv(const std::string& job_id, const std::vector<std::string>& nodes,
                                   const std::vector<std::string>& command) {
    std::vector<std::string> a{"srun",
                               "--jobid=" + job_id,
                               "--overlap",
                               fmt::format("--nodes={}", nodes.size()),
                               fmt::format("--ntasks={}", nodes.size()),
                               "--ntasks-per-node=1",
                               "--nodelist=" + join(nodes, ","),
                               "--chdir=/tmp"};
    a.insert(a.end(), command.begin(), command.end());
    return a;
}

std::vector<std::string> sbcast_argv(const std::string& job_id, const std::string& source,
                                     const std::string& destination) {
    return {"sbcast", "--jobid=" + job_id, "--force", "--preserve", source, destination};
}

namespace {

struct ReasonRow {
    std::string_view reason, words;
    bool never_clears;
};
// squeue(1) "JOB REASON CODES", the common ones.
constexpr std::array<ReasonRow, 36> kReasons{{
    {"None", "the scheduler has not looked at it yet", false},
    {"Resources", "waiting for nodes with the requested resources to become free", false},
    {"Priority", "jobs of higher priority are ahead of it in the queue", false},
    {"Dependency", "waiting for a job it depends on to finish", false},
    {"DependencyNeverSatisfied", "a job it depends on can never satisfy the dependency", true},
    {"BeginTime", "its earliest start time has not come yet", false},
    {"JobHeldUser", "held by its user (scontrol release lets it go)", false},
    {"JobHeldAdmin", "held by an administrator", false},
    {"launch failed requeued held", "its launch failed and Slurm held it for an administrator",
     false},
    {"ReqNodeNotAvail", "a node it needs is unavailable (down, drained or reserved)", false},
    {"NodeDown", "a node it needs is down", false},
    {"PartitionDown", "its partition is down", false},
    {"PartitionInactive", "its partition is inactive", false},
    {"PartitionNodeLimit", "it asks for more or fewer nodes than its partition allows", true},
    {"PartitionTimeLimit", "its time limit is longer than its partition allows", true},
    {"PartitionConfig", "its partition cannot run it as configured", true},
    {"Reservation", "waiting for its reservation to become usable", false},
    {"Licenses", "waiting for a license", false},
    {"Cleaning", "a node of an earlier job is still being cleaned up", false},
    {"Prolog", "its prolog is running", false},
    {"BadConstraints", "no node can satisfy its constraints", true},
    {"InvalidAccount", "its account is invalid", true},
    {"InvalidQOS", "its QOS is invalid", true},
    {"QOSNotAllowed", "its QOS is not allowed in this partition", true},
    {"AccountNotAllowed", "its account is not allowed in this partition", true},
    {"QOSMaxJobsPerUserLimit", "its user has as many jobs running as the QOS allows", false},
    {"QOSMaxSubmitJobPerUserLimit", "its user has as many jobs queued as the QOS allows", false},
    {"AssocMaxJobsLimit", "its account has as many jobs running as allowed", false},
    {"AssocGrpJobsLimit", "its account's group has as many jobs running as allowed", false},
    {"QOSMaxWallDurationPerJobLimit", "its time limit is longer than its QOS allows", true},
    {"AssocMaxWallDurationPerJobLimit", "its time limit is longer than its account allows", true},
    {"QOSMaxNodePerJobLimit", "it asks for more nodes than its QOS allows a job", true},
    {"AssocMaxNodesPerJobLimit", "it asks for more nodes than its account allows a job", true},
    {"QOSMaxGRESPerJob", "it asks for more GPUs than its QOS allows a job", true},
    {"QOSMaxCpuPerJobLimit", "it asks for more CPUs than its QOS allows a job", true},
    {"FrontEndDown", "no front end node is available", false},
}};

// "ReqNodeNotAvail, UnavailableNodes:c1" → "ReqNodeNotAvail"
std::string_view reason_key(std::string_view reason) {
    reason = trim(reason);
    for (const auto& r : kReasons)
        if (reason == r.reason) return reason;
    return reason.substr(0, reason.find_first_of(", ("));
}

}  // namespace

std::string explain_reason(std::string_view reason) {
    const auto key = reason_key(reason);
    for (const auto& r : kReasons)
        if (key == r.reason) return std::string(r.words);
    // The families of limits: a group limit clears when other jobs end, a per-job one never.
    if (key.rfind("QOSGrp", 0) == 0) return "a group limit of its QOS is reached";
    if (key.rfind("AssocGrp", 0) == 0) return "a group limit of its account is reached";
    if (key.find("PerJob") != std::string_view::npos)
        return "it asks for more than a limit allows a job";
    return std::string(trim(reason));
}

bool reason_never_clears(std::string_view reason) {
    const auto key = reason_key(reason);
    for (const auto& r : kReasons)
        if (key == r.reason) return r.never_clears;
    return (key.rfind("QOSMax", 0) == 0 || key.rfind("AssocMax", 0) == 0) &&
           key.find("PerJob") != std::string_view::npos;
}

std::string end_words(const JobState& j) {
    std::string why;
    const std::string& s = j.state;
    if (s == "COMPLETED")
        why = "its batch step ended";
    else if (s == "CANCELLED")
        why = j.cancelled_by.empty()
                  ? std::string("cancelled (scancel by its user or an administrator)")
                  : fmt::format("cancelled by uid {}", j.cancelled_by);
    else if (s == "FAILED")
        why = "its batch step failed";
    else if (s == "TIMEOUT")
        why = "it reached its time limit";
    else if (s == "NODE_FAIL")
        why = "one of its nodes failed";
    else if (s == "PREEMPTED")
        why = "preempted for a job of higher priority";
    else if (s == "BOOT_FAIL")
        why = "a node failed to boot";
    else if (s == "DEADLINE")
        why = "its deadline passed";
    else if (s == "OUT_OF_MEMORY")
        why = "it ran out of memory";
    else if (j.phase == JobPhase::completing)
        why = "it is ending, its processes are being killed";
    else if (j.phase == JobPhase::suspended)
        why = "it is suspended";
    std::string text = fmt::format("the Slurm job {} {}: {}", j.id,
                                   j.phase == JobPhase::ended ? "ended" : "is no longer running",
                                   s.empty() ? std::string("unknown state") : s);
    if (!why.empty()) text += " (" + why + ")";
    if (!j.reason.empty() && j.reason != "None") text += "; reason: " + j.reason;
    if (!j.exit_code.empty() && j.exit_code != "0:0") text += "; exit code " + j.exit_code;
    return text;
}

NodeLostError::Reason loss_kind(const JobState& j) {
    return j.state == "PREEMPTED" ? NodeLostError::Reason::preempted
                                  : NodeLostError::Reason::unreachable;
}

std::string LoginAddress::to_string() const {
    const bool v6 = host.find(':') != std::string::npos;
    return fmt::format("{}{}{}{}{}:{}", user, user.empty() ? "" : "@", v6 ? "[" : "", host,
                       v6 ? "]" : "", port);
}

LoginAddress parse_login(std::string_view login) {
    auto bad = [&](const std::string& why) -> LoginAddress {
        throw ConfigError(fmt::format("sky::Slurm: login '{}' {}", login, why));
    };
    LoginAddress a;
    std::string_view rest = trim(login);
    if (rest.empty()) bad("is empty");
    if (rest.find_first_of(" \t\n/") != std::string_view::npos)
        bad("is not user@host[:port] (it holds a space or a '/')");
    if (const auto at = rest.rfind('@'); at != std::string_view::npos) {
        a.user = std::string(rest.substr(0, at));
        if (a.user.empty()) bad("has an empty user before '@'");
        rest = rest.substr(at + 1);
    }
    std::string_view port;
    bool has_port = false;
    if (!rest.empty() && rest.front() == '[') {
        const auto close = rest.find(']');
        if (close == std::string_view::npos) bad("has '[' without ']'");
        a.host = std::string(rest.substr(1, close - 1));
        rest = rest.substr(close + 1);
        if (!rest.empty()) {
            if (rest.front() != ':') bad("has text after ']' that is not ':port'");
            port = rest.substr(1);
            has_port = true;
        }
    } else {
        const auto colon = rest.find(':');
        if (colon != std::string_view::npos && rest.find(':', colon + 1) != std::string_view::npos)
            bad("has an IPv6 address without brackets ([addr]:port)");
        a.host = std::string(rest.substr(0, colon));
        if (colon != std::string_view::npos) {
            port = rest.substr(colon + 1);
            has_port = true;
        }
    }
    if (a.host.empty()) bad("has no host");
    if (has_port) {
        if (!all_digits(port) || port.size() > 5) bad("has a port that is not a number");
        a.port = std::stoi(std::string(port));
        if (a.port < 1 || a.port > 65535) bad("has a port outside [1, 65535]");
    }
    return a;
}

std::string JobRef::to_string() const {
    std::string s = fmt::format("slurm:{}:{}@{}", job_id.empty() ? "*" : job_id, job_name,
                                login.empty() ? "local" : login);
    if (!identity_file.empty()) s += ";key=" + url_encode(identity_file, true);
    if (!known_hosts.empty()) s += ";known_hosts=" + url_encode(known_hosts, true);
    return s;
}

std::optional<JobRef> JobRef::parse(std::string_view text) {
    if (text.rfind("slurm:", 0) != 0) return std::nullopt;
    text.remove_prefix(6);
    const auto colon = text.find(':');
    const auto at = text.find('@');
    if (colon == std::string_view::npos || at == std::string_view::npos || at < colon)
        return std::nullopt;
    JobRef r;
    const auto id = text.substr(0, colon);
    if (id != "*") {
        if (!all_digits(id)) return std::nullopt;
        r.job_id = std::string(id);
    }
    r.job_name = std::string(text.substr(colon + 1, at - colon - 1));
    if (r.job_name.empty()) return std::nullopt;
    const auto parts = split(text.substr(at + 1), ';');
    r.login = std::string(parts.front());
    if (r.login == "local") r.login.clear();
    if (parts.front().empty()) return std::nullopt;
    for (std::size_t i = 1; i < parts.size(); ++i) {
        const auto eq = parts[i].find('=');
        if (eq == std::string_view::npos) return std::nullopt;
        const auto k = parts[i].substr(0, eq);
        const std::string v = url_decode(parts[i].substr(eq + 1));
        if (k == "key")
            r.identity_file = v;
        else if (k == "known_hosts")
            r.known_hosts = v;
        else
            return std::nullopt;
    }
    return r;
}

}  // namespace sky::detail::slurm
