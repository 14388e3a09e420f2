/* The command line of the sockets kernel: options, sizes, usage. */
#include "sockets_options.h"
#include "sockets_util.h"

const char *const test_names[T_COUNT] = {"tcp_stream", "tcp_bidir", "tcp_rr", "udp_stream", "udp_rr"};

/* ------------------------------------------------------------------------ */
/* argument parsing                                                          */

double opt_double(const char *opt, const char *s, double lo, double hi, int allow_zero)
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

/* --rate-mbps list: sorted ascending with 0 (unpaced) last, duplicates
 * dropped.  The unpaced run goes last at a size because it may leave a
 * backlog at the receiver: what arrives after its report then falls into the
 * next size's run, where datagrams of another size are not counted. */
static void parse_rates(const char *arg, struct opts *o)
{
    double v[MAX_RATES];
    int n = 0, unpaced = 0;
    const char *p = arg;
    if (!*p)
        usage_error("--rate-mbps: empty list");
    for (;;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        char tok[64];
        if (len == 0 || len >= sizeof tok)
            usage_error("--rate-mbps: bad element in '%s'", arg);
        memcpy(tok, p, len);
        tok[len] = '\0';
        double r = opt_double("--rate-mbps", tok, 0.0, 1e7, 1);
        if (r == 0.0) {
            unpaced = 1;
        } else {
            int dup = 0;
            for (int k = 0; k < n; k++)
                dup |= v[k] == r;
            if (!dup) {
                if (n == MAX_RATES)
                    usage_error("--rate-mbps: more than %d rates", MAX_RATES);
                v[n++] = r;
            }
        }
        if (!e)
            break;
        p = e + 1;
    }
    for (int k = 1; k < n; k++) /* insertion sort: a handful of rates */
        for (int j = k; j > 0 && v[j - 1] > v[j]; j--) {
            double t = v[j];
            v[j] = v[j - 1];
            v[j - 1] = t;
        }
    if (unpaced && n == MAX_RATES)
        usage_error("--rate-mbps: more than %d rates", MAX_RATES);
    if (unpaced)
        v[n++] = 0.0;
    memcpy(o->rates, v, (size_t)n * sizeof v[0]);
    o->nrates = n;
}

void usage(void)
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
        "  --windows N          tcp streams: measure each size N times, MS each\n"
        "                       on a new connection, and report the median (default 1)\n"
        "  --iters N            rr: fixed number of timed transactions per size\n"
        "  --warmup N           rr: untimed transactions per size after the\n"
        "                       first one (default 100)\n"
        "  --sndbuf S           SO_SNDBUF on both ends (default: system, autotuned)\n"
        "  --rcvbuf S           SO_RCVBUF on both ends (default: system, autotuned)\n"
        "  --recv-size S        stream receive size per recv() (default max(size,128K))\n"
        "  --nodelay            streams: set TCP_NODELAY (rr tests always do)\n"
        "  --rate-mbps R,...    udp_stream: pace the sender at R Mbit/s of payload;\n"
        "                       each size runs once per rate, 0 = as fast as\n"
        "                       possible (the receiver's capacity; default 0)\n"
        "  --paced-sizes A,...  udp_stream: the sizes run at the non-zero rates\n"
        "                       (default all); other sizes run unpaced only\n"
        "  --udp-timeout-ms MS  udp_rr: a transaction without reply after MS ms is\n"
        "                       lost (default 100)\n"
        "  --validate           check payload contents (receiver side)\n"
        "  --verbose            server: progress on stderr\n"
        "  --help, --version\n",
        DEFAULT_PORT, UDP_MAX_PAYLOAD);
}

enum {
    O_ROLE = 1000, O_TEST, O_SIZES, O_MIN, O_MAX, O_DUR, O_WINDOWS, O_ITERS, O_WARMUP, O_SNDBUF, O_RCVBUF, O_RSZ, O_PORT,
    O_BIND, O_SADDR, O_RV, O_CTO, O_TO, O_RATE, O_PACED, O_UTO, O_NODELAY, O_VALIDATE, O_VERBOSE, O_HELP, O_VERSION
};

