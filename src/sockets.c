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
 *   udp_stream  client sends sequence-numbered datagrams (optionally paced
 *               with --rate-mbps); server counts them; loss
 *   udp_rr      datagram request/response with a per-transaction timeout;
 *               lost transactions are counted, never retransmitted
 *
 * Build: cc -O2 -Wall -Wextra -Werror -pthread -o sockets sockets.c
 * (no libm needed).  Linux (uses recvmmsg, accept4, MSG_NOSIGNAL).
 *
 * Exit codes: 0 ok, 2 bad usage, 1 run-time failure, 3 overall timeout.
 * Every error: one line "error: <message>" on stderr.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#define KERNEL_NAME "sockets"
#define FORMAT_VERSION 1
#define PROTO_VERSION 1
#define DEFAULT_PORT 18515
#define EXIT_USAGE 2
#define EXIT_RUNTIME 1
#define EXIT_TIMEOUT 3

#define MAX_MSG_SIZE ((uint64_t)1 << 30) /* 1 GiB, as the MPI kernels */
#define UDP_MAX_PAYLOAD 65507u           /* 65535 - 20 (IPv4) - 8 (UDP) */
#define MAX_SIZES 128
#define MAX_ITERS 10000000L        /* --iters upper bound (80 MB of samples) */
#define ADAPTIVE_CAP 1000000L      /* adaptive rr: at most this many samples */
#define DEFAULT_RECV_MIN (128u << 10) /* stream receiver reads max(size, 128K) */
#define UDP_VLEN 32                /* datagrams per recvmmsg */
#define UDP_POLL_MS 20             /* server: UDP receive timeout slice */
#define UDP_GRACE_MS 50            /* server: wait for stragglers after "end" */
#define DATA_HELLO_LEN 32          /* fixed-size greeting on data connections */
#define LINE_MAX_LEN 2048

enum { ROLE_SERVER, ROLE_CLIENT, ROLE_AUTO };
enum { T_TCP_STREAM, T_TCP_BIDIR, T_TCP_RR, T_UDP_STREAM, T_UDP_RR, T_COUNT };
static const char *const test_names[T_COUNT] = {"tcp_stream", "tcp_bidir", "tcp_rr", "udp_stream", "udp_rr"};

static int is_udp(int t) { return t == T_UDP_STREAM || t == T_UDP_RR; }
static int is_rr(int t) { return t == T_TCP_RR || t == T_UDP_RR; }

/* ------------------------------------------------------------------------ */
/* options                                                                   */

struct opts {
    int role;
    int test;
    const char *sizes_arg; /* --sizes list, NULL = range */
    uint64_t min_size, max_size;
    int have_min, have_max;
    long duration_ms;
    long iters; /* 0 = adaptive */
    long warmup;
    long sndbuf, rcvbuf; /* 0 = system default (autotuning) */
    long recv_size;      /* 0 = max(size, 128K) */
    long port;
    const char *bind_addr;
    const char *server_addr;
    const char *rendezvous;
    double connect_timeout; /* s */
    double timeout;         /* s */
    double rate_mbps;       /* udp_stream pacing, 0 = unpaced */
    long udp_timeout_ms;
    int nodelay;
    int validate;
    int verbose;
    /* which test-specific options were given (validated against --test) */
    int have_iters, have_warmup, have_rate, have_udp_timeout;
};

/* ------------------------------------------------------------------------ */
/* process-wide state                                                        */

static int g_is_server = 0;
static int g_ctrl_fd = -1;       /* server: control connection, to report errors */
static char g_rv_path[PATH_MAX]; /* server: rendezvous file to remove at exit */
static volatile sig_atomic_t g_rv_written = 0;
static uint64_t g_deadline_ns = UINT64_MAX; /* overall --timeout */

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void remove_rendezvous(void)
{
    if (g_rv_written) {
        unlink(g_rv_path);
        g_rv_written = 0;
    }
}

/* Run-time failure: "error: ..." on stderr, exit 1.  A server also tells the
 * client (best effort) so that the client reports the cause. */
