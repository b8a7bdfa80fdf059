// sky::Slurm's words with Slurm: the command lines sky runs, and the parsers of what squeue,
// sacct, sinfo, scontrol and sbatch print, including the odd states (CG, CF, PD with each
// common reason), GRES matching, host lists, and the ledger's job reference.
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "providers/slurm/jobs.hpp"
#include "providers/slurm/slurm_commands.hpp"
#include "sky/errors.hpp"
#include "sky/pool.hpp"
#include "sky/providers.hpp"

using namespace sky::detail::slurm;
using namespace std::chrono_literals;
using Strings = std::vector<std::string>;

TEST_CASE("slurm: sbatch's command line carries the pool's request", "[slurm]") {
    BatchRequest r;
    r.job_name = "sky-abc123";
    r.nodes = 4;
    r.gres = "gpu:h100:8";
    r.time_limit = 2h;
    r.partition = "gpu";
    r.account = "proj42";
    const auto a = sbatch_argv(r);
    const Strings want{"sbatch",
                       "--parsable",
                       "--job-name=sky-abc123",
                       "--nodes=4",
                       "--ntasks-per-node=1",
                       "--time=0-02:00:00",
                       "--no-requeue",
                       "--chdir=/tmp",
                       "--output=/dev/null",
                       "--error=/dev/null",
                       "--signal=USR1@120",
                       "--gres=gpu:h100:8",
                       "--partition=gpu",
                       "--account=proj42"};
    CHECK(a == want);
    // Unset options are not passed; set ones as given.
    BatchRequest m;
    m.job_name = "sky-x";
    m.qos = "high";
    m.constraint = "a100&ib";
    m.reservation = "maint";
    m.min_cpus = 16;
    m.memory_mb = 32768;
    const auto b = sbatch_argv(m);
    for (const char* w : {"--qos=high", "--constraint=a100&ib", "--reservation=maint",
                          "--mincpus=16", "--mem=32768M"})
        CHECK(std::find(b.begin(), b.end(), std::string(w)) != b.end());
    for (const auto& w : b) {
        CHECK(w.rfind("--gres", 0) != 0);
        CHECK(w.rfind("--partition", 0) != 0);
        CHECK(w.rfind("--account", 0) != 0);
    }
    const std::string script = batch_script("abc123");
    CHECK(script.rfind("#!/bin/bash\n", 0) == 0);
    CHECK(script.find("exec sleep infinity") != std::string::npos);
}

TEST_CASE("slurm: the steps' notice signal comes a quarter of the time limit ahead, at most 2 min",
          "[slurm]") {
    CHECK(notice_lead(2h) == 120s);
    CHECK(notice_lead(8min) == 120s);
    CHECK(notice_lead(2min) == 30s);
    CHECK(notice_lead(61s) == 30s);  // --time rounds it up to 2 minutes
    CHECK(notice_lead(1s) == 15s);
    BatchRequest r;
    r.time_limit = 2min;
    const auto a = sbatch_argv(r);
    CHECK(std::find(a.begin(), a.end(), std::string("--signal=USR1@30")) != a.end());
}

TEST_CASE("slurm: --time rounds up to whole minutes, at least one", "[slurm]") {
    CHECK(format_time_limit(3600s) == "0-01:00:00");
    CHECK(format_time_limit(1s) == "0-00:01:00");
    CHECK(format_time_limit(0s) == "0-00:01:00");
    CHECK(format_time_limit(61s) == "0-00:02:00");
    CHECK(format_time_limit(std::chrono::hours(49) + 30min) == "2-01:30:00");
}

TEST_CASE("slurm: sbatch --parsable output gives the job id", "[slurm]") {
    CHECK(parse_sbatch("12\n") == "12");
    CHECK(parse_sbatch("4711;cluster-a\n") == "4711");
    CHECK(parse_sbatch("sbatch: warning: something\n99\n") == "99");
    CHECK(parse_sbatch("") == "");
    CHECK(parse_sbatch("sbatch: error: Batch job submission failed\n") == "");
}

