/* The client role of the sockets kernel: runs the tests, prints the results. */
#include "sockets_client.h"
#include "sockets_client_tcp.h"
#include "sockets_client_udp.h"
#include "sockets_util.h"

static const char *const columns[T_COUNT] = {
    "size_bytes duration_s recv_duration_s bytes_sent bytes_received send_MBps recv_MBps send_Mbps recv_Mbps",
    ("size_bytes duration_s c2s_bytes s2c_bytes c2s_send_MBps c2s_recv_MBps s2c_send_MBps s2c_recv_MBps "
     "total_recv_MBps total_recv_Mbps"),
    "size_bytes iterations first_us min_us median_us mean_us max_us stddev_us p99_us trans_per_s",
    "size_bytes rate_mbps duration_s sent_pkts recv_pkts lost_pkts loss_pct out_of_order send_MBps recv_MBps recv_Mbps",
    "size_bytes iterations lost loss_pct first_us min_us median_us mean_us max_us stddev_us p99_us trans_per_s",
};

/* The sizes a client runs, and those of them udp_stream paces (--paced-sizes). */
struct size_plan {
    uint64_t sizes[MAX_SIZES + 2];
    int nsizes;
    uint64_t paced[MAX_SIZES];
    int npaced;
};

/* whether udp_stream runs size at rate: unpaced at every size, paced at
 * the --paced-sizes (all without the option) */
static int udp_runs_at(const struct opts *o, uint64_t size, double rate, const struct size_plan *p)
{
    if (rate == 0 || !o->paced_sizes_arg)
        return 1;
    for (int j = 0; j < p->npaced; j++)
        if (p->paced[j] == size)
            return 1;
    return 0;
}

/* The sizes and paced sizes of the options; refuses a run that cannot fit
 * its --timeout. */
static void plan_sizes(const struct opts *o, struct size_plan *p)
{
    p->nsizes = make_sizes(o, p->sizes);
    p->npaced = 0;
    int runs = p->nsizes;
    if (o->paced_sizes_arg) {
        p->npaced = parse_size_list("--paced-sizes", o->paced_sizes_arg, p->paced);
        for (int j = 0; j < p->npaced; j++) {
            int found = 0;
            for (int k = 0; k < p->nsizes; k++)
                found |= p->sizes[k] == p->paced[j];
            if (!found)
                usage_error("--paced-sizes: %" PRIu64 " is not one of the sizes run", p->paced[j]);
        }
    }
    if (o->test == T_UDP_STREAM) {
        runs = 0;
        for (int k = 0; k < p->nsizes; k++) {
            int at = 0;
            for (int r = 0; r < o->nrates; r++)
                at += udp_runs_at(o, p->sizes[k], o->rates[r], p);
            if (!at)
                usage_error("size %" PRIu64 " is not in --paced-sizes and --rate-mbps has no 0: it would not run",
                            p->sizes[k]);
            runs += at;
        }
    }
    if (!is_rr(o->test) || !o->iters) {
        /* rough lower bound of the run time; refuse what cannot fit */
        double est = runs * o->windows * (o->duration_ms * 1e-3 + (o->test == T_UDP_STREAM ? 0.07 : 0.002));
        if (est > o->timeout)
            usage_error("%d runs x %ld window(s) x %ld ms need about %.0f s, more than --timeout %g s", runs,
                        o->windows, o->duration_ms, est, o->timeout);
    }
}

/* The hello on the control connection and the server's greeting: its host,
 * the session cookie, and for the UDP tests its UDP port. */
static void greet_server(struct client *c, const char *myhost)
{
    const struct opts *o = c->o;
    char line[LINE_MAX_LEN];
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
}

/* Every size of the test, its rows into rb; udp_stream counts its failed
 * sends and its pacing slips. */
static void measure_sizes(struct client *c, const struct size_plan *p, struct rowbuf *rb, uint64_t *send_fail,
                          uint64_t *slips)
{
    const struct opts *o = c->o;
    if (o->rates[0] > 0) /* paced: see client_udp_stream */
        prctl(PR_SET_TIMERSLACK, 1000UL, 0UL, 0UL, 0UL);
    for (int k = 0; k < p->nsizes; k++) {
        size_t size = (size_t)p->sizes[k];
        switch (o->test) {
        case T_TCP_STREAM:
        case T_TCP_BIDIR:
            client_tcp_stream_windows(c, size, rb);
            break;
        case T_TCP_RR:
            client_tcp_rr(c, size, rb);
            break;
        case T_UDP_STREAM:
            for (int r = 0; r < o->nrates; r++)
                if (udp_runs_at(o, size, o->rates[r], p))
                    client_udp_stream(c, size, o->rates[r], rb, send_fail, slips);
            break;
        case T_UDP_RR:
            client_udp_rr(c, size, rb);
            break;
        }
    }
}