static void die(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
static void die(const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    for (char *p = msg; *p; p++)
        if (*p == '\n' || *p == '\r')
            *p = ' ';
    fflush(stdout);
    fprintf(stderr, "error: %s\n", msg);
    fflush(stderr);
    if (g_is_server && g_ctrl_fd >= 0) {
        char line[1100];
        int n = snprintf(line, sizeof line, "error %s\n", msg);
        if (n > 0) {
            if ((size_t)n >= sizeof line)
                n = (int)sizeof line - 1;
            ssize_t r = send(g_ctrl_fd, line, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT);
            (void)r;
        }
    }
    remove_rendezvous();
    exit(EXIT_RUNTIME);
}

static void usage_error(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
static void usage_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("error: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputs(" (see " KERNEL_NAME " --help)\n", stderr);
    va_end(ap);
    exit(EXIT_USAGE);
}

static void on_alarm(int sig)
{
    (void)sig;
    static const char msg[] = "error: overall timeout exceeded (--timeout)\n";
    ssize_t r = write(2, msg, sizeof msg - 1);
    (void)r;
    if (g_rv_written)
        unlink(g_rv_path);
    _exit(EXIT_TIMEOUT);
}

/* SIGTERM/SIGINT/SIGHUP (launcher tearing the job down): remove the
 * rendezvous file, then die of the signal as usual */
static void on_term(int sig)
{
    if (g_rv_written)
        unlink(g_rv_path);
    signal(sig, SIG_DFL);
    raise(sig);
}

/* Hard backstop behind the clean deadline checks: SIGALRM a little after
 * the overall deadline, in case something blocks where we do not look. */
static void arm_watchdog(double seconds)
{
    struct itimerval it;
    memset(&it, 0, sizeof it);
    double s = seconds + 2.0;
    it.it_value.tv_sec = (time_t)s;
    it.it_value.tv_usec = (suseconds_t)((s - (double)(time_t)s) * 1e6);
    if (it.it_value.tv_sec == 0 && it.it_value.tv_usec == 0)
        it.it_value.tv_usec = 1;
    setitimer(ITIMER_REAL, &it, NULL);
}

static void set_deadline(double seconds)
{
    g_deadline_ns = now_ns() + (uint64_t)(seconds * 1e9);
    arm_watchdog(seconds);
}

/* milliseconds left until 'deadline' (0 when passed), capped at INT_MAX */
static int ms_until(uint64_t deadline)
{
    uint64_t n = now_ns();
    if (n >= deadline)
        return 0;
    uint64_t ms = (deadline - n + 999999u) / 1000000u;
    return ms > INT_MAX ? INT_MAX : (int)ms;
}

static const char *io_strerror(int err)
{
    if (err == EAGAIN || err == EWOULDBLOCK)
        return "stalled (no progress within --connect-timeout)";
    return strerror(err);
}

/* square root without libm (Newton); x >= 0 */
static double my_sqrt(double x)
{
    if (!(x > 0.0))
        return 0.0;
    double r = x > 1.0 ? x : 1.0;
    for (int k = 0; k < 200; k++) {
        double n = 0.5 * (r + x / r);
        if (n == r)
            break;
        r = n;
    }
    return r;
}

static void *xalloc(size_t bytes, unsigned char fill)
{
    size_t n = bytes < 4096 ? 4096 : (bytes + 4095) / 4096 * 4096;
    void *p = NULL;
    if (posix_memalign(&p, 4096, n) != 0 || !p)
        die("cannot allocate %zu bytes", n);
    memset(p, fill, n);
    return p;
}

/* payload pattern: byte k of every message (never 0, so zeroed memory
 * never passes validation) */
static void fill_pattern(unsigned char *buf, size_t n)
{
    for (size_t k = 0; k < n; k++) {
        uint32_t x = (uint32_t)k * 2654435761u;
        unsigned char b = (unsigned char)(x >> 24);
        buf[k] = b ? b : 0x5a;
    }
}

static void hostname_token(char *out, size_t len)
{
    if (gethostname(out, len) != 0)
        snprintf(out, len, "unknown");
    out[len - 1] = '\0';
    for (char *p = out; *p; p++)
        if ((unsigned char)*p <= 0x20 || (unsigned char)*p >= 0x7f || *p == '=')
            *p = '_';
    if (!*out)
        snprintf(out, len, "unknown");
}

/* ------------------------------------------------------------------------ */
/* argument parsing                                                          */

/* bytes with optional binary suffix K/M/G (optionally followed by iB or B) */
static int parse_size_str(const char *s, uint64_t *out)
{
    const char *p = s;
    uint64_t v = 0;
    if (!isdigit((unsigned char)*p))
        return -1;
    for (; isdigit((unsigned char)*p); p++) {
        v = v * 10u + (uint64_t)(*p - '0');
        if (v > ((uint64_t)1 << 40))
            return -1;
    }
    uint64_t mult = 1;
    if (*p) {
        char c = (char)toupper((unsigned char)*p);
        if (c == 'K')
            mult = 1024u;
        else if (c == 'M')
            mult = 1024u * 1024u;
        else if (c == 'G')
            mult = 1024u * 1024u * 1024u;
        else
            return -1;
        p++;
        if (*p && strcmp(p, "iB") != 0 && strcmp(p, "ib") != 0 && strcmp(p, "B") != 0 && strcmp(p, "b") != 0)
            return -1;
    }
    *out = v * mult;
    return 0;
}

static uint64_t opt_size(const char *opt, const char *s, uint64_t lo, uint64_t hi)
{
    uint64_t v;
    if (parse_size_str(s, &v) != 0)
        usage_error("%s: '%s' is not a size (bytes, optional K/M/G suffix)", opt, s);
    if (v < lo || v > hi)
        usage_error("%s: %s is out of range [%" PRIu64 ", %" PRIu64 "]", opt, s, lo, hi);
    return v;
}

static long opt_long(const char *opt, const char *s, long lo, long hi)
{
    if (!*s)
        usage_error("%s: empty value", opt);
    for (const char *p = s; *p; p++)
        if (!isdigit((unsigned char)*p))
            usage_error("%s: '%s' is not a non-negative integer", opt, s);
    errno = 0;
    long v = strtol(s, NULL, 10);
    if (errno == ERANGE || v < lo || v > hi)
        usage_error("%s: %s is out of range [%ld, %ld]", opt, s, lo, hi);
    return v;
}

static double opt_double(const char *opt, const char *s, double lo, double hi, int allow_zero)
{
    char *end = NULL;
    if (!*s || !(isdigit((unsigned char)*s) || *s == '.'))
        usage_error("%s: '%s' is not a number", opt, s);
    errno = 0;
    double v = strtod(s, &end);
    if (errno == ERANGE || *end || !(v >= lo && v <= hi) || (!allow_zero && !(v > 0.0)))
        usage_error("%s: '%s' is out of range (%s%g, %g]", opt, s, allow_zero ? "[" : "", lo, hi);
    return v;
}

static void usage(void)
{
    printf(
        "usage: " KERNEL_NAME " --role server|client|auto [options]\n"
        "Socket (TCP/UDP, no MPI) benchmark kernel of hpcnet.  One binary plays\n"
        "both roles; the client prints \"hpcnet kernel output format 1\" on stdout.\n"
        "\n"
        "roles and connection:\n"
        "  --role R             server, client or auto (auto: rank 0 = server,\n"
        "                       rank 1 = client, rank from the first set of\n"
        "                       OMPI_COMM_WORLD_RANK, PMIX_RANK, PMI_RANK, SLURM_PROCID)\n"
        "  --port P             server TCP port (default %d; 0 = ephemeral, then\n"
        "                       use --rendezvous); UDP uses the same number if free\n"
        "  --bind ADDR          server: listen address (default 127.0.0.1;\n"
        "                       0.0.0.0 or :: = all, rendezvous then names the host)\n"
        "  --server-addr HOST   client: server host (default 127.0.0.1)\n"
        "  --rendezvous FILE    server writes \"host:port\" to FILE (atomically) once\n"
        "                       listening and removes it at exit; client waits for\n"
        "                       FILE and connects to the address in it\n"
        "  --connect-timeout S  client: give up connecting after S s (default 30);\n"
        "                       both: a data transfer stalled for S s is an error\n"
        "  --timeout S          overall time limit of either role (default 120)\n"
        "\n"
        "test (client side; the server learns it over the control connection):\n"
        "  --test T             tcp_stream (default), tcp_bidir, tcp_rr,\n"
        "                       udp_stream, udp_rr\n"
        "  --sizes A,B,...      explicit message sizes (bytes, K/M/G suffix, binary)\n"
        "  --min-size S         smallest size; runs min, every power of two in\n"
        "  --max-size S         [min,max], and max.  Defaults: streams 1..64K\n"
        "                       (udp_stream 1..32K), rr 32..16K.  UDP at most %u\n"
        "  --duration-ms MS     time per size (default 300); rr: adaptive\n"
        "                       iterations fill MS unless --iters is given\n"
        "  --iters N            rr: fixed number of timed transactions per size\n"
        "  --warmup N           rr: untimed transactions per size after the\n"
        "                       first one (default 100)\n"
        "  --sndbuf S           SO_SNDBUF on both ends (default: system, autotuned)\n"
        "  --rcvbuf S           SO_RCVBUF on both ends (default: system, autotuned)\n"
        "  --recv-size S        stream receive size per recv() (default max(size,128K))\n"
        "  --nodelay            streams: set TCP_NODELAY (rr tests always do)\n"
        "  --rate-mbps R        udp_stream: pace the sender at R Mbit/s of payload\n"
        "                       (default 0 = as fast as possible)\n"
        "  --udp-timeout-ms MS  udp_rr: a transaction without reply after MS ms is\n"
        "                       lost (default 100)\n"
        "  --validate           check payload contents (receiver side)\n"
        "  --verbose            server: progress on stderr\n"
        "  --help, --version\n",
        DEFAULT_PORT, UDP_MAX_PAYLOAD);
}

enum {
    O_ROLE = 1000, O_TEST, O_SIZES, O_MIN, O_MAX, O_DUR, O_ITERS, O_WARMUP, O_SNDBUF, O_RCVBUF, O_RSZ, O_PORT,
    O_BIND, O_SADDR, O_RV, O_CTO, O_TO, O_RATE, O_UTO, O_NODELAY, O_VALIDATE, O_VERBOSE, O_HELP, O_VERSION
};

static void parse_args(int argc, char **argv, struct opts *o)
{
    static const struct option longopts[] = {
        {"role", required_argument, NULL, O_ROLE},
        {"test", required_argument, NULL, O_TEST},
        {"sizes", required_argument, NULL, O_SIZES},
        {"min-size", required_argument, NULL, O_MIN},
        {"max-size", required_argument, NULL, O_MAX},
        {"duration-ms", required_argument, NULL, O_DUR},
        {"iters", required_argument, NULL, O_ITERS},
        {"warmup", required_argument, NULL, O_WARMUP},
        {"sndbuf", required_argument, NULL, O_SNDBUF},
        {"rcvbuf", required_argument, NULL, O_RCVBUF},
        {"recv-size", required_argument, NULL, O_RSZ},
        {"port", required_argument, NULL, O_PORT},
        {"bind", required_argument, NULL, O_BIND},
        {"server-addr", required_argument, NULL, O_SADDR},
        {"rendezvous", required_argument, NULL, O_RV},
        {"connect-timeout", required_argument, NULL, O_CTO},
        {"timeout", required_argument, NULL, O_TO},
        {"rate-mbps", required_argument, NULL, O_RATE},
        {"udp-timeout-ms", required_argument, NULL, O_UTO},
        {"nodelay", no_argument, NULL, O_NODELAY},
        {"validate", no_argument, NULL, O_VALIDATE},
        {"verbose", no_argument, NULL, O_VERBOSE},
        {"help", no_argument, NULL, O_HELP},
        {"version", no_argument, NULL, O_VERSION},
        {NULL, 0, NULL, 0},
    };
    memset(o, 0, sizeof *o);
    o->role = -1;
    o->test = T_TCP_STREAM;
    o->duration_ms = 300;
    o->warmup = 100;
    o->port = DEFAULT_PORT;
    o->bind_addr = "127.0.0.1";
    o->server_addr = "127.0.0.1";
    o->connect_timeout = 30.0;
    o->timeout = 120.0;
    o->udp_timeout_ms = 100;

    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        switch (c) {
        case O_ROLE:
            if (!strcmp(optarg, "server"))
                o->role = ROLE_SERVER;
            else if (!strcmp(optarg, "client"))
                o->role = ROLE_CLIENT;
            else if (!strcmp(optarg, "auto"))
                o->role = ROLE_AUTO;
            else
                usage_error("--role: '%s' is not server, client or auto", optarg);
            break;
        case O_TEST: {
            int t;
            for (t = 0; t < T_COUNT; t++)
                if (!strcmp(optarg, test_names[t]))
                    break;
            if (t == T_COUNT)
                usage_error("--test: unknown test '%s' (tcp_stream, tcp_bidir, tcp_rr, udp_stream, udp_rr)",
                            optarg);
            o->test = t;
            break;
        }
        case O_SIZES:
            o->sizes_arg = optarg;
            break;
        case O_MIN:
            o->min_size = opt_size("--min-size", optarg, 1, MAX_MSG_SIZE);
            o->have_min = 1;
            break;
        case O_MAX:
            o->max_size = opt_size("--max-size", optarg, 1, MAX_MSG_SIZE);
            o->have_max = 1;
            break;
        case O_DUR:
            o->duration_ms = opt_long("--duration-ms", optarg, 1, 3600000L);
            break;
        case O_ITERS:
            o->iters = opt_long("--iters", optarg, 1, MAX_ITERS);
            o->have_iters = 1;
            break;
        case O_WARMUP:
            o->warmup = opt_long("--warmup", optarg, 0, 1000000L);
            o->have_warmup = 1;
            break;
        case O_SNDBUF:
            o->sndbuf = (long)opt_size("--sndbuf", optarg, 1, (uint64_t)1 << 30);
            break;
        case O_RCVBUF:
            o->rcvbuf = (long)opt_size("--rcvbuf", optarg, 1, (uint64_t)1 << 30);
            break;
        case O_RSZ:
            o->recv_size = (long)opt_size("--recv-size", optarg, 1, (uint64_t)64 << 20);
            break;
        case O_PORT:
            o->port = opt_long("--port", optarg, 0, 65535);
            break;
        case O_BIND:
            if (!*optarg)
                usage_error("--bind: empty address");
            o->bind_addr = optarg;
            break;
        case O_SADDR:
            if (!*optarg)
                usage_error("--server-addr: empty address");
            o->server_addr = optarg;
            break;
        case O_RV:
            if (!*optarg || strlen(optarg) >= sizeof g_rv_path - 32)
                usage_error("--rendezvous: bad file name");
            o->rendezvous = optarg;
            break;
        case O_CTO:
            o->connect_timeout = opt_double("--connect-timeout", optarg, 0.0, 86400.0, 0);
            break;
        case O_TO:
            o->timeout = opt_double("--timeout", optarg, 0.0, 86400.0, 0);
            break;
        case O_RATE:
            o->rate_mbps = opt_double("--rate-mbps", optarg, 0.0, 1e7, 1);
            o->have_rate = 1;
            break;
        case O_UTO:
            o->udp_timeout_ms = opt_long("--udp-timeout-ms", optarg, 1, 60000L);
            o->have_udp_timeout = 1;
            break;
        case O_NODELAY:
            o->nodelay = 1;
            break;
        case O_VALIDATE:
            o->validate = 1;
            break;
        case O_VERBOSE:
            o->verbose = 1;
            break;
        case 'h':
        case O_HELP:
            usage();
            exit(0);
        case O_VERSION:
            printf(KERNEL_NAME " %d (hpcnet kernel output format %d, control protocol %d)\n", FORMAT_VERSION,
                   FORMAT_VERSION, PROTO_VERSION);
            exit(0);
        case ':':
            usage_error("option %s needs a value", argv[optind - 1]);
        default:
            usage_error("unknown option '%s'", argv[optind - 1]);
        }
    }
    if (optind < argc)
        usage_error("unexpected argument '%s'", argv[optind]);
    if (o->role < 0)
        usage_error("--role is required (server, client or auto)");
    if (o->sizes_arg && (o->have_min || o->have_max))
        usage_error("--sizes cannot be combined with --min-size/--max-size");
    if (o->have_iters && !is_rr(o->test))
        usage_error("--iters applies to tcp_rr and udp_rr only");
    if (o->have_warmup && !is_rr(o->test))
        usage_error("--warmup applies to tcp_rr and udp_rr only");
    if (o->have_rate && o->test != T_UDP_STREAM)
        usage_error("--rate-mbps applies to udp_stream only");
    if (o->have_udp_timeout && o->test != T_UDP_RR)
        usage_error("--udp-timeout-ms applies to udp_rr only");
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* sorted, duplicate-free size list; validated against the test's limits */
static int make_sizes(const struct opts *o, uint64_t *v)
{
    int n = 0;
    uint64_t limit = is_udp(o->test) ? UDP_MAX_PAYLOAD : MAX_MSG_SIZE;
    if (o->sizes_arg) {
        const char *p = o->sizes_arg;
        if (!*p)
            usage_error("--sizes: empty list");
        for (;;) {
            const char *e = strchr(p, ',');
            size_t len = e ? (size_t)(e - p) : strlen(p);
            char tok[64];
            if (len == 0 || len >= sizeof tok)
                usage_error("--sizes: bad element in '%s'", o->sizes_arg);
            memcpy(tok, p, len);
            tok[len] = '\0';
            if (n == MAX_SIZES)
                usage_error("--sizes: more than %d sizes", MAX_SIZES);
            v[n++] = opt_size("--sizes", tok, 1, MAX_MSG_SIZE);
            if (!e)
                break;
            p = e + 1;
        }
    } else {
        uint64_t lo, hi;
        if (is_rr(o->test)) {
            lo = 32;
            hi = 16384;
        } else {
            lo = 1;
            hi = o->test == T_UDP_STREAM ? 32768 : 65536;
        }
        if (o->have_min)
            lo = o->min_size;
        if (o->have_max)
            hi = o->max_size;
        if (o->have_min && !o->have_max && hi < lo)
            hi = lo; /* only --min-size, above the default range: that size */
        if (o->have_max && !o->have_min && hi < lo)
            lo = hi; /* only --max-size, below the default range: that size */
        if (lo > hi)
            usage_error("--min-size (%" PRIu64 ") is larger than --max-size (%" PRIu64 ")", lo, hi);
        v[n++] = lo;
        for (uint64_t p2 = 1; p2 <= hi; p2 *= 2)
            if (p2 > lo)
                v[n++] = p2;
        v[n++] = hi;
    }
    qsort(v, (size_t)n, sizeof *v, cmp_u64);
    int m = 0;
    for (int k = 0; k < n; k++)
        if (m == 0 || v[k] != v[m - 1])
            v[m++] = v[k];
    if (v[m - 1] > limit)
        usage_error("size %" PRIu64 " is too large for %s (at most %" PRIu64 " bytes)", v[m - 1],
                    test_names[o->test], limit);
    return m;
}

/* ------------------------------------------------------------------------ */
/* socket helpers                                                            */

static void set_int_opt(int fd, int level, int name, int val, const char *what)
{
    if (setsockopt(fd, level, name, &val, sizeof val) != 0)
        die("setsockopt(%s=%d): %s", what, val, strerror(errno));
}

static int get_int_opt(int fd, int level, int name)
{
    int v = 0;
    socklen_t l = sizeof v;
    if (getsockopt(fd, level, name, &v, &l) != 0)
        return -1;
    return v;
}

static void set_bufs(int fd, long sndbuf, long rcvbuf)
{
    if (sndbuf > 0)
        set_int_opt(fd, SOL_SOCKET, SO_SNDBUF, (int)sndbuf, "SO_SNDBUF");
    if (rcvbuf > 0)
        set_int_opt(fd, SOL_SOCKET, SO_RCVBUF, (int)rcvbuf, "SO_RCVBUF");
}

static void set_timeo_ns(int fd, int name, uint64_t ns)
{
    struct timeval tv;
    if (ns < 1000)
        ns = 1000; /* a zero timeval would mean "forever" */
    tv.tv_sec = (time_t)(ns / 1000000000ull);
    tv.tv_usec = (suseconds_t)((ns % 1000000000ull) / 1000u);
    if (setsockopt(fd, SOL_SOCKET, name, &tv, sizeof tv) != 0)
        die("setsockopt(SO_%sTIMEO): %s", name == SO_RCVTIMEO ? "RCV" : "SND", strerror(errno));
}

/* data/control sockets: a transfer making no progress for 'stall_s' fails */
static void set_stall_timeouts(int fd, double stall_s)
{
    uint64_t ns = (uint64_t)(stall_s * 1e9);
    set_timeo_ns(fd, SO_RCVTIMEO, ns);
    set_timeo_ns(fd, SO_SNDTIMEO, ns);
}

static void set_nonblock(int fd, int on)
{
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, on ? (fl | O_NONBLOCK) : (fl & ~O_NONBLOCK)) < 0)
        die("fcntl: %s", strerror(errno));
}