TEST_CASE("slurm: the other command lines", "[slurm]") {
    CHECK(squeue_argv({"12", "13"}) == Strings{"squeue", "--noheader", "--states=all",
                                               "--jobs=12,13", "--format=%i|%j|%T|%r|%N"});
    CHECK(sacct_argv({"12"}) == Strings{"sacct", "--noheader", "--parsable2", "--allocations",
                                        "--jobs=12",
                                        "--format=JobID,State,Reason,NodeList,ExitCode"});
    CHECK(scancel_argv({"12"}) == Strings{"scancel", "12"});
    CHECK(scancel_name_argv("sky-p", "alice") ==
          Strings{"scancel", "--name=sky-p", "--user=alice"});
    CHECK(sinfo_gres_argv("gpu") ==
          Strings{"sinfo", "--noheader", "--format=%G", "--partition=gpu"});
    CHECK(sinfo_gres_argv("") == Strings{"sinfo", "--noheader", "--format=%G"});
    CHECK(scontrol_nodes_argv({"c0", "c1"}) ==
          Strings{"scontrol", "--oneliner", "show", "node", "c0,c1"});
    CHECK(srun_argv("12", {"c1"}, {"bash", "-c", "true"}) ==
          Strings{"srun", "--jobid=12", "--overlap", "--nodes=1", "--ntasks=1",
                  "--ntasks-per-node=1", "--nodelist=c1", "--chdir=/tmp", "bash", "-c", "true"});
    CHECK(sbcast_argv("12", "/a", "/tmp/b") ==
          Strings{"sbcast", "--jobid=12", "--force", "--preserve", "/a", "/tmp/b"});
    // One shell line (the watchdog's scancel, a detached srun): every word quoted, quotes too.
    CHECK(shell_command({"scancel", "--name=sky-p", "--user=o'neil"}) ==
          "'scancel' '--name=sky-p' '--user=o'\\''neil'");
    CHECK(shell_command({}).empty());
}

TEST_CASE("slurm: squeue lines, every state code and odd ones", "[slurm]") {
    const auto jobs = parse_squeue(
        "12|sky-a|RUNNING|None|c[0-1]\n"
        "13|sky-b|PENDING|Resources|\n"
        "14|sky-c|COMPLETING|None|c0\n"
        "15|sky-d|CONFIGURING|None|c[2-3]\n"
        "16|odd|name|CANCELLED|None|(null)\n"
        "garbage line\n"
        "\n");
    REQUIRE(jobs.size() == 5);
    CHECK(jobs[0].id == "12");
    CHECK(jobs[0].name == "sky-a");
    CHECK(jobs[0].phase == JobPhase::running);
    CHECK(jobs[0].nodes == "c[0-1]");
    CHECK(jobs[1].phase == JobPhase::pending);
    CHECK(jobs[1].reason == "Resources");
    CHECK(jobs[1].nodes.empty());
    // CG: the job is ending (its processes are being killed); it is not running any more.
    CHECK(jobs[2].phase == JobPhase::completing);
    // CF: nodes are allocated but booting; steps cannot start yet.
    CHECK(jobs[3].phase == JobPhase::pending);
    // A name with '|' keeps the fields around it.
    CHECK(jobs[4].name == "odd|name");
    CHECK(jobs[4].phase == JobPhase::ended);
    CHECK(jobs[4].nodes.empty());

    struct Row {
        const char *code, *name;
        JobPhase phase;
    };
    const Row rows[] = {
        {"PD", "PENDING", JobPhase::pending},      {"CF", "CONFIGURING", JobPhase::pending},
        {"RQ", "REQUEUED", JobPhase::pending},     {"RH", "REQUEUE_HOLD", JobPhase::pending},
        {"R", "RUNNING", JobPhase::running},       {"S", "SUSPENDED", JobPhase::suspended},
        {"ST", "STOPPED", JobPhase::suspended},    {"CG", "COMPLETING", JobPhase::completing},
        {"SI", "SIGNALING", JobPhase::completing}, {"SO", "STAGE_OUT", JobPhase::completing},
        {"CD", "COMPLETED", JobPhase::ended},      {"CA", "CANCELLED", JobPhase::ended},
        {"F", "FAILED", JobPhase::ended},          {"TO", "TIMEOUT", JobPhase::ended},
        {"NF", "NODE_FAIL", JobPhase::ended},      {"PR", "PREEMPTED", JobPhase::ended},
        {"BF", "BOOT_FAIL", JobPhase::ended},      {"DL", "DEADLINE", JobPhase::ended},
        {"OOM", "OUT_OF_MEMORY", JobPhase::ended},
    };
    for (const auto& r : rows) {
        INFO(r.code);
        CHECK(long_state(r.code) == r.name);
        CHECK(long_state(r.name) == r.name);
        CHECK(long_state(std::string(r.code) == "R" ? "r" : r.code) == r.name);
        CHECK(phase_of(r.code) == r.phase);
        CHECK(phase_of(r.name) == r.phase);
        // squeue's short form (%t) reads the same as the long one (%T).
        const auto j = parse_squeue(std::string("7|sky-x|") + r.code + "|None|c0\n");
        REQUIRE(j.size() == 1);
        CHECK(j[0].state == r.name);
        CHECK(j[0].phase == r.phase);
    }
    CHECK(phase_of("WEIRD_NEW_STATE") == JobPhase::unknown);
    CHECK(long_state("weird_new_state") == "WEIRD_NEW_STATE");
}

