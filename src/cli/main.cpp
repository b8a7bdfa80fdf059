// The `sky` command-line tool.
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "cli/commands.hpp"

namespace {
constexpr const char* usage =
    "usage: sky <command> [options]\n"
    "\n"
    "commands:\n"
    "  catalog   offers that match an accelerator, cheapest first\n"
    "  doctor    which providers have credentials, which endpoints answer\n"
    "  ls        live pools (from the ledger) and the machines sky's tag finds at each cloud\n"
    "  gc        end what pools that are no longer running left behind\n"
    "  help      this text\n"
    "\n"
    "options:\n"
    "  --help      help for a command (sky catalog --help)\n"
    "  --version   sky's version\n";
}

int main(int argc, char** argv) {
    std::vector<std::string> args(argv + 1, argv + argc);
    if (args.empty() || args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
        std::fputs(usage, args.empty() ? stderr : stdout);
        return args.empty() ? 2 : 0;
    }
    if (args[0] == "--version") {
        std::printf("sky %s\n", SKY_VERSION);
        return 0;
    }
    std::string cmd = args[0];
    args.erase(args.begin());
    if (cmd == "catalog") return sky::cli::catalog_command(args);
    if (cmd == "doctor") return sky::cli::doctor_command(args);
    if (cmd == "ls") return sky::cli::ls_command(args);
    if (cmd == "gc") return sky::cli::gc_command(args);
    std::fprintf(stderr, "sky: unknown command '%s'\n\n%s", cmd.c_str(), usage);
    return 2;
}