/* Sends all of buf (loops on short writes, retries EINTR).
 * 0 on success, -1 with errno on failure. */
static int send_all(int fd, const void *buf, size_t len)
{
    const char *p = (const char *)buf;
    while (len > 0) {
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        if (n == 0) {
            errno = EIO;
            return -1;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

/* Receives exactly len bytes (loops on short reads, retries EINTR).
 * 1: complete; 0: orderly EOF before the first byte; -2: EOF in the middle;
 * -1: error (errno). */
static int recv_full(int fd, void *buf, size_t len)
{
    char *p = (char *)buf;
    size_t got = 0;
    while (got < len) {
        ssize_t n = recv(fd, p + got, len - got, 0);
        if (n > 0) {
            got += (size_t)n;
            continue;
        }
        if (n == 0)
            return got == 0 ? 0 : -2;
        if (errno == EINTR)
            continue;
        return -1;
    }
    return 1;
}

static void addr_to_str(const struct sockaddr *sa, char *out, size_t len)
{
    char host[NI_MAXHOST], serv[NI_MAXSERV];
    socklen_t sl = sa->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
    if (getnameinfo(sa, sl, host, sizeof host, serv, sizeof serv, NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
        snprintf(out, len, "?");
        return;
    }
    int n = strchr(host, ':') ? snprintf(out, len, "[%s]:%s", host, serv) : snprintf(out, len, "%s:%s", host, serv);
    if (n < 0 || (size_t)n >= len)
        snprintf(out, len, "?");
}

static int sa_port(const struct sockaddr_storage *ss)
{
    if (ss->ss_family == AF_INET6)
        return ntohs(((const struct sockaddr_in6 *)ss)->sin6_port);
    return ntohs(((const struct sockaddr_in *)ss)->sin_port);
}

static void sa_set_port(struct sockaddr_storage *ss, int port)
{
    if (ss->ss_family == AF_INET6)
        ((struct sockaddr_in6 *)ss)->sin6_port = htons((uint16_t)port);
    else
        ((struct sockaddr_in *)ss)->sin_port = htons((uint16_t)port);
}

static socklen_t sa_len(const struct sockaddr_storage *ss)
{
    return ss->ss_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
}

/* Connects a TCP socket with a timeout.  Socket buffers are set before
 * connect() so that the window scale is negotiated for them.  Returns the
 * connected (blocking) fd, or -1 with errno set. */
static int tcp_connect(const struct sockaddr *sa, socklen_t salen, long sndbuf, long rcvbuf, int nodelay,
                       int timeout_ms)
{
    int fd = socket(sa->sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    set_bufs(fd, sndbuf, rcvbuf);
    if (nodelay)
        set_int_opt(fd, IPPROTO_TCP, TCP_NODELAY, 1, "TCP_NODELAY");
    set_nonblock(fd, 1);
    int r = connect(fd, sa, salen);
    if (r != 0 && errno != EINPROGRESS && errno != EINTR) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    if (r != 0) {
        uint64_t deadline = now_ns() + (uint64_t)timeout_ms * 1000000ull;
        for (;;) {
            struct pollfd p = {fd, POLLOUT, 0};
            int ms = ms_until(deadline);
            int pr = ms > 0 ? poll(&p, 1, ms) : 0;
            if (pr < 0 && errno == EINTR)
                continue;
            if (pr <= 0) {
                int e = pr == 0 ? ETIMEDOUT : errno;
                close(fd);
                errno = e;
                return -1;
            }
            break;
        }
        int err = 0;
        socklen_t l = sizeof err;
        if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &l) != 0)
            err = errno;
        if (err) {
            close(fd);
            errno = err;
            return -1;
        }
    }
    set_nonblock(fd, 0);
    return fd;
}

/* ------------------------------------------------------------------------ */
/* control connection: text lines "word key=value ...\n"                     */

struct ctrl {
    int fd;
    size_t len;
    char buf[8192];
};

static int ctrl_has_line(const struct ctrl *c)
{
    return memchr(c->buf, '\n', c->len) != NULL;
}

/* One line (without "\n") into out.  Waits at most timeout_ms (negative:
 * until the overall deadline).  1: line; 0: EOF; -1: timeout; -2: error. */
static int ctrl_getline(struct ctrl *c, char *out, size_t outlen, int timeout_ms)
{
    uint64_t deadline = timeout_ms < 0 ? g_deadline_ns : now_ns() + (uint64_t)timeout_ms * 1000000ull;
    if (deadline > g_deadline_ns)
        deadline = g_deadline_ns;
    for (;;) {
        char *nl = (char *)memchr(c->buf, '\n', c->len);
        if (nl) {
            size_t l = (size_t)(nl - c->buf);
            if (l >= outlen) {
                errno = EMSGSIZE;
                return -2;
            }
            memcpy(out, c->buf, l);
            out[l] = '\0';
            if (l > 0 && out[l - 1] == '\r')
                out[l - 1] = '\0';
            memmove(c->buf, nl + 1, c->len - l - 1);
            c->len -= l + 1;
            return 1;
        }
        if (c->len == sizeof c->buf) {
            errno = EMSGSIZE;
            return -2;
        }
        int ms = ms_until(deadline);
        if (ms <= 0)
            return -1;
        struct pollfd p = {c->fd, POLLIN, 0};
        int r = poll(&p, 1, ms);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return -2;
        }
        if (r == 0)
            continue;
        ssize_t n = recv(c->fd, c->buf + c->len, sizeof c->buf - c->len, 0);
        if (n < 0) {
            if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)
                continue;
            return -2;
        }
        if (n == 0)
            return 0;
        c->len += (size_t)n;
    }
}

/* a line is waiting (buffered or readable) */
static int ctrl_ready(const struct ctrl *c)
{
    if (ctrl_has_line(c))
        return 1;
    struct pollfd p = {c->fd, POLLIN, 0};
    return poll(&p, 1, 0) > 0;
}

static void ctrl_send(int fd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void ctrl_send(int fd, const char *fmt, ...)
{
    char line[LINE_MAX_LEN];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line - 1, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof line - 1)
        die("control message too long");
    line[n++] = '\n';
    if (send_all(fd, line, (size_t)n) != 0)
        die("control connection: send failed: %s", io_strerror(errno));
}

/* "word": first token matches */
static int line_is(const char *line, const char *word)
{
    size_t n = strlen(word);
    return strncmp(line, word, n) == 0 && (line[n] == '\0' || line[n] == ' ');
}

/* value of " key=" in line, copied to out (up to the next blank) */
static int kv_str(const char *line, const char *key, char *out, size_t outlen)
{
    size_t kl = strlen(key);
    const char *p = line;
    while ((p = strstr(p, key)) != NULL) {
        if ((p == line || p[-1] == ' ') && p[kl] == '=') {
            const char *v = p + kl + 1;
            size_t l = strcspn(v, " ");
            if (l >= outlen)
                return -1;
            memcpy(out, v, l);
            out[l] = '\0';
            return 0;
        }
        p += kl;
    }
    return -1;
}

static int kv_u64(const char *line, const char *key, uint64_t *out)
{
    char v[64], *end = NULL;
    if (kv_str(line, key, v, sizeof v) != 0 || !isdigit((unsigned char)v[0]))
        return -1;
    errno = 0;
    unsigned long long x = strtoull(v, &end, 10);
    if (errno || *end)
        return -1;
    *out = (uint64_t)x;
    return 0;
}

static int kv_dbl(const char *line, const char *key, double *out)
{
    char v[64], *end = NULL;
    if (kv_str(line, key, v, sizeof v) != 0)
        return -1;
    errno = 0;
    double x = strtod(v, &end);
    if (errno || *end || !(x == x))
        return -1;
    *out = x;
    return 0;
}

/* ------------------------------------------------------------------------ */
/* shared data-path pieces                                                   */

struct stream_send {
    int fd;
    const unsigned char *buf;
    size_t size;
    uint64_t dur_ns;
    uint64_t bytes;
    uint64_t span_ns;
    int err; /* errno of a failure, 0 = ok */
};

/* Sends 'size'-byte messages for dur_ns, then shuts the write side down. */
static void *stream_sender(void *arg)
{
    struct stream_send *a = (struct stream_send *)arg;
    uint64_t t0 = now_ns(), end = t0 + a->dur_ns, t;
    do {
        if (send_all(a->fd, a->buf, a->size) != 0) {
            a->err = errno;
            break;
        }
        a->bytes += a->size;
        t = now_ns();
    } while (t < end);
    a->span_ns = now_ns() - t0;
    if (shutdown(a->fd, SHUT_WR) != 0 && !a->err)
        a->err = errno;
    return NULL;
}

struct stream_recv {
    int fd;
    unsigned char *buf;
    size_t rsz;
    uint64_t t0; /* reference start time */
    /* validation: ref[j] = pattern[j % size], length size + rsz */
    const unsigned char *ref;
    size_t size;
    uint64_t bytes;
    uint64_t span_ns;
    int err;
    int corrupt;
};

/* Receives until EOF; span from t0 to EOF. */
static void *stream_receiver(void *arg)
{
    struct stream_recv *a = (struct stream_recv *)arg;
    for (;;) {
        ssize_t n = recv(a->fd, a->buf, a->rsz, 0);
        if (n > 0) {
            if (a->ref && !a->corrupt && memcmp(a->buf, a->ref + a->bytes % a->size, (size_t)n) != 0)
                a->corrupt = 1;
            a->bytes += (uint64_t)n;
            continue;
        }
        if (n == 0)
            break;
        if (errno == EINTR)
            continue;
        a->err = errno;
        break;
    }
    a->span_ns = now_ns() - a->t0;
    return NULL;
}

/* reference buffer for stream validation: pattern repeated, size+rsz bytes */
static unsigned char *make_stream_ref(const unsigned char *pattern, size_t size, size_t rsz)
{
    unsigned char *ref = (unsigned char *)xalloc(size + rsz, 0);
    for (size_t j = 0; j < size + rsz; j++)
        ref[j] = pattern[j % size];
    return ref;
}

/* sequence number stamped into the first min(size, 8) bytes (big endian,
 * truncated to what fits) */
static void put_seq(unsigned char *buf, size_t size, uint64_t seq)
{
    size_t nb = size < 8 ? size : 8;
    for (size_t k = 0; k < nb; k++)
        buf[k] = (unsigned char)(seq >> (8 * (nb - 1 - k)));
}

static uint64_t get_seq(const unsigned char *buf, size_t size)
{
    size_t nb = size < 8 ? size : 8;
    uint64_t s = 0;
    for (size_t k = 0; k < nb; k++)
        s = (s << 8) | buf[k];
    return s;
}

static uint64_t seq_mask(size_t size)
{
    size_t nb = size < 8 ? size : 8;
    return nb >= 8 ? UINT64_MAX : (((uint64_t)1 << (8 * nb)) - 1);
}

static size_t stream_recv_size(long opt_rsz, size_t size)
{
    if (opt_rsz > 0)
        return (size_t)opt_rsz;
    return size > DEFAULT_RECV_MIN ? size : DEFAULT_RECV_MIN;
}

/* ------------------------------------------------------------------------ */
/* server                                                                    */

struct session {
    int test;
    long sndbuf, rcvbuf; /* applied to the server's data sockets */
    long recv_size;
    int nodelay;
    int validate;
    double stall_s;
    char cookie[17];
    int listen_fd;
    int udp_fd;
    struct ctrl ctl;
    unsigned char *pattern; /* 64 KiB payload pattern: UDP --validate */
};

static void vlog(const struct opts *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void vlog(const struct opts *o, const char *fmt, ...)
{
    if (!o->verbose)
        return;
    va_list ap;
    va_start(ap, fmt);
    fputs("# server: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

static void write_rendezvous(const char *path, const char *content)
{
    char tmp[PATH_MAX];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    FILE *f = fopen(tmp, "w");
    if (!f)
        die("--rendezvous: cannot create '%s': %s", tmp, strerror(errno));
    int bad = fprintf(f, "%s\n", content) < 0;
    bad |= fflush(f) != 0;
    bad |= fsync(fileno(f)) != 0 && errno != EINVAL;
    bad |= fclose(f) != 0;
    if (bad) {
        unlink(tmp);
        die("--rendezvous: cannot write '%s': %s", tmp, strerror(errno));
    }
    snprintf(g_rv_path, sizeof g_rv_path, "%s", path);
    if (rename(tmp, path) != 0) {
        int e = errno;
        unlink(tmp);
        die("--rendezvous: cannot rename '%s' to '%s': %s", tmp, path, strerror(e));
    }
    g_rv_written = 1;
}

/* Accepts the data connection of the current size: checks the greeting
 * (cookie) and ignores strangers.  Sets buffers and timeouts. */
static int accept_data(struct session *s, uint64_t *t_hello)
{
    for (;;) {
        struct pollfd p = {s->listen_fd, POLLIN, 0};
        int ms = ms_until(g_deadline_ns);
        if (ms <= 0)
            die("timed out waiting for the client's data connection");
        int r = poll(&p, 1, ms);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            die("poll: %s", strerror(errno));
        if (r == 0)
            continue;
        int fd = accept4(s->listen_fd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == EAGAIN || errno == ECONNABORTED)
                continue;
            die("accept: %s", strerror(errno));
        }
        set_timeo_ns(fd, SO_RCVTIMEO, 5000000000ull);
        char hello[DATA_HELLO_LEN + 1];
        char want[DATA_HELLO_LEN + 1];
        snprintf(want, sizeof want, "HPCNETDATA %s ", s->cookie);
        memset(want + strlen(want), '.', DATA_HELLO_LEN - strlen(want));
        want[DATA_HELLO_LEN - 1] = '\n';
        want[DATA_HELLO_LEN] = '\0';
        if (recv_full(fd, hello, DATA_HELLO_LEN) != 1 || memcmp(hello, want, DATA_HELLO_LEN) != 0) {
            close(fd); /* not our client: ignore */
            continue;
        }
        *t_hello = now_ns();
        set_bufs(fd, s->sndbuf, s->rcvbuf);
        if (s->nodelay || is_rr(s->test))
            set_int_opt(fd, IPPROTO_TCP, TCP_NODELAY, 1, "TCP_NODELAY");
        set_stall_timeouts(fd, s->stall_s);
        return fd;
    }
}

static void server_tcp_size(struct session *s, size_t size, uint64_t dur_ns)
{
    ctrl_send(s->ctl.fd, "ready");
    uint64_t t0 = 0;
    int fd = accept_data(s, &t0);
    int snd = get_int_opt(fd, SOL_SOCKET, SO_SNDBUF), rcv = get_int_opt(fd, SOL_SOCKET, SO_RCVBUF);
    size_t rsz = stream_recv_size(s->recv_size, size);
    if (s->test == T_TCP_STREAM || s->test == T_TCP_BIDIR) {
        unsigned char *sbuf = (unsigned char *)xalloc(size, 0);
        unsigned char *rbuf = (unsigned char *)xalloc(rsz, 0);
        unsigned char *ref = NULL;
        fill_pattern(sbuf, size);
        if (s->validate)
            ref = make_stream_ref(sbuf, size, rsz);
        struct stream_recv rv = {fd, rbuf, rsz, t0, ref, size, 0, 0, 0, 0};
        struct stream_send sd = {fd, sbuf, size, dur_ns, 0, 0, 0};
        pthread_t th;
        int threaded = 0;
        if (s->test == T_TCP_BIDIR) {
            int e = pthread_create(&th, NULL, stream_sender, &sd);
            if (e)
                die("pthread_create: %s", strerror(e));
            threaded = 1;
        }
        stream_receiver(&rv);
        if (threaded)
            pthread_join(th, NULL);
        if (rv.err)
            die("%s size %zu: receive failed: %s", test_names[s->test], size, io_strerror(rv.err));
        if (sd.err)
            die("%s size %zu: send failed: %s", test_names[s->test], size, io_strerror(sd.err));
        if (rv.corrupt)
            die("%s size %zu: received payload differs from what was sent (--validate)", test_names[s->test],
                size);
        /* values after the transfer: autotuning may have grown them */
        snd = get_int_opt(fd, SOL_SOCKET, SO_SNDBUF);
        rcv = get_int_opt(fd, SOL_SOCKET, SO_RCVBUF);
        close(fd);
        ctrl_send(s->ctl.fd,
                  "result recv=%" PRIu64 " recv_span=%.9f sent=%" PRIu64 " send_span=%.9f sndbuf=%d rcvbuf=%d",
                  rv.bytes, rv.span_ns * 1e-9, sd.bytes, sd.span_ns * 1e-9, snd, rcv);
        free(sbuf);
        free(rbuf);
        free(ref);
        return;
    }
    /* tcp_rr: echo size-byte messages until EOF */
    unsigned char *buf = (unsigned char *)xalloc(size, 0);
    uint64_t echoed = 0;
    for (;;) {
        int r = recv_full(fd, buf, size);
        if (r == 0)
            break;
        if (r == -2)
            die("tcp_rr size %zu: client closed the connection in the middle of a message", size);
        if (r < 0)
            die("tcp_rr size %zu: receive failed: %s", size, io_strerror(errno));
        if (send_all(fd, buf, size) != 0)
            die("tcp_rr size %zu: send failed: %s", size, io_strerror(errno));
        echoed++;
    }
    close(fd);
    ctrl_send(s->ctl.fd, "result echoed=%" PRIu64 " sndbuf=%d rcvbuf=%d", echoed, snd, rcv);
    free(buf);
}

/* Waits for the client's "end sent=N" while serving UDP.  Returns 1 when
 * the line was read (sets *sent), 0 when nothing is waiting. */
static int server_check_end(struct session *s, uint64_t *sent)
{
    if (!ctrl_ready(&s->ctl))
        return 0;
    char line[LINE_MAX_LEN];
    int r = ctrl_getline(&s->ctl, line, sizeof line, 5000);
    if (r == 0)
        die("client closed the control connection");
    if (r < 0)
        die("control connection: %s", r == -1 ? "timed out" : strerror(errno));
    if (!line_is(line, "end") || kv_u64(line, "sent", sent) != 0)
        die("protocol error: expected 'end sent=N', got '%.80s'", line);
    return 1;
}

static void server_udp_stream_size(struct session *s, size_t size)
{
    static unsigned char *bufs;
    static struct mmsghdr msgs[UDP_VLEN];
    static struct iovec iov[UDP_VLEN];
    if (!bufs) {
        bufs = (unsigned char *)xalloc((size_t)UDP_VLEN * 65536u, 0);
        for (int k = 0; k < UDP_VLEN; k++) {
            iov[k].iov_base = bufs + (size_t)k * 65536u;
            iov[k].iov_len = 65536u;
        }
    }
    set_timeo_ns(s->udp_fd, SO_RCVTIMEO, (uint64_t)UDP_POLL_MS * 1000000ull);
    ctrl_send(s->ctl.fd, "ready");
    uint64_t recvd = 0, ooo = 0, maxseq = 0, sent = 0, first_ns = 0, last_ns = 0, end_ns = 0;
    uint64_t mask = seq_mask(size), half = mask / 2 + 1;
    int have_seq = 0, ended = 0, corrupt = 0;
    uint64_t last_check = now_ns();
    for (;;) {
        for (int k = 0; k < UDP_VLEN; k++) {
            memset(&msgs[k].msg_hdr, 0, sizeof msgs[k].msg_hdr);
            msgs[k].msg_hdr.msg_iov = &iov[k];
            msgs[k].msg_hdr.msg_iovlen = 1;
        }
        int n = recvmmsg(s->udp_fd, msgs, UDP_VLEN, MSG_WAITFORONE, NULL);
        uint64_t t = now_ns();
        if (n > 0) {
            for (int k = 0; k < n; k++) {
                if (msgs[k].msg_len != size)
                    continue; /* stale datagram of another size, or a stranger */
                const unsigned char *d = (const unsigned char *)iov[k].iov_base;
                uint64_t seq = get_seq(d, size);
                if (!have_seq) {
                    maxseq = seq;
                    have_seq = 1;
                } else {
                    uint64_t diff = (seq - maxseq) & mask;
                    if (diff != 0 && diff < half)
                        maxseq = seq;
                    else
                        ooo++; /* late (reordered) or duplicate */
                }
                if (s->validate && size > 8 && memcmp(d + 8, s->pattern + 8, size - 8) != 0)
                    corrupt = 1;
                recvd++;
                if (!first_ns)
                    first_ns = t;
                last_ns = t;
            }
        } else if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
            die("udp_stream size %zu: receive failed: %s", size, strerror(errno));
        }
        if (t >= g_deadline_ns)
            die("udp_stream size %zu: overall timeout exceeded", size);
        if (!ended && (n <= 0 || t - last_check > 50000000ull)) {
            last_check = t;
            if (server_check_end(s, &sent)) {
                ended = 1;
                end_ns = now_ns();
            }
        }
        if (ended && (recvd >= sent || now_ns() - end_ns > (uint64_t)UDP_GRACE_MS * 1000000ull))
            break;
    }
    if (corrupt)
        die("udp_stream size %zu: received payload differs from what was sent (--validate)", size);
    ctrl_send(s->ctl.fd, "result recv=%" PRIu64 " span=%.9f ooo=%" PRIu64 " sndbuf=%d rcvbuf=%d", recvd,
              (last_ns - first_ns) * 1e-9, ooo, get_int_opt(s->udp_fd, SOL_SOCKET, SO_SNDBUF),
              get_int_opt(s->udp_fd, SOL_SOCKET, SO_RCVBUF));
}

static void server_udp_rr_size(struct session *s, size_t size)
{
    static unsigned char *buf;
    if (!buf)
        buf = (unsigned char *)xalloc(65536u, 0);
    set_timeo_ns(s->udp_fd, SO_RCVTIMEO, (uint64_t)UDP_POLL_MS * 1000000ull);
    ctrl_send(s->ctl.fd, "ready");
    uint64_t echoed = 0, sent = 0, last_check = now_ns();
    for (;;) {
        struct sockaddr_storage from;
        socklen_t fl = sizeof from;
        ssize_t n = recvfrom(s->udp_fd, buf, 65536u, 0, (struct sockaddr *)&from, &fl);
        uint64_t t = now_ns();
        if (n >= 0) {
            if ((size_t)n == size) {
                for (;;) {
                    ssize_t w = sendto(s->udp_fd, buf, size, 0, (struct sockaddr *)&from, fl);
                    if (w < 0 && errno == EINTR)
                        continue;
                    if (w < 0 && errno != ENOBUFS && errno != EAGAIN && errno != EWOULDBLOCK)
                        die("udp_rr size %zu: send failed: %s", size, strerror(errno));
                    break; /* a dropped reply is a lost transaction for the client */
                }
                echoed++;
            }
        } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
            die("udp_rr size %zu: receive failed: %s", size, strerror(errno));
        }
        if (t >= g_deadline_ns)
            die("udp_rr size %zu: overall timeout exceeded", size);
        if (n < 0 || t - last_check > 100000000ull) {
            last_check = t;
            if (server_check_end(s, &sent))
                break;
        }
    }
    ctrl_send(s->ctl.fd, "result echoed=%" PRIu64 " sndbuf=%d rcvbuf=%d", echoed,
              get_int_opt(s->udp_fd, SOL_SOCKET, SO_SNDBUF), get_int_opt(s->udp_fd, SOL_SOCKET, SO_RCVBUF));
}

/* UDP socket on the address the client reached, port = TCP port if free */
static int server_udp_socket(const struct session *s, long sndbuf, long rcvbuf)
{
    struct sockaddr_storage local;
    socklen_t ll = sizeof local;
    if (getsockname(s->ctl.fd, (struct sockaddr *)&local, &ll) != 0)
        die("getsockname: %s", strerror(errno));
    struct sockaddr_storage lst;
    socklen_t lstl = sizeof lst;
    if (getsockname(s->listen_fd, (struct sockaddr *)&lst, &lstl) != 0)
        die("getsockname: %s", strerror(errno));
    int fd = socket(local.ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        die("socket(UDP): %s", strerror(errno));
    set_bufs(fd, sndbuf, rcvbuf);
    sa_set_port(&local, sa_port(&lst));
    if (bind(fd, (struct sockaddr *)&local, sa_len(&local)) != 0) {
        sa_set_port(&local, 0);
        if (bind(fd, (struct sockaddr *)&local, sa_len(&local)) != 0)
            die("bind(UDP): %s", strerror(errno));
    }
    return fd;
}

static int run_server(const struct opts *o)
{
    g_is_server = 1;
    set_deadline(o->timeout);

    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    char portstr[16];
    snprintf(portstr, sizeof portstr, "%ld", o->port);
    int gai = getaddrinfo(o->bind_addr, portstr, &hints, &res);
    if (gai != 0)
        die("--bind %s: %s", o->bind_addr, gai_strerror(gai));
    int lfd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (lfd < 0)
        die("socket: %s", strerror(errno));
    set_int_opt(lfd, SOL_SOCKET, SO_REUSEADDR, 1, "SO_REUSEADDR");
    /* buffers given on the server's own command line are set before
     * listen(), so that accepted sockets negotiate the window scale for them */
    set_bufs(lfd, o->sndbuf, o->rcvbuf);
    if (bind(lfd, res->ai_addr, res->ai_addrlen) != 0)
        die("bind %s port %ld: %s", o->bind_addr, o->port, strerror(errno));
    freeaddrinfo(res);
    if (listen(lfd, 16) != 0)
        die("listen: %s", strerror(errno));
    struct sockaddr_storage ls;
    socklen_t lsl = sizeof ls;
    if (getsockname(lfd, (struct sockaddr *)&ls, &lsl) != 0)
        die("getsockname: %s", strerror(errno));
    char where[NI_MAXHOST + 16];
    addr_to_str((struct sockaddr *)&ls, where, sizeof where);
    int wildcard = 0;
    if (ls.ss_family == AF_INET)
        wildcard = ((struct sockaddr_in *)&ls)->sin_addr.s_addr == htonl(INADDR_ANY);
    else if (ls.ss_family == AF_INET6)
        wildcard = IN6_IS_ADDR_UNSPECIFIED(&((struct sockaddr_in6 *)&ls)->sin6_addr);
    if (wildcard) {
        char host[256];
        hostname_token(host, sizeof host);
        snprintf(where, sizeof where, "%s:%d", host, sa_port(&ls));
    }
    fprintf(stderr, "# " KERNEL_NAME " server listening on %s\n", where);
    fflush(stderr);
    if (o->rendezvous)
        write_rendezvous(o->rendezvous, where);

    struct session *s = (struct session *)calloc(1, sizeof *s);
    if (!s)
        die("out of memory");
    s->listen_fd = lfd;
    s->udp_fd = -1;
    char line[LINE_MAX_LEN];

    /* the one client session: first connection that says a proper hello */
    for (;;) {
        struct pollfd p = {lfd, POLLIN, 0};
        int ms = ms_until(g_deadline_ns);
        if (ms <= 0)
            die("no client connected within %g s (--timeout)", o->timeout);
        int r = poll(&p, 1, ms);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            die("poll: %s", strerror(errno));
        if (r == 0)
            continue;
        int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == EAGAIN || errno == ECONNABORTED)
                continue;
            die("accept: %s", strerror(errno));
        }
        set_int_opt(fd, IPPROTO_TCP, TCP_NODELAY, 1, "TCP_NODELAY");
        set_stall_timeouts(fd, o->connect_timeout);
        s->ctl.fd = fd;
        s->ctl.len = 0;
        r = ctrl_getline(&s->ctl, line, sizeof line, 5000);
        if (r == 1 && line_is(line, "hello"))
            break;
        vlog(o, "ignoring a connection without hello");
        close(fd);
    }
    g_ctrl_fd = s->ctl.fd;

    uint64_t proto = 0, snd = 0, rcv = 0, rsz = 0, nodelay = 0, validate = 0;
    double ctimeout = 0, cstall = 0;
    char tname[32];
    if (kv_u64(line, "proto", &proto) != 0 || proto != PROTO_VERSION)
        die("client speaks control protocol %" PRIu64 ", this server speaks %d (same binary on both ends?)", proto,
            PROTO_VERSION);
    if (kv_str(line, "test", tname, sizeof tname) != 0 || kv_u64(line, "sndbuf", &snd) != 0 ||
        kv_u64(line, "rcvbuf", &rcv) != 0 || kv_u64(line, "rsz", &rsz) != 0 ||
        kv_u64(line, "nodelay", &nodelay) != 0 || kv_u64(line, "validate", &validate) != 0 ||
        kv_dbl(line, "timeout", &ctimeout) != 0 || kv_dbl(line, "stall", &cstall) != 0)
        die("protocol error: malformed hello '%.120s'", line);
    s->test = -1;
    for (int t = 0; t < T_COUNT; t++)
        if (!strcmp(tname, test_names[t]))
            s->test = t;
    if (s->test < 0)
        die("client asked for unknown test '%s'", tname);
    if (snd > (1u << 30) || rcv > (1u << 30) || rsz > (64u << 20) || !(ctimeout > 0) || !(cstall > 0))
        die("protocol error: bad values in hello '%.120s'", line);
    /* the server's own --sndbuf/--rcvbuf win over the client's */
    s->sndbuf = o->sndbuf ? o->sndbuf : (long)snd;
    s->rcvbuf = o->rcvbuf ? o->rcvbuf : (long)rcv;
    s->recv_size = (long)rsz;
    s->nodelay = (int)nodelay;
    s->validate = (int)validate;
    s->stall_s = cstall;
    /* the client's time budget governs the session from now on */
    if (now_ns() + (uint64_t)((ctimeout + 10.0) * 1e9) > g_deadline_ns)
        set_deadline(ctimeout + 10.0);
    set_stall_timeouts(s->ctl.fd, cstall);
    {
        uint64_t a = now_ns() ^ ((uint64_t)getpid() << 32), b = (uint64_t)(uintptr_t)s;
        a ^= b * 0x9E3779B97F4A7C15ull;
        a ^= a >> 29;
        a *= 0xBF58476D1CE4E5B9ull;
        a ^= a >> 32;
        snprintf(s->cookie, sizeof s->cookie, "%016" PRIx64, a);
    }
    int udp_port = 0;
    if (is_udp(s->test)) {
        s->udp_fd = server_udp_socket(s, s->sndbuf, s->rcvbuf);
        struct sockaddr_storage us;
        socklen_t usl = sizeof us;
        if (getsockname(s->udp_fd, (struct sockaddr *)&us, &usl) != 0)
            die("getsockname: %s", strerror(errno));
        udp_port = sa_port(&us);
        s->pattern = (unsigned char *)xalloc(65536u, 0);
        fill_pattern(s->pattern, 65536u);
    }
    char host[256];
    hostname_token(host, sizeof host);
    ctrl_send(s->ctl.fd, "ok proto=%d host=%s cookie=%s udp_port=%d", PROTO_VERSION, host, s->cookie, udp_port);
    vlog(o, "session: test %s", test_names[s->test]);

    for (;;) {
        int r = ctrl_getline(&s->ctl, line, sizeof line, -1);
        if (r == 0)
            die("client closed the control connection before the end of the test");
        if (r == -1)
            die("timed out waiting for the client");
        if (r < 0)
            die("control connection: %s", strerror(errno));
        if (line_is(line, "bye")) {
            ctrl_send(s->ctl.fd, "bye");
            break;
        }
        uint64_t size = 0, dur_ms = 0;
        if (!line_is(line, "run") || kv_u64(line, "size", &size) != 0 || kv_u64(line, "dur", &dur_ms) != 0)
            die("protocol error: unexpected '%.80s'", line);
        uint64_t limit = is_udp(s->test) ? UDP_MAX_PAYLOAD : MAX_MSG_SIZE;
        if (size < 1 || size > limit || dur_ms < 1 || dur_ms > 3600000u)
            die("protocol error: bad size or duration in '%.80s'", line);
        vlog(o, "size %" PRIu64, size);
        switch (s->test) {
        case T_UDP_STREAM:
            server_udp_stream_size(s, (size_t)size);
            break;
        case T_UDP_RR:
            server_udp_rr_size(s, (size_t)size);
            break;
        default:
            server_tcp_size(s, (size_t)size, dur_ms * 1000000ull);
            break;
        }
    }
    /* wait for the client to close, so our "bye" is not lost in a reset */
    {
        char tmp[64];
        struct pollfd p = {s->ctl.fd, POLLIN, 0};
        if (poll(&p, 1, 2000) > 0) {
            ssize_t n = recv(s->ctl.fd, tmp, sizeof tmp, 0);
            (void)n;
        }
    }
    g_ctrl_fd = -1;
    close(s->ctl.fd);
    if (s->udp_fd >= 0)
        close(s->udp_fd);
    close(lfd);
    remove_rendezvous();
    free(s->pattern);
    free(s);
    return 0;
}

