// What sky ships: the loader's closure of this program, named as the loader finds each file,
// minus what the node must bring (C library, loader, GPU driver); glibc needs read from ELF
// version sections; content hashes cached by path, size, mtime and inode.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "ship/closure.hpp"
#include "ship/elf.hpp"
#include "sky/errors.hpp"
#include "util/digest.hpp"

namespace fs = std::filesystem;
using namespace sky::detail::ship;
using sky::detail::sha256_hex;

namespace {

struct TempDir {
    fs::path path;
    TempDir() {
        std::string t = (fs::temp_directory_path() / "sky-ship-unit-XXXXXX").string();
        REQUIRE(::mkdtemp(t.data()));
        path = t;
    }
    ~TempDir() {
        std::error_code ec;
        fs::remove_all(path, ec);
    }
};

void write(const fs::path& p, const std::string& s) { std::ofstream(p, std::ios::binary) << s; }

}  // namespace

TEST_CASE("ship: the C library, the loader and GPU driver libraries are the node's own", "[ship]") {
    for (const char* n : {"libc.so.6", "libm.so.6", "libpthread.so.0", "libdl.so.2",
                          "ld-linux-x86-64.so.2", "ld-linux-aarch64.so.1", "libcuda.so.1",
                          "libnvidia-ml.so.1", "libnvidia-ptxjitcompiler.so.1", "linux-vdso.so.1"})
        CHECK(is_node_provided(n));
    for (const char* n : {"libstdc++.so.6", "libcudart.so.12", "libtorch_cpu.so", "libcrypto.so.3",
                          "libcublas.so.12", "libnccl.so.2", "libgcc_s.so.1", "libmylib.so"})
        CHECK_FALSE(is_node_provided(n));
}

TEST_CASE("ship: this program's closure is what the loader loaded, by the names it looked up",
          "[ship]") {
    auto loaded = loaded_objects();
    bool libc = false, libstdcxx = false;
    for (auto& o : loaded) {
        CHECK(o.path.is_absolute());
        CHECK(o.name == o.path.filename().string());
        if (o.name.rfind("libc.so", 0) == 0) libc = true;
        if (o.name.rfind("libstdc++.so", 0) == 0) libstdcxx = true;
    }
    CHECK(libc);
    CHECK(libstdcxx);
    const Manifest& m = this_program();
    CHECK(m.program().source == fs::canonical("/proc/self/exe"));
    CHECK(m.program().name == fs::canonical("/proc/self/exe").filename().string());
    CHECK(m.id.size() == 32);
    bool shipped_stdcxx = false;
    for (auto& f : m.files) {
        CHECK(f.sha256.size() == 64);
        CHECK(f.size == fs::file_size(f.source));
        CHECK_FALSE(is_node_provided(fs::path(f.name).filename().string()));
        if (f.name.rfind("lib/libstdc++.so", 0) == 0) shipped_stdcxx = true;
    }
    CHECK(shipped_stdcxx);
    // This program was built here: it needs at least the glibc it was linked against's oldest
    // symbol version, and no newer one than the running C library provides.
    CHECK(m.glibc >= GlibcVersion{2, 2});
    CHECK(m.glibc <= GlibcVersion{2, 99});
}

TEST_CASE("ship: a changed file gets a new hash, and a new program directory", "[ship]") {
    TempDir d;
    auto prog = d.path / "prog";
    auto lib = d.path / "libx.so.1";
    fs::copy_file("/proc/self/exe", prog);
    write(lib, "version one");
    auto m1 = make_manifest(prog, {{"libx.so.1", lib}});
    auto m1_again = make_manifest(prog, {{"libx.so.1", lib}});
    CHECK(m1.id == m1_again.id);
    REQUIRE(m1.files.size() == 2);
    CHECK(m1.files[1].name == "lib/libx.so.1");
    CHECK(m1.files[1].sha256 == sha256_hex("version one"));

    // Same size, new content: a rebuild. The cache keys on mtime and inode, so it is seen.
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    fs::remove(lib);
    write(lib, "version two");
    auto m2 = make_manifest(prog, {{"libx.so.1", lib}});
    CHECK(m2.files[1].sha256 == sha256_hex("version two"));
    CHECK(m2.id != m1.id);
    CHECK(m2.files[0].sha256 == m1.files[0].sha256);
}

TEST_CASE("ship: a program deleted while it runs is a sky::Error naming the file", "[ship]") {
    TempDir d;
    auto prog = d.path / "prog";
    fs::copy_file("/proc/self/exe", prog);
    // What /proc/self/exe reads once the running program's file was deleted or rebuilt.
    const fs::path gone = prog.string() + " (deleted)";
    fs::remove(prog);
    try {
        (void)make_manifest(gone, {});
        FAIL("a manifest of a deleted program");
    } catch (const sky::Error& e) {
        CHECK_THAT(e.what(),
                   Catch::Contains(gone.string()) && Catch::Contains("deleted or rebuilt"));
    }
}

TEST_CASE("ship: glibc needs come from the version section, broken files are refused", "[ship]") {
    auto v = glibc_needed("/proc/self/exe");
    REQUIRE(v);
    CHECK(*v >= GlibcVersion{2, 2});
    TempDir d;
    write(d.path / "text", "not an ELF file at all");
    CHECK_FALSE(glibc_needed(d.path / "text"));
    // An ELF header that claims section headers past the end of the file.
    std::string elf;
    {
        std::ifstream in("/proc/self/exe", std::ios::binary);
        elf.resize(64);
        in.read(elf.data(), 64);
    }
    write(d.path / "truncated", elf);
    CHECK_THROWS_WITH(glibc_needed(d.path / "truncated"), Catch::Contains("outside the file"));
    CHECK_THROWS(glibc_needed(d.path / "missing"));
}