TEST_CASE("slurm: sacct lines, steps skipped, who cancelled", "[slurm]") {
    const auto jobs = parse_sacct(
        "12|CANCELLED by 1000|None|c[0-1]|0:15\n"
        "12.batch|CANCELLED|None|c0|0:15\n"
        "12.0|CANCELLED|None|c0|0:15\n"
        "13|TIMEOUT|TimeLimit|c0|0:0\n"
        "14|NODE_FAIL|None|c1|0:0\n"
        "15|PREEMPTED|None|c[0-1]|0:15\n"
        "16|PENDING|Priority|None assigned|0:0\n");
    REQUIRE(jobs.size() == 5);
    CHECK(jobs[0].state == "CANCELLED");
    CHECK(jobs[0].cancelled_by == "1000");
    CHECK(jobs[0].exit_code == "0:15");
    CHECK(jobs[1].state == "TIMEOUT");
    CHECK(jobs[1].reason == "TimeLimit");
    CHECK(jobs[3].phase == JobPhase::ended);
    CHECK(jobs[4].phase == JobPhase::pending);
    CHECK(jobs[4].nodes.empty());
    CHECK(parse_sacct("Slurm accounting storage is disabled\n").empty());
}

TEST_CASE("slurm: why a job ended, in words, and how its loss counts", "[slurm]") {
    auto j = parse_sacct("12|CANCELLED by 1000|None|c[0-1]|0:15\n").front();
    CHECK(end_words(j) ==
          "the Slurm job 12 ended: CANCELLED (cancelled by uid 1000); exit code 0:15");
    CHECK(loss_kind(j) == sky::NodeLostError::Reason::unreachable);
    j = parse_squeue("13|sky-a|TIMEOUT|TimeLimit|c0\n").front();
    CHECK(end_words(j) ==
          "the Slurm job 13 ended: TIMEOUT (it reached its time limit); reason: TimeLimit");
    j = parse_squeue("14|sky-a|NODE_FAIL|None|c0\n").front();
    CHECK(end_words(j).find("one of its nodes failed") != std::string::npos);
    j = parse_squeue("15|sky-a|PREEMPTED|None|c0\n").front();
    CHECK(loss_kind(j) == sky::NodeLostError::Reason::preempted);
    CHECK(end_words(j).find("preempted") != std::string::npos);
    j = parse_squeue("16|sky-a|CG|None|c0\n").front();
    CHECK(end_words(j) ==
          "the Slurm job 16 is no longer running: COMPLETING (it is ending, its processes are "
          "being killed)");
    j = parse_squeue("17|sky-a|CANCELLED|None|c0\n").front();
    CHECK(end_words(j).find("scancel") != std::string::npos);
}