/* ------------------------------------------------------------------------ */
/* client                                                                    */

struct client {
    const struct opts *o;
    struct ctrl ctl;
    struct sockaddr_storage server; /* control peer; data connects here */
    char server_str[NI_MAXHOST + 16];
    char server_host[256];
    char cookie[17];
    int udp_fd;
    /* effective buffer sizes: client data socket and server data socket */
    int snd, rcv, srv_snd, srv_rcv;
    int have_bufs;
    int mss; /* TCP_MAXSEG of the last TCP data connection */
};

static void client_expect(struct client *c, char *out, size_t outlen, const char *word, const char *what)
{
    int r = ctrl_getline(&c->ctl, out, outlen, -1);
    if (r == 0)
        die("server closed the control connection while the client waited for %s", what);
    if (r == -1)
        die("timed out waiting for %s from the server (--timeout)", what);
    if (r < 0)
        die("control connection error while waiting for %s: %s", what, io_strerror(errno));
    if (line_is(out, "error"))
        die("server: %s", out[5] ? out + 6 : "unknown error");
    if (!line_is(out, word))
        die("protocol error: expected %s, got '%.80s'", what, out);
}

/* A data transfer failed.  If the server said why (it sends "error ..."
 * before it exits), that is the better message. */
static void client_fail(struct client *c, const char *fmt, ...) __attribute__((noreturn, format(printf, 2, 3)));
static void client_fail(struct client *c, const char *fmt, ...)
{
    char msg[1024], line[LINE_MAX_LEN];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (ctrl_getline(&c->ctl, line, sizeof line, 500) == 1 && line_is(line, "error"))
        die("server: %s (client: %s)", line[5] ? line + 6 : "unknown error", msg);
    die("%s", msg);
}