/* "bye" both ways, then the client's sockets are closed. */
static void say_goodbye(struct client *c)
{
    char line[LINE_MAX_LEN];
    ctrl_send(c->ctl.fd, "bye");
    client_expect(c, line, sizeof line, "bye", "the server's goodbye");
    close(c->ctl.fd);
    if (c->udp_fd >= 0)
        close(c->udp_fd);
}

/* The header lines every test prints: identity, hosts, buffers, duration. */
static void print_identity(const struct client *c, const char *myhost, const char *rank_env)
{
    const struct opts *o = c->o;
    printf("hpcnet-kernel: " KERNEL_NAME " %d\n", FORMAT_VERSION);
    /* the generic structure of the MPI kernels: no MPI library; "rank" 0 is
     * the server, 1 the client (as with --role auto) */
    printf("mpi-library: none\n");
    printf("compiler: %s\n", HC_COMPILER);
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
}

/* The header lines of the test's own options. */
static void print_test_settings(const struct opts *o, const struct size_plan *p)
{
    if (o->test == T_TCP_STREAM || o->test == T_TCP_BIDIR) {
        printf("windows: %ld\n", o->windows);
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
    if (o->test == T_UDP_STREAM) {
        printf("rate-mbps: ");
        for (int r = 0; r < o->nrates; r++)
            printf("%s%.10g", r ? "," : "", o->rates[r]);
        printf("\n");
        if (o->paced_sizes_arg) {
            printf("paced-sizes: ");
            for (int j = 0, first = 1; j < p->nsizes; j++)
                for (int i = 0; i < p->npaced; i++)
                    if (p->paced[i] == p->sizes[j]) {
                        printf("%s%" PRIu64, first ? "" : ",", p->sizes[j]);
                        first = 0;
                        break;
                    }
            printf("\n");
        } else if (o->rates[0] > 0) {
            printf("paced-sizes: all\n");
        }
    }
    if (o->test == T_UDP_RR)
        printf("udp-timeout-ms: %ld\n", o->udp_timeout_ms);
    printf("validate: %s\n", o->validate ? "on" : "off");
}

/* The table, the notes on what limited it, the summary line and "done". */
static void print_results(const struct client *c, const struct rowbuf *rb, uint64_t send_fail, uint64_t slips)
{
    const struct opts *o = c->o;
    if (is_rr(o->test))
        printf("first-rtt-us: %.3f\n", rb->first_rtt);
    printf("columns: %s\n", columns[o->test]);
    for (int k = 0; k < rb->n; k++)
        printf("row: %s\n", rb->rows[k]);
    for (int k = 0; k < rb->n && o->windows > 1; k++)
        printf("# windows at %s\n", rb->windows[k]);
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
    if (slips)
        printf("# note: the paced sender fell more than %llu ms behind its schedule %" PRIu64
               " times and dropped the missed slots (the rate reached is send_MBps)\n",
               PACE_MAX_BEHIND_NS / 1000000ull, slips);
    if (send_fail)
        printf("# note: %" PRIu64 " datagram sends failed (ENOBUFS/EAGAIN) and were not counted as sent\n",
               send_fail);
    if (is_rr(o->test))
        printf("# lowest median round trip: %.3f us at %" PRIu64 " B\n", rb->best, rb->best_size);
    else
        printf("# highest %s throughput: %.1f MB/s (%.1f Mbit/s) at %" PRIu64 " B\n",
               o->test == T_TCP_BIDIR ? "aggregate received" : "received", rb->best, rb->best * 8.0, rb->best_size);
    printf("done: ok\n");
}

int run_client(const struct opts *o, const char *rank_env)
{
    struct size_plan plan;
    plan_sizes(o, &plan);
    set_deadline(o->timeout);

    struct client *c = (struct client *)calloc(1, sizeof *c);
    struct rowbuf *rb = (struct rowbuf *)calloc(1, sizeof *rb);
    if (!c || !rb)
        die("out of memory");
    c->o = o;
    c->udp_fd = -1;
    client_connect(c);
    char myhost[256];
    hostname_token(myhost, sizeof myhost);
    greet_server(c, myhost);

    uint64_t send_fail = 0, slips = 0;
    measure_sizes(c, &plan, rb, &send_fail, &slips);
    say_goodbye(c);

    /* output (all at the end: an aborted run prints no partial table) */
    print_identity(c, myhost, rank_env);
    print_test_settings(o, &plan);
    print_results(c, rb, send_fail, slips);
    fflush(stdout);
    free(rb);
    free(c);
    return 0;
}