TEST_CASE("slurm: pending reasons in words, and which never clear", "[slurm]") {
    struct Row {
        const char* reason;
        const char* words;
        bool never;
    };
    const Row rows[] = {
        {"Resources", "resources to become free", false},
        {"Priority", "higher priority", false},
        {"Dependency", "depends on", false},
        {"DependencyNeverSatisfied", "never", true},
        {"BeginTime", "start time", false},
        {"JobHeldUser", "held by its user", false},
        {"JobHeldAdmin", "administrator", false},
        {"ReqNodeNotAvail, UnavailableNodes:c1", "unavailable", false},
        {"NodeDown", "down", false},
        {"PartitionDown", "partition is down", false},
        {"PartitionInactive", "inactive", false},
        {"PartitionNodeLimit", "nodes than its partition allows", true},
        {"PartitionTimeLimit", "time limit", true},
        {"Reservation", "reservation", false},
        {"Licenses", "license", false},
        {"BadConstraints", "constraints", true},
        {"InvalidAccount", "account is invalid", true},
        {"InvalidQOS", "QOS is invalid", true},
        {"QOSMaxJobsPerUserLimit", "jobs running", false},
        {"AssocMaxJobsLimit", "jobs running", false},
        {"QOSGrpGRES", "group limit of its QOS", false},
        {"AssocGrpCpuLimit", "group limit of its account", false},
        {"QOSMaxWallDurationPerJobLimit", "time limit", true},
        {"QOSMaxNodePerJobLimit", "more nodes", true},
        {"QOSMaxGRESPerJob", "more GPUs", true},
        {"AssocMaxCpuPerJobLimit", "more than a limit allows a job", true},
        {"None", "not looked at it", false},
    };
    for (const auto& r : rows) {
        INFO(r.reason);
        CHECK(explain_reason(r.reason).find(r.words) != std::string::npos);
        CHECK(reason_never_clears(r.reason) == r.never);
    }
    // An unknown reason is quoted as it is, and waited on.
    CHECK(explain_reason("SomethingNew") == "SomethingNew");
    CHECK_FALSE(reason_never_clears("SomethingNew"));
}

TEST_CASE("slurm: GRES from the partition's types, ignoring case, else untyped", "[slurm]") {
    const sky::Accelerator h100_2 = "H100:2";
    auto c = choose_gres(h100_2, "gpu:h100:4(S:0-1)\n", "gpu");
    CHECK(c.gres == "gpu:h100:2");
    CHECK(c.typed);
    CHECK(c.note.find("h100") != std::string::npos);
    // The cluster's spelling wins: types are case-sensitive in Slurm.
    c = choose_gres(h100_2, "gpu:H100:8(S:0,1),nic:1\n", "gpu");
    CHECK(c.gres == "gpu:H100:2");
    // A type whose words hold the name (AutoDetect=nvml's names).
    c = choose_gres("H100:8", "gpu:nvidia_h100_80gb_hbm3:8(S:0-1)\n", "");
    CHECK(c.gres == "gpu:nvidia_h100_80gb_hbm3:8");
    CHECK(c.typed);
    // No type matches: any GPU, and the note says what the partition has.
    c = choose_gres(h100_2, "gpu:a100:4\ngpu:v100:2\n", "gpu");
    CHECK(c.gres == "gpu:2");
    CHECK_FALSE(c.typed);
    CHECK(c.note.find("a100, v100") != std::string::npos);
    // Untyped GPUs.
    c = choose_gres("A100", "gpu:4\n", "gpu");
    CHECK(c.gres == "gpu:1");
    CHECK(c.note.find("without a type") != std::string::npos);
    // Several configurations, one matches.
    c = choose_gres(h100_2, "gpu:a100:4\n(null)\ngpu:h100:8\n", "");
    CHECK(c.gres == "gpu:h100:2");
    // No GPUs at all: a clear error naming the partition.
    try {
        choose_gres(h100_2, "(null)\n", "cpu");
        FAIL("expected a ProvisionError");
    } catch (const sky::ProvisionError& e) {
        CHECK(std::string(e.what()).find("partition cpu declares no GPUs") != std::string::npos);
    }
    CHECK_THROWS_AS(choose_gres(h100_2, "", ""), sky::ProvisionError);
}