/* host:port or [v6]:port -> host, port.  0 ok, -1 malformed */
static int parse_hostport(const char *s, char *host, size_t hl, int *port)
{
    const char *colon;
    if (*s == '[') {
        const char *rb = strchr(s, ']');
        if (!rb || rb[1] != ':' || (size_t)(rb - s - 1) >= hl || rb == s + 1)
            return -1;
        memcpy(host, s + 1, (size_t)(rb - s - 1));
        host[rb - s - 1] = '\0';
        colon = rb + 1;
    } else {
        colon = strrchr(s, ':');
        if (!colon || colon == s || (size_t)(colon - s) >= hl)
            return -1;
        memcpy(host, s, (size_t)(colon - s));
        host[colon - s] = '\0';
        if (strchr(host, ':'))
            return -1;
    }
    char *end = NULL;
    long p = strtol(colon + 1, &end, 10);
    if (!isdigit((unsigned char)colon[1]) || *end || p < 1 || p > 65535)
        return -1;
    *port = (int)p;
    return 0;
}

/* 1: address read; 0: file absent/empty; -1: malformed (message in err) */
static int read_rendezvous(const char *path, char *host, size_t hl, int *port, char *err, size_t el)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    char buf[512];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    while (n > 0 && isspace((unsigned char)buf[n - 1]))
        buf[--n] = '\0';
    if (n == 0)
        return 0;
    if (parse_hostport(buf, host, hl, port) != 0) {
        snprintf(err, el, "rendezvous file '%s' does not hold host:port ('%.60s')", path, buf);
        return -1;
    }
    return 1;
}

