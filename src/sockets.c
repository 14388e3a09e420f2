/*
 * sockets.c - hpcnet socket benchmark kernel: TCP and UDP over plain sockets,
 * no MPI.  One binary plays both roles (server and client); a TCP control
 * connection coordinates the test and the CLIENT prints the results in
 * "hpcnet kernel output format 1" on stdout (see src/README-sockets.md).
 *
 * Tests (--test):
 *   tcp_stream  client sends, server receives, for --duration-ms per size
 *   tcp_bidir   both ends send and receive at once on one connection
 *   tcp_rr      request/response (TCP_NODELAY): client sends size bytes,
 *               server echoes size bytes; round-trip statistics
 *   udp_stream  client sends sequence-numbered datagrams, per size unpaced
 *               and/or paced at each --rate-mbps rate; server counts them; loss
 *   udp_rr      datagram request/response with a per-transaction timeout;
 *               lost transactions are counted, never retransmitted
 *
 * Build: make sockets (src/Makefile: sockets*.c, one object each; no libm).
 * Linux (uses recvmmsg, accept4, MSG_NOSIGNAL).
 *
 * Exit codes: 0 ok, 2 bad usage, 1 run-time failure, 3 overall timeout.
 * Every error: one line "error: <message>" on stderr.
 */
#include "sockets_client.h"
#include "sockets_options.h"
#include "sockets_server.h"
#include "sockets_util.h"

/* Line-buffered stdout; SIGPIPE ignored (a closed peer is an error code);
 * the watchdog alarm and the termination signals handled (sockets_util.c). */
static void install_signal_handlers(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    signal(SIGPIPE, SIG_IGN);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGALRM, &sa, NULL);
    sa.sa_handler = on_term;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
}

/* --role auto: rank 0 of the launcher is the server, rank 1 the client;
 * the variable it was read from goes into rank_desc. */
static int role_from_launcher(char *rank_desc, size_t desc_len)
{
    /* launcher-specific variables first: under mpirun inside a Slurm job
     * every rank inherits the batch step's SLURM_PROCID */
    static const char *const vars[] = {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"};
    for (size_t k = 0; k < sizeof vars / sizeof vars[0]; k++) {
        const char *v = getenv(vars[k]);
        if (v && *v) {
            char *end = NULL;
            long r = strtol(v, &end, 10);
            if (*end || r < 0)
                usage_error("--role auto: %s='%s' is not a rank", vars[k], v);
            if (r > 1)
                usage_error("--role auto: %s=%ld; the sockets kernel needs exactly 2 tasks (ranks 0 and 1)",
                            vars[k], r);
            snprintf(rank_desc, desc_len, "%s=%ld", vars[k], r);
            return r == 0 ? ROLE_SERVER : ROLE_CLIENT;
        }
    }
    usage_error("--role auto: none of OMPI_COMM_WORLD_RANK, PMIX_RANK, PMI_RANK, SLURM_PROCID is set");
}

int main(int argc, char **argv)
{
    struct opts o;
    install_signal_handlers();
    parse_args(argc, argv, &o);

    const char *rank_env = NULL;
    char rank_desc[128];
    int role = o.role;
    if (role == ROLE_AUTO) {
        role = role_from_launcher(rank_desc, sizeof rank_desc);
        rank_env = rank_desc;
    }
    if (role == ROLE_SERVER)
        return run_server(&o);
    return run_client(&o, rank_env);
}
