/* nbcc: the schedule compiler on the command line. Checks schedules, dumps their compiled
 * programs for review, lists what the library knows, verifies schedules against a simulated
 * network, predicts their time under a cost model, draws them, tells what selection would
 * choose, and measures this machine. Each subcommand is a file of its own; this one
 * dispatches. Runs without MPI, except calibrate and tune. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "nbc.h"
#include "nbcc.h"

static const char *const usage_main =
    "usage: nbcc COMMAND [ARGS]\n"
    "\n"
    "commands:\n"
    "  check FILE...     parse schedule files and compile them for p = 1..8; report mistakes\n"
    "  dump SCHEDULE     print the compiled program of a schedule (a name or a file)\n"
    "  list [FILE...]    list the schedules known (built-in, plus the files given)\n"
    "  explain           which schedule a call would get, and why, under each selection mode\n"
    "  calibrate         measure alpha, beta, gamma on this machine (under mpiexec -n 2)\n"
    "  tune              time every schedule and write a tuning file (under mpiexec)\n"
    "  verify SCHEDULE   run every rank's program together on a simulated network and check\n"
    "                    messages, deadlock, bounds, races and the result\n"
    "  simulate SCHEDULE predict the time under an alpha-beta-gamma or LogGP cost model;\n"
    "                    --compare ranks every eligible schedule over a grid of p and sizes\n"
    "  draw SCHEDULE     write a space-time diagram (SVG, dot) or the bytes moved per step\n"
    "  failures SCHEDULE what each rank's failure at each round costs an allreduce: what is\n"
    "                    lost, what survives, whether the others can finish\n"
    "\n"
    "A SCHEDULE is a file or a name: the full one, or without its collective's prefix as\n"
    "NBC_ALLREDUCE and rule files take it (ring: allreduce_ring; an allreduce's first, else\n"
    "the one collective's that has it: dissemination is barrier_dissemination).\n"
    "nbcc help COMMAND, or nbcc COMMAND --help, tells more about each; nbcc --version prints\n"
    "the version.\n"
    "\n"
    "Every command models ranks on one node, which can map each other's memory (schedules that\n"
    "require shared_memory compile); --no-shared-memory, after the command, models ranks that\n"
    "cannot.\n";


static const struct {
    const char *name;
    int (*run)(int argc, char **argv);
} commands[] = {
    {"check", nbcc_check},     {"dump", nbcc_dump},           {"list", nbcc_list},
    {"explain", nbcc_explain}, {"calibrate", nbcc_calibrate}, {"tune", nbcc_tune},
    {"verify", nbcc_verify},   {"simulate", nbcc_simulate},   {"draw", nbcc_draw},
    {"failures", nbcc_failures},
};

int main(int argc, char **argv)
{
    opterr = 0; /* getopt's own messages would not follow ours */
    if (argc < 2) return nbcc_usage_error("name a command");
    const char *cmd = argv[1];
    int rc = nbcc_read_env();
    if (rc) return rc;
    if (!strcmp(cmd, "--version")) {
        printf("nbcc %s\n", nbc_version());
        return 0;
    }
    char *help[] = {argv[0], argc > 2 ? argv[2] : NULL, "--help", NULL};
    if (!strcmp(cmd, "help") && argc > 2) { /* nbcc help dump is nbcc dump --help */
        cmd = argv[2];
        argc = 3;
        argv = help;
    } else if (!strcmp(cmd, "help") || !strcmp(cmd, "--help") || !strcmp(cmd, "-h")) {
        fputs(usage_main, stdout);
        return 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof *commands; i++)
        if (!strcmp(cmd, commands[i].name)) {
            static char prefix[32];
            snprintf(prefix, sizeof prefix, "nbcc %s", cmd);
            nbcc_cmd = prefix;
            return commands[i].run(argc - 1, argv + 1);
        }
    return nbcc_usage_error("unknown command '%s'", cmd);
}