static void client_connect(struct client *c)
{
    const struct opts *o = c->o;
    uint64_t deadline = now_ns() + (uint64_t)(o->connect_timeout * 1e9);
    char last[512] = "no attempt";
    int saw_file = 0;
    if (!o->rendezvous && o->port == 0)
        usage_error("the client needs --port (not 0) or --rendezvous");
    for (;;) {
        char host[256];
        int port = 0, have = 0;
        if (o->rendezvous) {
            int r = read_rendezvous(o->rendezvous, host, sizeof host, &port, last, sizeof last);
            if (r != 0)
                saw_file = 1;
            have = r == 1;
        } else {
            snprintf(host, sizeof host, "%s", o->server_addr);
            port = (int)o->port;
            have = 1;
        }
        if (have) {
            struct addrinfo hints, *res = NULL;
            memset(&hints, 0, sizeof hints);
            hints.ai_family = AF_UNSPEC;
            hints.ai_socktype = SOCK_STREAM;
            hints.ai_flags = AI_NUMERICSERV;
            char ps[16];
            snprintf(ps, sizeof ps, "%d", port);
            int gai = getaddrinfo(host, ps, &hints, &res);
            if (gai != 0) {
                snprintf(last, sizeof last, "cannot resolve '%s': %s", host, gai_strerror(gai));
            } else {
                for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
                    int ms = ms_until(deadline);
                    if (ms > 2000)
                        ms = 2000;
                    if (ms < 50)
                        ms = 50;
                    int fd = tcp_connect(ai->ai_addr, ai->ai_addrlen, 0, 0, 1, ms);
                    char as[NI_MAXHOST + 16];
                    addr_to_str(ai->ai_addr, as, sizeof as);
                    if (fd >= 0) {
                        memcpy(&c->server, ai->ai_addr, ai->ai_addrlen);
                        snprintf(c->server_str, sizeof c->server_str, "%s", as);
                        set_stall_timeouts(fd, o->connect_timeout);
                        c->ctl.fd = fd;
                        c->ctl.len = 0;
                        freeaddrinfo(res);
                        return;
                    }
                    if (snprintf(last, sizeof last, "connect to %s: %s", as, strerror(errno)) >= (int)sizeof last)
                        last[sizeof last - 1] = '\0';
                }
                freeaddrinfo(res);
            }
        }
        if (now_ns() >= deadline)
            break;
        int ms = ms_until(deadline);
        struct timespec ts = {0, (long)(ms < 100 ? ms : 100) * 1000000L};
        while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
            ;
    }
    if (o->rendezvous && !saw_file)
        die("rendezvous file '%s' did not appear within %g s (--connect-timeout); is the server running?",
            o->rendezvous, o->connect_timeout);
    die("could not connect to the server within %g s (--connect-timeout): %s", o->connect_timeout, last);
}

static int client_data_connect(struct client *c, int nodelay)
{
    const struct opts *o = c->o;
    int ms = ms_until(g_deadline_ns);
    int cto = (int)(o->connect_timeout * 1000.0);
    if (cto < ms)
        ms = cto;
    int fd = tcp_connect((struct sockaddr *)&c->server, sa_len(&c->server), o->sndbuf, o->rcvbuf, nodelay,
                         ms > 0 ? ms : 1);
    if (fd < 0)
        client_fail(c, "data connection to %s: %s", c->server_str, strerror(errno));
    set_stall_timeouts(fd, o->connect_timeout);
    char hello[DATA_HELLO_LEN + 1];
    snprintf(hello, sizeof hello, "HPCNETDATA %s ", c->cookie);
    memset(hello + strlen(hello), '.', DATA_HELLO_LEN - strlen(hello));
    hello[DATA_HELLO_LEN - 1] = '\n';
    if (send_all(fd, hello, DATA_HELLO_LEN) != 0)
        die("data connection: send failed: %s", io_strerror(errno));
    return fd;
}

static void note_bufs(struct client *c, int fd, const char *result)
{
    uint64_t v;
    c->snd = get_int_opt(fd, SOL_SOCKET, SO_SNDBUF);
    c->rcv = get_int_opt(fd, SOL_SOCKET, SO_RCVBUF);
    c->srv_snd = kv_u64(result, "sndbuf", &v) == 0 ? (int)v : -1;
    c->srv_rcv = kv_u64(result, "rcvbuf", &v) == 0 ? (int)v : -1;
    c->have_bufs = 1;
    if (!is_udp(c->o->test))
        c->mss = get_int_opt(fd, IPPROTO_TCP, TCP_MAXSEG);
}

static double mbps(uint64_t bytes, double secs) { return secs > 0 ? (double)bytes / secs / 1e6 : 0.0; }

struct rowbuf {
    int n;
    char rows[MAX_SIZES][512];
    double best;      /* summary: best value and its size */
    uint64_t best_size;
    double first_rtt; /* rr: first transaction of the first size, us */
    int validated;
};

/* Stream tests: remember the size with the highest throughput. */
static void stream_best(struct rowbuf *rb, size_t size, double rate)
{
    if (rate > rb->best) {
        rb->best = rate;
        rb->best_size = size;
    }
}

static void client_tcp_stream(struct client *c, size_t size, struct rowbuf *rb)
{
    const struct opts *o = c->o;
    char line[LINE_MAX_LEN];
    int bidir = o->test == T_TCP_BIDIR;
    ctrl_send(c->ctl.fd, "run size=%zu dur=%ld", size, o->duration_ms);
    client_expect(c, line, sizeof line, "ready", "ready");
    size_t rsz = stream_recv_size(o->recv_size, size);
    unsigned char *sbuf = (unsigned char *)xalloc(size, 0);
    fill_pattern(sbuf, size);
    unsigned char *rbuf = NULL, *ref = NULL;
    int fd = client_data_connect(c, o->nodelay);
    uint64_t t0 = now_ns();
    struct stream_send sd = {fd, sbuf, size, (uint64_t)o->duration_ms * 1000000ull, 0, 0, 0};
    struct stream_recv rv = {fd, NULL, rsz, t0, NULL, size, 0, 0, 0, 0};
    if (bidir) {
        rbuf = (unsigned char *)xalloc(rsz, 0);
        if (o->validate)
            ref = make_stream_ref(sbuf, size, rsz);
        rv.buf = rbuf;
        rv.ref = ref;
        pthread_t th;
        int e = pthread_create(&th, NULL, stream_receiver, &rv);
        if (e)
            die("pthread_create: %s", strerror(e));
        stream_sender(&sd);
        pthread_join(th, NULL);
    } else {
        stream_sender(&sd);
    }
    if (sd.err)
        client_fail(c, "%s size %zu: send failed: %s", test_names[o->test], size, io_strerror(sd.err));
    if (rv.err)
        client_fail(c, "%s size %zu: receive failed: %s", test_names[o->test], size, io_strerror(rv.err));
    if (rv.corrupt)
        die("%s size %zu: received payload differs from what was sent (--validate)", test_names[o->test], size);
    client_expect(c, line, sizeof line, "result", "the server's result");
    note_bufs(c, fd, line);
    close(fd);
    uint64_t srecv = 0, ssent = 0;
    double srspan = 0, ssspan = 0;
    if (kv_u64(line, "recv", &srecv) || kv_dbl(line, "recv_span", &srspan) || kv_u64(line, "sent", &ssent) ||
        kv_dbl(line, "send_span", &ssspan))
        die("protocol error: malformed result '%.100s'", line);
    if (srecv != sd.bytes)
        die("%s size %zu: client sent %" PRIu64 " bytes but the server received %" PRIu64, test_names[o->test],
            size, sd.bytes, srecv);
    double send_s = sd.span_ns * 1e-9;
    if (!bidir) {
        double r = mbps(srecv, srspan);
        snprintf(rb->rows[rb->n++], sizeof rb->rows[0], "%zu %.6f %.6f %" PRIu64 " %" PRIu64 " %.3f %.3f %.3f %.3f",
                 size, send_s, srspan, sd.bytes, srecv, mbps(sd.bytes, send_s), r, mbps(sd.bytes, send_s) * 8.0,
                 r * 8.0);
        stream_best(rb, size, r);
    } else {
        if (ssent != rv.bytes)
            die("tcp_bidir size %zu: server sent %" PRIu64 " bytes but the client received %" PRIu64, size, ssent,
                rv.bytes);
        double recv_s = rv.span_ns * 1e-9;
        double c2s_r = mbps(srecv, srspan), s2c_r = mbps(rv.bytes, recv_s);
        double tot = c2s_r + s2c_r;
        snprintf(rb->rows[rb->n++], sizeof rb->rows[0],
                 "%zu %.6f %" PRIu64 " %" PRIu64 " %.3f %.3f %.3f %.3f %.3f %.3f", size, send_s, sd.bytes, rv.bytes,
                 mbps(sd.bytes, send_s), c2s_r, mbps(ssent, ssspan), s2c_r, tot, tot * 8.0);
        stream_best(rb, size, tot);
    }
    if (o->validate)
        rb->validated++;
    free(sbuf);
    free(rbuf);
    free(ref);
}