TEST_CASE("slurm: host lists expand as Slurm writes them", "[slurm]") {
    CHECK(expand_hostlist("c[0-1]") == Strings{"c0", "c1"});
    CHECK(expand_hostlist("c0") == Strings{"c0"});
    CHECK(expand_hostlist("gpu-[01-03,7]x,login") ==
          Strings{"gpu-01x", "gpu-02x", "gpu-03x", "gpu-7x", "login"});
    CHECK(expand_hostlist("r[1-2]n[0-1]") == Strings{"r1n0", "r1n1", "r2n0", "r2n1"});
    CHECK(expand_hostlist("c[8-10]") == Strings{"c8", "c9", "c10"});
    CHECK(expand_hostlist("a,b[1,3],c") == Strings{"a", "b1", "b3", "c"});
    CHECK(expand_hostlist("").empty());
    for (const char* bad : {"c[0-1", "c0-1]", "c[a-b]", "c[3-1]", "c[0-99999999]"}) {
        INFO(bad);
        CHECK_THROWS_AS(expand_hostlist(bad), sky::Error);
    }
    // Over 65,536 hosts is refused before the names are built: a product of brackets, many
    // ranges in one bracket, many items (each would have asked for billions of strings).
    CHECK(expand_hostlist("c[0-255][0-255]").size() == 65536);
    for (const char* huge : {"c[0-65535][0-65535]", "c[0-60000,0-60000]", "a[0-65535],b[0-1]",
                             "r[0-9999]n[0-9999]x[0-9999]"}) {
        INFO(huge);
        CHECK_THROWS_WITH(expand_hostlist(huge), Catch::Contains("too many hosts"));
    }
}

TEST_CASE("slurm: only sky-<pool id> names a pool's job", "[slurm]") {
    CHECK(pool_of_job_name("sky-0123456789abcdef") == "0123456789abcdef");
    CHECK(pool_of_job_name("sky-01234567") == "01234567");
    // A user's own job that only starts like one of sky's is never a pool's (sky gc would
    // cancel it).
    for (const char* other :
         {"sky-notebook", "sky-", "sky-0123456", "sky-0123456789ABCDEF", "sky-0123456789abcdef-x",
          "sky-0123456789abcdef0123456789abcdef0", "notsky-0123456789abcdef", "other-user"}) {
        INFO(other);
        CHECK(pool_of_job_name(other).empty());
    }
}

TEST_CASE("slurm: scontrol's node lines give addresses", "[slurm]") {
    const auto nodes = parse_scontrol_nodes(
        "NodeName=c0 Arch=x86_64 CoresPerSocket=1 NodeAddr=10.77.0.10 NodeHostName=c0 "
        "OS=Linux 6.1.0 #1 SMP Version=22.05.8\n"
        "NodeName=c1 Arch=x86_64 NodeAddr=gpu-b NodeHostName=gpu-b-host Version=22.05.8\n"
        "NodeName=c2 Arch=x86_64 Version=22.05.8\n");
    REQUIRE(nodes.size() == 3);
    CHECK(nodes[0].name == "c0");
    CHECK(nodes[0].address == "10.77.0.10");
    CHECK(nodes[1].address == "gpu-b");
    CHECK(nodes[1].hostname == "gpu-b-host");
    CHECK(nodes[2].address == "c2");  // none given: the name, as Slurm defaults it
}

