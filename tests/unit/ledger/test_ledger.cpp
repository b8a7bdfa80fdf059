// The write-ahead pool ledger (src/ledger/ledger.hpp): private files, append-only records, torn
// last lines, pid reuse, and malformed files that never stop `sky ls` / `sky gc`.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "ledger/ledger.hpp"
#include "sky/errors.hpp"
#include "support/temp_home.hpp"

namespace fs = std::filesystem;
using sky::detail::Ledger;
using sky::detail::LedgerRecord;

namespace {

using TempHome = sky::test::TempSkyHome;

unsigned mode_of(const fs::path& p) {
    struct stat st {};
    REQUIRE(::lstat(p.c_str(), &st) == 0);
    return st.st_mode & 07777;
}

std::string slurp(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

void append_raw(const fs::path& p, const std::string& text) {
    std::ofstream out(p, std::ios::binary | std::ios::app);
    out << text;
}

// A pid that has ended and been reaped.
long dead_pid() {
    const pid_t pid = ::fork();
    if (pid == 0) ::_exit(0);
    int st = 0;
    ::waitpid(pid, &st, 0);
    return pid;
}

}  // namespace

TEST_CASE("ledger: the directory is 0700 and each file 0600, whatever the umask", "[ledger]") {
    TempHome home;
    const mode_t old = ::umask(0);
    auto ledger = Ledger::open("pool0001", "local", "");
    ::umask(old);
    CHECK(ledger->file() == home.pools() / "pool0001.jsonl");
    CHECK(mode_of(home.pools()) == 0700);
    CHECK(mode_of(home.dir() / "home") == 0700);  // made by sky: private too
    CHECK(mode_of(ledger->file()) == 0600);

    // A directory someone opened up is made private again before a ledger goes in it.
    REQUIRE(::chmod(home.pools().c_str(), 0755) == 0);
    auto second = Ledger::open("pool0002", "local", "");
    CHECK(mode_of(home.pools()) == 0700);
}

TEST_CASE("ledger: a symlinked or foreign directory is refused with its path", "[ledger]") {
    TempHome home;
    fs::create_directories(home.dir() / "elsewhere");
    fs::create_directories(home.dir() / "home");
    fs::create_directory_symlink(home.dir() / "elsewhere", home.pools());
    CHECK_THROWS_WITH(Ledger::open("pool0001", "local", ""),
                      Catch::Contains(home.pools().string()) && Catch::Contains("not a directory"));
    CHECK(fs::is_empty(home.dir() / "elsewhere"));
    if (::geteuid() == 0) {
        fs::remove(home.pools());
        fs::create_directory(home.pools());
        REQUIRE(::chown(home.pools().c_str(), 65534, 65534) == 0);
        CHECK_THROWS_WITH(Ledger::open("pool0001", "local", ""),
                          Catch::Contains("belongs to another user"));
    }
}

TEST_CASE("ledger: a bad pool id never becomes a path", "[ledger]") {
    TempHome home;
    CHECK_THROWS_AS(Ledger::open("../escape", "local", ""), sky::Error);
    CHECK_THROWS_AS(Ledger::open("", "local", ""), sky::Error);
    CHECK_THROWS_AS(Ledger::open(".hidden", "local", ""), sky::Error);
    CHECK_FALSE(fs::exists(home.dir() / "home" / "escape.jsonl"));
}

TEST_CASE("ledger: records are appended, never rewritten, and read back", "[ledger]") {
    TempHome home;
    auto ledger = Ledger::open("poolabcd", "aws", "us-east-1");
    std::string before = slurp(ledger->file());
    REQUIRE(!before.empty());
    CHECK(before.back() == '\n');
    auto grows = [&] {
        const std::string now = slurp(ledger->file());
        CHECK(now.size() > before.size());
        CHECK(now.compare(0, before.size(), before) == 0);  // what was there is unchanged
        before = now;
    };
    ledger->instance("i-1");
    grows();
    ledger->region("us-west-2");  // the provider named it after open()
    grows();
    ledger->instance("i-2");
    grows();
    ledger->instance_gone("i-1");
    grows();

    LedgerRecord r = Ledger::read(ledger->file());
    CHECK(r.pool_id == "poolabcd");
    CHECK(r.provider == "aws");
    CHECK(r.region == "us-west-2");
    CHECK(r.owner_pid == ::getpid());
    CHECK(r.host == sky::detail::this_host());
    CHECK(r.started_unix > 1600000000);
    CHECK(r.instances == std::vector<std::string>{"i-1", "i-2"});
    CHECK(r.live_instances() == std::vector<std::string>{"i-2"});
    CHECK_FALSE(r.closed);
    CHECK(r.owner() == LedgerRecord::Owner::alive);
    CHECK_FALSE(r.finished());

    ledger->close();
    grows();
    r = Ledger::read(ledger->file());
    CHECK(r.closed);
    CHECK(r.closed_by == "owner");
    CHECK(r.finished());
    CHECK(r.live_instances() == std::vector<std::string>{"i-2"});  // closed with a machine left

    // The same pool id again would overwrite a record: refused.
    CHECK_THROWS_WITH(Ledger::open("poolabcd", "aws", ""), Catch::Contains("poolabcd.jsonl"));
    CHECK(Ledger::read(ledger->file()).instances.size() == 2);

    // gc appends to it and says so.
    auto gc = Ledger::attach(ledger->file());
    gc->instance_gone("i-2");
    gc->close_collected();
    r = Ledger::read(ledger->file());
    CHECK(r.live_instances().empty());
    CHECK(r.closed_by == "gc");
}

TEST_CASE("ledger: records from many threads are whole lines", "[ledger]") {
    TempHome home;
    auto ledger = Ledger::open("poolmany", "aws", "");
    std::vector<std::thread> threads;
    for (int t = 0; t < 8; ++t)
        threads.emplace_back([&, t] {
            for (int i = 0; i < 50; ++i) ledger->instance("i-" + std::to_string(t * 100 + i));
        });
    for (auto& t : threads) t.join();
    const LedgerRecord r = Ledger::read(ledger->file());
    CHECK(r.instances.size() == 400);
    CHECK(r.live_instances().size() == 400);
}

TEST_CASE("ledger: a torn last line is ignored, and the next record starts a new line",
          "[ledger]") {
    TempHome home;
    auto ledger = Ledger::open("pooltorn", "aws", "");
    ledger->instance("i-1");
    const fs::path file = ledger->file();
    ledger.reset();
    append_raw(file, R"({"type":"instance","id":"i-tor)");  // its writer died mid-record
    LedgerRecord r = Ledger::read(file);
    CHECK(r.instances == std::vector<std::string>{"i-1"});

    auto gc = Ledger::attach(file);
    gc->instance_gone("i-1");
    gc->close_collected();
    r = Ledger::read(file);  // the torn fragment is a line of its own now, and skipped
    CHECK(r.damaged_lines == 1);
    CHECK(r.closed);
    CHECK(r.live_instances().empty());
}

TEST_CASE("ledger: a running pool holds its ledger's lock, whatever its pid says", "[ledger]") {
    TempHome home;
    auto ledger = Ledger::open("poollck0", "local", "");
    LedgerRecord r = Ledger::read(ledger->file());
    CHECK(r.locked);
    CHECK_FALSE(r.pid_namespace.empty());
    CHECK_FALSE(r.machine_id.empty());
    CHECK(sky::detail::ledger_locked(ledger->file()));
    // Held: alive, even where the recorded pid means nothing (another PID namespace) or now
    // names another process.
    r.owner_pid = dead_pid();
    r.owner_start = "";
    r.pid_namespace = "pid:[1]";
    CHECK(r.owner() == LedgerRecord::Owner::alive);
    CHECK_FALSE(r.finished());
    // The Ledger is gone (its fd closed): the lock with it.
    ledger.reset();
    CHECK_FALSE(sky::detail::ledger_locked(r.file));
    CHECK(r.owner() == LedgerRecord::Owner::dead);
}

TEST_CASE("ledger: the lock goes when the owner process dies, in any PID namespace", "[ledger]") {
    TempHome home;
    int ready[2];
    REQUIRE(::pipe(ready) == 0);
    const pid_t child = ::fork();
    if (child == 0) {
        // The client: it opens its ledger and keeps it, as a pool does, until it is killed.
        ::close(ready[0]);
        std::unique_ptr<Ledger> l;
        try {
            l = Ledger::open("poolkid0", "local", "");
        } catch (...) {
            ::_exit(1);
        }
        (void)!::write(ready[1], "y", 1);
        ::pause();
        ::_exit(0);
    }
    ::close(ready[1]);
    char c = 0;
    REQUIRE(::read(ready[0], &c, 1) == 1);
    ::close(ready[0]);
    const fs::path file = home.pools() / "poolkid0.jsonl";
    LedgerRecord r = Ledger::read(file);
    r.pid_namespace = "pid:[1]";  // as if recorded in a container's namespace
    CHECK(r.owner() == LedgerRecord::Owner::alive);
    ::kill(child, SIGKILL);
    int st = 0;
    ::waitpid(child, &st, 0);
    CHECK(r.owner() == LedgerRecord::Owner::dead);
    CHECK(r.finished());
}

TEST_CASE("ledger: without a lock the pid tells, and only in its own namespace", "[ledger]") {
    TempHome home;
    auto ledger = Ledger::open("poolpid0", "local", "");
    LedgerRecord r = Ledger::read(ledger->file());
    ledger.reset();  // its lock released: the record as an older sky (no lock) wrote it
    r.locked = false;
    CHECK(r.owner() == LedgerRecord::Owner::alive);  // this very process
    CHECK(r.owner_alive());

    SECTION("the pid now belongs to another process (another start time)") {
        r.owner_start = r.owner_start + "1";
        CHECK(r.owner() == LedgerRecord::Owner::dead);
        CHECK_FALSE(r.owner_alive());
        CHECK(r.finished());
    }
    SECTION("after a reboot (another boot id)") {
        r.owner_start =
            "00000000-0000-0000-0000-000000000000" + r.owner_start.substr(r.owner_start.find(':'));
        CHECK(r.owner() == LedgerRecord::Owner::dead);
    }
    SECTION("the process has ended") {
        r.owner_pid = dead_pid();
        CHECK(r.owner() == LedgerRecord::Owner::dead);
    }
    SECTION("the process has ended but is not reaped yet (a zombie)") {
        const pid_t pid = ::fork();
        if (pid == 0) ::_exit(0);
        const std::string live = sky::detail::process_identity(pid);
        // Bounded: the child exits at once.
        for (int i = 0; i < 200 && !sky::detail::process_identity(pid).empty(); ++i)
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        r.owner_pid = pid;
        r.owner_start = live;
        CHECK(r.owner() == LedgerRecord::Owner::dead);
        int st = 0;
        ::waitpid(pid, &st, 0);
    }
    SECTION("recorded in another PID namespace: the pid cannot tell, never dead") {
        r.pid_namespace = "pid:[1]";
        r.owner_pid = dead_pid();
        CHECK(r.owner() == LedgerRecord::Owner::unknown);
        CHECK(r.owner_alive());
        CHECK_FALSE(r.finished());
    }
    SECTION("no start time recorded (no /proc then): cannot tell, never dead") {
        r.owner_start = "";
        r.owner_pid = dead_pid();
        CHECK(r.owner() == LedgerRecord::Owner::unknown);
        CHECK_FALSE(r.finished());
    }
    SECTION("written on another host: cannot be told, so never collected") {
        r.host = "some-other-host.example";
        r.owner_pid = dead_pid();
        CHECK(r.owner() == LedgerRecord::Owner::other_host);
        CHECK(r.owner_alive());
        CHECK_FALSE(r.finished());
    }
    SECTION("written on another machine with the same host name") {
        r.machine_id = "0123456789abcdef0123456789abcdef";
        r.owner_pid = dead_pid();
        CHECK(r.owner() == LedgerRecord::Owner::other_host);
    }
}

TEST_CASE("ledger: read_all skips malformed files and reads the rest", "[ledger]") {
    TempHome home;
    CHECK(Ledger::read_all().empty());  // no directory yet: nothing, no error
    auto good = Ledger::open("poolgood", "local", "");
    good->instance("local-1");
    const fs::path dir = home.pools();
    append_raw(dir / "garbage.jsonl", "this is not json\n");
    append_raw(dir / "empty.jsonl", "");
    append_raw(dir / "notpool.jsonl", R"({"type":"instance","id":"x"})"
                                      "\n");
    append_raw(dir / "newer.jsonl",
               R"({"sky_ledger":99,"type":"pool","pool":"p","provider":"aws","pid":1})"
               "\n");
    append_raw(dir / "badfield.jsonl",
               R"({"sky_ledger":1,"type":"pool","pool":"p","provider":"aws","pid":"one"})"
               "\n");
    append_raw(dir / "midgarbage.jsonl",
               R"({"sky_ledger":1,"type":"pool","pool":"pmid","provider":"aws","pid":1})"
               "\n{oops\n"
               R"({"type":"closed"})"
               "\n");
    fs::create_directory(dir / "adir.jsonl");
    fs::create_symlink(good->file(), dir / "link.jsonl");
    append_raw(dir / "README.txt", "not a ledger, not read\n");
    std::vector<std::string> skipped;
    const auto all = Ledger::read_all(&skipped);
    REQUIRE(all.size() == 2);
    const auto& g = all[0].pool_id == "poolgood" ? all[0] : all[1];
    const auto& mid = all[0].pool_id == "poolgood" ? all[1] : all[0];
    CHECK(g.instances == std::vector<std::string>{"local-1"});
    // A damaged record inside a ledger costs that record, not the pool's other records.
    CHECK(mid.pool_id == "pmid");
    CHECK(mid.damaged_lines == 1);
    CHECK(mid.closed);
    CHECK(skipped.size() == 7);
    for (const auto& why : skipped) CHECK(why.find(dir.string()) != std::string::npos);
    CHECK_THROWS_AS(Ledger::read(dir / "garbage.jsonl"), sky::Error);
}

TEST_CASE("ledger: a ledger or directory others could have written is not believed", "[ledger]") {
    TempHome home;
    auto ledger = Ledger::open("pooltrust", "aws", "");
    ledger->instance("i-1");
    REQUIRE(Ledger::read_all().size() == 1);

    REQUIRE(::chmod(ledger->file().c_str(), 0622) == 0);
    std::vector<std::string> skipped;
    CHECK(Ledger::read_all(&skipped).empty());
    REQUIRE(skipped.size() == 1);
    CHECK(skipped[0].find("not trusted") != std::string::npos);
    REQUIRE(::chmod(ledger->file().c_str(), 0600) == 0);

    REQUIRE(::chmod(home.pools().c_str(), 0777) == 0);
    skipped.clear();
    CHECK(Ledger::read_all(&skipped).empty());
    REQUIRE(skipped.size() == 1);
    CHECK(skipped[0].find("not trusted") != std::string::npos);
    REQUIRE(::chmod(home.pools().c_str(), 0700) == 0);

    if (::geteuid() == 0) {
        REQUIRE(::chown(ledger->file().c_str(), 65534, 65534) == 0);
        skipped.clear();
        CHECK(Ledger::read_all(&skipped).empty());
        CHECK(skipped.size() == 1);
    }
}

TEST_CASE("ledger: a pool's limits and its last spend are read back", "[ledger]") {
    TempHome home;
    auto ledger = Ledger::open("poolcost1", "simulated", "");
    auto r = Ledger::read(ledger->file());
    CHECK_FALSE(r.spent_usd.has_value());  // nothing spent, nothing recorded
    CHECK(r.limit_usd == 0);
    ledger->budget(40.0, 6.0);
    ledger->spent(0.25);
    ledger->spent(1.5);
    r = Ledger::read(ledger->file());
    REQUIRE(r.spent_usd.has_value());
    CHECK(*r.spent_usd == 1.5);  // the last record counts
    CHECK(r.limit_usd == 40.0);
    CHECK(r.hourly_limit_usd == 6.0);
    CHECK(r.damaged_lines == 0);
    // A cost record without its number is damaged and skipped, never taken for 0.
    append_raw(ledger->file(), "{\"type\":\"cost\"}\n");
    r = Ledger::read(ledger->file());
    CHECK(r.damaged_lines == 1);
    CHECK(*r.spent_usd == 1.5);
    ledger->close();
}