struct samples {
    double *v;
    long n, cap;
};

static void samples_push(struct samples *s, double x)
{
    if (s->n == s->cap) {
        long nc = s->cap ? 2 * s->cap : 4096;
        double *nv = (double *)realloc(s->v, (size_t)nc * sizeof *nv);
        if (!nv)
            die("out of memory");
        s->v = nv;
        s->cap = nc;
    }
    s->v[s->n++] = x;
}

static int cmp_dbl(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

struct stats {
    double min, median, mean, max, sd, p99;
};

/* sorts v; median: mean of the two middle samples for even n; stddev:
 * sample (n-1); p99: nearest rank, the ceil(0.99 n)-th smallest */
static struct stats compute_stats(double *v, long n)
{
    struct stats s = {0, 0, 0, 0, 0, 0};
    if (n <= 0)
        return s;
    qsort(v, (size_t)n, sizeof *v, cmp_dbl);
    s.min = v[0];
    s.max = v[n - 1];
    s.median = (n % 2) ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
    double sum = 0;
    for (long k = 0; k < n; k++)
        sum += v[k];
    s.mean = sum / (double)n;
    double ss = 0;
    for (long k = 0; k < n; k++)
        ss += (v[k] - s.mean) * (v[k] - s.mean);
    s.sd = n > 1 ? my_sqrt(ss / (double)(n - 1)) : 0.0;
    s.p99 = v[(99 * n + 99) / 100 - 1];
    return s;
}

static void tcp_transaction(struct client *c, int fd, unsigned char *sbuf, unsigned char *rbuf, size_t size,
                            int validate)
{
    if (send_all(fd, sbuf, size) != 0)
        client_fail(c, "tcp_rr size %zu: send failed: %s", size, io_strerror(errno));
    int r = recv_full(fd, rbuf, size);
    if (r != 1)
        client_fail(c, "tcp_rr size %zu: receive failed: %s", size,
                    r == 0 || r == -2 ? "server closed the connection" : io_strerror(errno));
    if (validate && memcmp(sbuf, rbuf, size) != 0)
        die("tcp_rr size %zu: echoed payload differs from what was sent (--validate)", size);
}

/* Book-keeping shared by the round-trip tests after a size's row is written. */
static void rr_done(struct rowbuf *rb, const struct opts *o, size_t size, double first_us,
                    double median_us)
{
    if (rb->n == 1)
        rb->first_rtt = first_us;
    if (rb->best == 0 || median_us < rb->best) {
        rb->best = median_us;
        rb->best_size = size;
    }
    if (o->validate)
        rb->validated++;
}

static void client_tcp_rr(struct client *c, size_t size, struct rowbuf *rb)
{
    const struct opts *o = c->o;
    char line[LINE_MAX_LEN];
    ctrl_send(c->ctl.fd, "run size=%zu dur=%ld", size, o->duration_ms);
    client_expect(c, line, sizeof line, "ready", "ready");
    unsigned char *sbuf = (unsigned char *)xalloc(size, 0), *rbuf = (unsigned char *)xalloc(size, 0);
    fill_pattern(sbuf, size);
    int fd = client_data_connect(c, 1);
    uint64_t t = now_ns();
    tcp_transaction(c, fd, sbuf, rbuf, size, o->validate);
    double first_us = (now_ns() - t) * 1e-3;
    for (long k = 0; k < o->warmup; k++)
        tcp_transaction(c, fd, sbuf, rbuf, size, 0);
    struct samples sm = {NULL, 0, 0};
    uint64_t start = now_ns(), end = start + (uint64_t)o->duration_ms * 1000000ull, t1 = start;
    for (long k = 0;; k++) {
        if (o->iters ? k >= o->iters : (t1 >= end || k >= ADAPTIVE_CAP))
            break;
        if (t1 >= g_deadline_ns)
            die("tcp_rr size %zu: overall timeout exceeded after %ld transactions (--timeout, --iters)", size, k);
        uint64_t t0 = t1;
        tcp_transaction(c, fd, sbuf, rbuf, size, o->validate);
        t1 = now_ns();
        samples_push(&sm, (t1 - t0) * 1e-3);
    }
    double elapsed = (t1 - start) * 1e-9;
    if (shutdown(fd, SHUT_WR) != 0)
        die("tcp_rr: shutdown: %s", strerror(errno));
    client_expect(c, line, sizeof line, "result", "the server's result");
    note_bufs(c, fd, line);
    close(fd);
    uint64_t echoed = 0;
    if (kv_u64(line, "echoed", &echoed) != 0)
        die("protocol error: malformed result '%.100s'", line);
    uint64_t total = 1 + (uint64_t)o->warmup + (uint64_t)sm.n;
    if (echoed != total)
        die("tcp_rr size %zu: server echoed %" PRIu64 " messages, client sent %" PRIu64, size, echoed, total);
    struct stats st = compute_stats(sm.v, sm.n);
    snprintf(rb->rows[rb->n++], sizeof rb->rows[0], "%zu %ld %.3f %.3f %.3f %.3f %.3f %.3f %.3f %.1f", size, sm.n,
             first_us, st.min, st.median, st.mean, st.max, st.sd, st.p99, elapsed > 0 ? sm.n / elapsed : 0.0);
    rr_done(rb, o, size, first_us, st.median);
    free(sm.v);
    free(sbuf);
    free(rbuf);
}

/* UDP socket connected to the server's UDP port */
static void client_udp_socket(struct client *c, int udp_port)
{
    struct sockaddr_storage sa = c->server;
    sa_set_port(&sa, udp_port);
    int fd = socket(sa.ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        die("socket(UDP): %s", strerror(errno));
    set_bufs(fd, c->o->sndbuf, c->o->rcvbuf);
    if (connect(fd, (struct sockaddr *)&sa, sa_len(&sa)) != 0)
        die("connect(UDP) to port %d: %s", udp_port, strerror(errno));
    set_timeo_ns(fd, SO_SNDTIMEO, (uint64_t)(c->o->connect_timeout * 1e9));
    c->udp_fd = fd;
}

static void wait_until_ns(uint64_t target)
{
    uint64_t t = now_ns();
    if (t + 200000u < target) {
        uint64_t d = target - t - 100000u;
        struct timespec ts = {(time_t)(d / 1000000000ull), (long)(d % 1000000000ull)};
        while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
            ;
    }
    while (now_ns() < target)
        ;
}

static void client_udp_stream(struct client *c, size_t size, struct rowbuf *rb, uint64_t *send_fail_total)
{
    const struct opts *o = c->o;
    char line[LINE_MAX_LEN];
    ctrl_send(c->ctl.fd, "run size=%zu dur=%ld", size, o->duration_ms);
    client_expect(c, line, sizeof line, "ready", "ready");
    unsigned char *buf = (unsigned char *)xalloc(size, 0);
    fill_pattern(buf, size);
    uint64_t interval = o->rate_mbps > 0 ? (uint64_t)((double)size * 8.0 / (o->rate_mbps * 1e6) * 1e9) : 0;
    uint64_t sent = 0, failed = 0, k = 0;
    uint64_t t0 = now_ns(), end = t0 + (uint64_t)o->duration_ms * 1000000ull;
    for (;;) {
        uint64_t t = now_ns();
        if (t >= end)
            break;
        if (interval) {
            uint64_t target = t0 + k * interval;
            if (target >= end)
                break;
            if (t < target)
                wait_until_ns(target);
        }
        put_seq(buf, size, sent);
        ssize_t n = send(c->udp_fd, buf, size, 0);
        if (n < 0 && errno == EINTR)
            continue; /* not sent: retry the same slot and sequence number */
        k++;
        if (n == (ssize_t)size) {
            sent++;
        } else if (n < 0 && (errno == ENOBUFS || errno == EAGAIN || errno == EWOULDBLOCK)) {
            failed++; /* not sent: not counted, the sequence number is reused */
        } else if (n < 0 && errno == ECONNREFUSED) {
            die("udp_stream size %zu: the server's UDP port is unreachable (ICMP port unreachable)", size);
        } else {
            die("udp_stream size %zu: send failed: %s", size, n < 0 ? strerror(errno) : "short datagram");
        }
    }
    uint64_t t1 = now_ns();
    ctrl_send(c->ctl.fd, "end sent=%" PRIu64, sent);
    client_expect(c, line, sizeof line, "result", "the server's result");
    note_bufs(c, c->udp_fd, line);
    uint64_t recvd = 0, ooo = 0;
    double span = 0;
    if (kv_u64(line, "recv", &recvd) || kv_dbl(line, "span", &span) || kv_u64(line, "ooo", &ooo))
        die("protocol error: malformed result '%.100s'", line);
    double send_s = (t1 - t0) * 1e-9;
    double loss = sent > 0 ? 100.0 * ((double)sent - (double)recvd) / (double)sent : 0.0;
    uint64_t lost = recvd < sent ? sent - recvd : 0;
    /* receiver rate over the intervals between the first and last datagram */
    double rr = (recvd >= 2 && span > 0) ? (double)(recvd - 1) * (double)size / span / 1e6 : 0.0;
    double sr = mbps(sent * size, send_s);
    snprintf(rb->rows[rb->n++], sizeof rb->rows[0],
             "%zu %.6f %" PRIu64 " %" PRIu64 " %" PRIu64 " %.4f %" PRIu64 " %.3f %.3f %.3f", size, send_s, sent,
             recvd, lost, loss, ooo, sr, rr, rr * 8.0);
    stream_best(rb, size, rr);
    if (o->validate)
        rb->validated++;
    *send_fail_total += failed;
    free(buf);
}

/* One UDP transaction.  Returns the round trip in ns, 0 when lost. */
static uint64_t udp_transaction(struct client *c, unsigned char *sbuf, unsigned char *rbuf, size_t size,
                                uint64_t seq, uint64_t timeout_ns, int *corrupt)
{
    put_seq(sbuf, size, seq);
    uint64_t want = seq & seq_mask(size);
    uint64_t t0 = now_ns(), limit = t0 + timeout_ns;
    for (;;) {
        ssize_t n = send(c->udp_fd, sbuf, size, 0);
        if (n == (ssize_t)size)
            break;
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == ENOBUFS || errno == EAGAIN || errno == EWOULDBLOCK))
            return 0;
        if (n < 0 && errno == ECONNREFUSED)
            die("udp_rr size %zu: the server's UDP port is unreachable (ICMP port unreachable)", size);
        die("udp_rr size %zu: send failed: %s", size, n < 0 ? strerror(errno) : "short datagram");
    }
    int changed = 0;
    uint64_t rtt = 0;
    for (;;) {
        ssize_t n = recv(c->udp_fd, rbuf, 65536u, 0);
        uint64_t t = now_ns();
        if (n == (ssize_t)size && get_seq(rbuf, size) == want) {
            rtt = t > t0 ? t - t0 : 1;
            if (corrupt && size > 8 && memcmp(rbuf + 8, sbuf + 8, size - 8) != 0)
                *corrupt = 1;
            break;
        }
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            break; /* timed out: lost */
        if (n < 0 && errno == ECONNREFUSED)
            die("udp_rr size %zu: the server's UDP port is unreachable (ICMP port unreachable)", size);
        if (n < 0 && errno != EINTR)
            die("udp_rr size %zu: receive failed: %s", size, strerror(errno));
        /* stale reply of an earlier (lost) transaction, or EINTR: wait the rest */
        if (t >= limit)
            break;
        set_timeo_ns(c->udp_fd, SO_RCVTIMEO, limit - t);
        changed = 1;
    }
    if (changed)
        set_timeo_ns(c->udp_fd, SO_RCVTIMEO, timeout_ns);
    return rtt;
}