void parse_args(int argc, char **argv, struct opts *o)
{
    static const struct option longopts[] = {
        {"role", required_argument, NULL, O_ROLE},
        {"test", required_argument, NULL, O_TEST},
        {"sizes", required_argument, NULL, O_SIZES},
        {"min-size", required_argument, NULL, O_MIN},
        {"max-size", required_argument, NULL, O_MAX},
        {"duration-ms", required_argument, NULL, O_DUR},
        {"windows", required_argument, NULL, O_WINDOWS},
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
        {"paced-sizes", required_argument, NULL, O_PACED},
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
    o->windows = 1;
    o->warmup = 100;
    o->port = DEFAULT_PORT;
    o->bind_addr = "127.0.0.1";
    o->server_addr = "127.0.0.1";
    o->connect_timeout = 30.0;
    o->timeout = 120.0;
    o->udp_timeout_ms = 100;
    o->nrates = 1; /* rates[0] = 0: unpaced */

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
            o->min_size = hc_parse_size("--min-size", optarg, 1, MAX_MSG_SIZE);
            o->have_min = 1;
            break;
        case O_MAX:
            o->max_size = hc_parse_size("--max-size", optarg, 1, MAX_MSG_SIZE);
            o->have_max = 1;
            break;
        case O_DUR:
            o->duration_ms = hc_parse_long("--duration-ms", optarg, 1, 3600000L);
            break;
        case O_WINDOWS:
            o->windows = hc_parse_long("--windows", optarg, 1, MAX_WINDOWS);
            o->have_windows = 1;
            break;
        case O_ITERS:
            o->iters = hc_parse_long("--iters", optarg, 1, MAX_ITERS);
            o->have_iters = 1;
            break;
        case O_WARMUP:
            o->warmup = hc_parse_long("--warmup", optarg, 0, 1000000L);
            o->have_warmup = 1;
            break;
        case O_SNDBUF:
            o->sndbuf = (long)hc_parse_size("--sndbuf", optarg, 1, (uint64_t)1 << 30);
            break;
        case O_RCVBUF:
            o->rcvbuf = (long)hc_parse_size("--rcvbuf", optarg, 1, (uint64_t)1 << 30);
            break;
        case O_RSZ:
            o->recv_size = (long)hc_parse_size("--recv-size", optarg, 1, (uint64_t)64 << 20);
            break;
        case O_PORT:
            o->port = hc_parse_long("--port", optarg, 0, 65535);
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
            parse_rates(optarg, o);
            o->have_rate = 1;
            break;
        case O_PACED:
            if (!*optarg)
                usage_error("--paced-sizes: empty list");
            o->paced_sizes_arg = optarg;
            o->have_paced_sizes = 1;
            break;
        case O_UTO:
            o->udp_timeout_ms = hc_parse_long("--udp-timeout-ms", optarg, 1, 60000L);
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
    if (o->have_windows && o->test != T_TCP_STREAM && o->test != T_TCP_BIDIR)
        usage_error("--windows applies to tcp_stream and tcp_bidir only");
    if (o->have_rate && o->test != T_UDP_STREAM)
        usage_error("--rate-mbps applies to udp_stream only");
    if (o->have_paced_sizes && o->test != T_UDP_STREAM)
        usage_error("--paced-sizes applies to udp_stream only");
    if (o->have_paced_sizes && !(o->rates[0] > 0))
        usage_error("--paced-sizes needs a non-zero rate in --rate-mbps");
    if (o->have_udp_timeout && o->test != T_UDP_RR)
        usage_error("--udp-timeout-ms applies to udp_rr only");
}

int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* a comma-separated list of at most MAX_SIZES sizes, as given */
int parse_size_list(const char *opt, const char *arg, uint64_t *v)
{
    int n = 0;
    const char *p = arg;
    if (!*p)
        usage_error("%s: empty list", opt);
    for (;;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        char tok[64];
        if (len == 0 || len >= sizeof tok)
            usage_error("%s: bad element in '%s'", opt, arg);
        memcpy(tok, p, len);
        tok[len] = '\0';
        if (n == MAX_SIZES)
            usage_error("%s: more than %d sizes", opt, MAX_SIZES);
        v[n++] = hc_parse_size(opt, tok, 1, MAX_MSG_SIZE);
        if (!e)
            break;
        p = e + 1;
    }
    return n;
}

/* sorted, duplicate-free size list; validated against the test's limits */
int make_sizes(const struct opts *o, uint64_t *v)
{
    int n = 0;
    uint64_t limit = is_udp(o->test) ? UDP_MAX_PAYLOAD : MAX_MSG_SIZE;
    if (o->sizes_arg) {
        n = parse_size_list("--sizes", o->sizes_arg, v);
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