TEST_CASE("slurm: .login parses as user@host[:port]", "[slurm]") {
    auto a = parse_login("alice@login.hpc.example");
    CHECK(a.user == "alice");
    CHECK(a.host == "login.hpc.example");
    CHECK(a.port == 22);
    CHECK(a.to_string() == "alice@login.hpc.example:22");
    a = parse_login("10.0.0.5:2222");
    CHECK(a.user.empty());
    CHECK(a.port == 2222);
    a = parse_login("bob@[fe80::1]:2200");
    CHECK(a.host == "fe80::1");
    CHECK(a.port == 2200);
    CHECK(a.to_string() == "bob@[fe80::1]:2200");
    for (const char* bad : {"", "@host", "alice@", "host:", "host:99999", "host:2x", "a b@c",
                            "fe80::1:22", "[fe80::1", "host/x"}) {
        INFO(bad);
        CHECK_THROWS_AS(parse_login(bad), sky::ConfigError);
    }
}

TEST_CASE("slurm: the ledger's job reference round-trips", "[slurm]") {
    JobRef r;
    r.login = "alice@login.hpc.example:22";
    r.identity_file = "/home/a/.ssh/id ed25519;x";
    r.known_hosts = "/home/a/.ssh/known_hosts";
    r.job_name = "sky-abc";
    r.job_id = "4711";
    const auto s = r.to_string();
    CHECK(s.rfind("slurm:4711:sky-abc@alice@login.hpc.example:22;key=", 0) == 0);
    const auto back = JobRef::parse(s);
    REQUIRE(back);
    CHECK(back->login == r.login);
    CHECK(back->identity_file == r.identity_file);
    CHECK(back->known_hosts == r.known_hosts);
    CHECK(back->job_name == r.job_name);
    CHECK(back->job_id == r.job_id);
    // Before sbatch named the job, and on this machine.
    JobRef l;
    l.job_name = "sky-def";
    CHECK(l.to_string() == "slurm:*:sky-def@local");
    const auto lb = JobRef::parse(l.to_string());
    REQUIRE(lb);
    CHECK(lb->login.empty());
    CHECK(lb->job_id.empty());
    for (const char* bad : {"ssh:root@h:22", "slurm:", "slurm:12", "slurm:x1:sky-a@local",
                            "slurm:1:@local", "slurm:1:sky-a@", "slurm:1:sky-a@l;bogus=1"}) {
        INFO(bad);
        CHECK_FALSE(JobRef::parse(bad));
    }
}

TEST_CASE("slurm: a spec's Slurm problems are named before anything runs", "[slurm]") {
    auto problem = [](const sky::PoolSpec& s) -> std::string {
        try {
            s.validate();
            return {};
        } catch (const sky::ConfigError& e) {
            return e.what();
        }
    };
    sky::PoolSpec s;
    s.provider = sky::Slurm{.login = "alice@login:22", .partition = "gpu"};
    CHECK(s.provider.name() == "slurm");
    CHECK(problem(s).empty());
    s.provider = sky::Slurm{.login = "alice@login:99999"};
    CHECK(problem(s).find("port outside") != std::string::npos);
    s.provider = sky::Slurm{.queue_timeout = std::chrono::seconds(0)};
    CHECK(problem(s).find("queue_timeout must be positive") != std::string::npos);
    s.provider = sky::Slurm{};
    s.machine = "p5.48xlarge";
    CHECK(problem(s).find("no machine types") != std::string::npos);
    // api.md's example compiles as written.
    sky::PoolSpec api{
        .provider = sky::Slurm{.login = "alice@login.hpc.example",
                               .partition = "gpu",
                               .account = "proj42",
                               .queue_timeout = std::chrono::minutes{30}},
        .nodes = 4,
        .accelerator = "H100:8",
        .timeout = std::chrono::hours{2},
    };
    CHECK(problem(api).empty());
}