static void client_udp_rr(struct client *c, size_t size, struct rowbuf *rb)
{
    const struct opts *o = c->o;
    char line[LINE_MAX_LEN];
    ctrl_send(c->ctl.fd, "run size=%zu dur=%ld", size, o->duration_ms);
    client_expect(c, line, sizeof line, "ready", "ready");
    unsigned char *sbuf = (unsigned char *)xalloc(size, 0), *rbuf = (unsigned char *)xalloc(65536u, 0);
    fill_pattern(sbuf, size);
    uint64_t tmo = (uint64_t)o->udp_timeout_ms * 1000000ull;
    set_timeo_ns(c->udp_fd, SO_RCVTIMEO, tmo);
    uint64_t seq = 0, sent = 0;
    int corrupt = 0;
    int *pc = o->validate ? &corrupt : NULL;
    /* first transaction: timed apart; a few tries so that one lost datagram
     * does not fail the size (tries before the first reply are not counted) */
    uint64_t first = 0;
    for (int tries = 0; tries < 5 && !first; tries++) {
        first = udp_transaction(c, sbuf, rbuf, size, seq++, tmo, pc);
        sent++;
    }
    if (!first)
        die("udp_rr size %zu: no reply from the server to 5 datagrams (%ld ms timeout each)", size,
            o->udp_timeout_ms);
    for (long k = 0; k < o->warmup; k++, sent++)
        udp_transaction(c, sbuf, rbuf, size, seq++, tmo, pc);
    struct samples sm = {NULL, 0, 0};
    uint64_t lost = 0;
    uint64_t start = now_ns(), end = start + (uint64_t)o->duration_ms * 1000000ull, t1 = start;
    for (long k = 0;; k++) {
        if (o->iters ? k >= o->iters : (t1 >= end || k >= ADAPTIVE_CAP))
            break;
        if (t1 >= g_deadline_ns)
            die("udp_rr size %zu: overall timeout exceeded after %ld transactions (--timeout, --iters)", size, k);
        uint64_t rtt = udp_transaction(c, sbuf, rbuf, size, seq++, tmo, pc);
        sent++;
        t1 = now_ns();
        if (rtt)
            samples_push(&sm, rtt * 1e-3);
        else
            lost++;
    }
    double elapsed = (t1 - start) * 1e-9;
    ctrl_send(c->ctl.fd, "end sent=%" PRIu64, sent);
    client_expect(c, line, sizeof line, "result", "the server's result");
    note_bufs(c, c->udp_fd, line);
    if (corrupt)
        die("udp_rr size %zu: echoed payload differs from what was sent (--validate)", size);
    if (sm.n == 0)
        die("udp_rr size %zu: all %" PRIu64 " timed transactions were lost", size, lost);
    struct stats st = compute_stats(sm.v, sm.n);
    double first_us = first * 1e-3;
    double attempts = (double)sm.n + (double)lost;
    snprintf(rb->rows[rb->n++], sizeof rb->rows[0],
             "%zu %ld %" PRIu64 " %.4f %.3f %.3f %.3f %.3f %.3f %.3f %.3f %.1f", size, sm.n, lost,
             100.0 * (double)lost / attempts, first_us, st.min, st.median, st.mean, st.max, st.sd, st.p99,
             elapsed > 0 ? sm.n / elapsed : 0.0);
    rr_done(rb, o, size, first_us, st.median);
    free(sm.v);
    free(sbuf);
    free(rbuf);
}

static const char *const columns[T_COUNT] = {
    "size_bytes duration_s recv_duration_s bytes_sent bytes_received send_MBps recv_MBps send_Mbps recv_Mbps",
    ("size_bytes duration_s c2s_bytes s2c_bytes c2s_send_MBps c2s_recv_MBps s2c_send_MBps s2c_recv_MBps "
     "total_recv_MBps total_recv_Mbps"),
    "size_bytes iterations first_us min_us median_us mean_us max_us stddev_us p99_us trans_per_s",
    "size_bytes duration_s sent_pkts recv_pkts lost_pkts loss_pct out_of_order send_MBps recv_MBps recv_Mbps",
    "size_bytes iterations lost loss_pct first_us min_us median_us mean_us max_us stddev_us p99_us trans_per_s",
};

static int run_client(const struct opts *o, const char *rank_env)
{
    uint64_t sizes[MAX_SIZES + 2];
    int nsizes = make_sizes(o, sizes);
    if (!is_rr(o->test) || !o->iters) {
        /* rough lower bound of the run time; refuse what cannot fit */
        double est = nsizes * (o->duration_ms * 1e-3 + (o->test == T_UDP_STREAM ? 0.07 : 0.002));
        if (est > o->timeout)
            usage_error("%d sizes x %ld ms need about %.0f s, more than --timeout %g s", nsizes, o->duration_ms,
                        est, o->timeout);
    }
    set_deadline(o->timeout);

    struct client *c = (struct client *)calloc(1, sizeof *c);
    struct rowbuf *rb = (struct rowbuf *)calloc(1, sizeof *rb);
    if (!c || !rb)
        die("out of memory");
    c->o = o;
    c->udp_fd = -1;
    client_connect(c);

    char myhost[256], line[LINE_MAX_LEN];
    hostname_token(myhost, sizeof myhost);
    ctrl_send(c->ctl.fd,
              "hello proto=%d test=%s sndbuf=%ld rcvbuf=%ld rsz=%ld nodelay=%d validate=%d timeout=%.3f stall=%.3f "
              "host=%s",
              PROTO_VERSION, test_names[o->test], o->sndbuf, o->rcvbuf, o->recv_size, o->nodelay, o->validate,
              o->timeout, o->connect_timeout, myhost);
    client_expect(c, line, sizeof line, "ok", "the server's greeting");
    uint64_t udp_port = 0;
    if (kv_str(line, "host", c->server_host, sizeof c->server_host) != 0 ||
        kv_str(line, "cookie", c->cookie, sizeof c->cookie) != 0 || strlen(c->cookie) != 16 ||
        kv_u64(line, "udp_port", &udp_port) != 0 || udp_port > 65535)
        die("protocol error: malformed greeting '%.120s'", line);
    if (is_udp(o->test)) {
        if (udp_port == 0)
            die("protocol error: the server offered no UDP port");
        client_udp_socket(c, (int)udp_port);
    }

    uint64_t send_fail = 0;
    for (int k = 0; k < nsizes; k++) {
        size_t size = (size_t)sizes[k];
        switch (o->test) {
        case T_TCP_STREAM:
        case T_TCP_BIDIR:
            client_tcp_stream(c, size, rb);
            break;
        case T_TCP_RR:
            client_tcp_rr(c, size, rb);
            break;
        case T_UDP_STREAM:
            client_udp_stream(c, size, rb, &send_fail);
            break;
        case T_UDP_RR:
            client_udp_rr(c, size, rb);
            break;
        }
    }
    ctrl_send(c->ctl.fd, "bye");
    client_expect(c, line, sizeof line, "bye", "the server's goodbye");
    close(c->ctl.fd);
    if (c->udp_fd >= 0)
        close(c->udp_fd);

    /* output (all at the end: an aborted run prints no partial table) */
    printf("hpcnet-kernel: " KERNEL_NAME " %d\n", FORMAT_VERSION);
    /* the generic structure of the MPI kernels: no MPI library; "rank" 0 is
     * the server, 1 the client (as with --role auto) */
    printf("mpi-library: none\n");
    printf("ranks: 2\n");
    printf("host: 0 %s\n", c->server_host);
    printf("host: 1 %s\n", myhost);
    printf("test: %s\n", test_names[o->test]);
    printf("transport: %s\n", is_udp(o->test) ? "udp" : "tcp");
    printf("server: %s\n", c->server_str);
    printf("client-host: %s\n", myhost);
    printf("server-host: %s\n", c->server_host);
    if (rank_env)
        printf("role-from: %s\n", rank_env);
    if (o->sndbuf)
        printf("sndbuf-requested: %ld\n", o->sndbuf);
    else
        printf("sndbuf-requested: auto\n");
    if (o->rcvbuf)
        printf("rcvbuf-requested: %ld\n", o->rcvbuf);
    else
        printf("rcvbuf-requested: auto\n");
    printf("sndbuf: %d\n", c->snd);
    printf("rcvbuf: %d\n", c->rcv);
    printf("server-sndbuf: %d\n", c->srv_snd);
    printf("server-rcvbuf: %d\n", c->srv_rcv);
    printf("duration-ms: %ld\n", o->duration_ms);
    if (o->test == T_TCP_STREAM || o->test == T_TCP_BIDIR) {
        printf("nodelay: %s\n", o->nodelay ? "on" : "off");
        if (o->recv_size)
            printf("recv-size: %ld\n", o->recv_size);
        else
            printf("recv-size: max(size,%u)\n", DEFAULT_RECV_MIN);
    }
    if (is_rr(o->test)) {
        printf("warmup: %ld\n", o->warmup);
        if (o->iters)
            printf("iters: %ld\n", o->iters);
        else
            printf("iters: adaptive\n");
    }
    if (o->test == T_UDP_STREAM)
        printf("rate-mbps: %g\n", o->rate_mbps);
    if (o->test == T_UDP_RR)
        printf("udp-timeout-ms: %ld\n", o->udp_timeout_ms);
    printf("validate: %s\n", o->validate ? "on" : "off");
    if (is_rr(o->test))
        printf("first-rtt-us: %.3f\n", rb->first_rtt);
    printf("columns: %s\n", columns[o->test]);
    for (int k = 0; k < rb->n; k++)
        printf("row: %s\n", rb->rows[k]);
    if (o->validate)
        printf("validation: passed %d\n", rb->validated);
    if (o->sndbuf && c->snd >= 0 && c->snd < o->sndbuf)
        printf("# note: effective sndbuf %d is below the requested %ld (net.core.wmem_max?)\n", c->snd, o->sndbuf);
    if (o->rcvbuf && c->rcv >= 0 && c->rcv < o->rcvbuf)
        printf("# note: effective rcvbuf %d is below the requested %ld (net.core.rmem_max?)\n", c->rcv, o->rcvbuf);
    if (o->rcvbuf && c->mss > 0 && ((c->rcv > 0 && c->rcv < 2 * c->mss) || (c->srv_rcv > 0 && c->srv_rcv < 2 * c->mss)))
        printf("# note: rcvbuf is below 2 x MSS (MSS %d bytes): the receive window cannot hold two "
               "segments; expect stalls\n",
               c->mss);
    if (send_fail)
        printf("# note: %" PRIu64 " datagram sends failed (ENOBUFS/EAGAIN) and were not counted as sent\n",
               send_fail);
    if (is_rr(o->test))
        printf("# lowest median round trip: %.3f us at %" PRIu64 " B\n", rb->best, rb->best_size);
    else
        printf("# highest %s throughput: %.1f MB/s (%.1f Mbit/s) at %" PRIu64 " B\n",
               o->test == T_TCP_BIDIR ? "aggregate received" : "received", rb->best, rb->best * 8.0, rb->best_size);
    printf("done: ok\n");
    fflush(stdout);
    free(rb);
    free(c);
    return 0;
}

/* ------------------------------------------------------------------------ */

int main(int argc, char **argv)
{
    struct opts o;
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

    parse_args(argc, argv, &o);

    const char *rank_env = NULL;
    char rank_desc[128];
    int role = o.role;
    if (role == ROLE_AUTO) {
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
                role = r == 0 ? ROLE_SERVER : ROLE_CLIENT;
                snprintf(rank_desc, sizeof rank_desc, "%s=%ld", vars[k], r);
                rank_env = rank_desc;
                break;
            }
        }
        if (role == ROLE_AUTO)
            usage_error("--role auto: none of OMPI_COMM_WORLD_RANK, PMIX_RANK, PMI_RANK, SLURM_PROCID is set");
    }
    if (role == ROLE_SERVER)
        return run_server(&o);
    return run_client(&o, rank_env);
}
