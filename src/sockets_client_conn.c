/* The sockets kernel client's connections: control connection to the server, data connections. */
#include "sockets_client_conn.h"
#include "sockets_util.h"

void client_expect(struct client *c, char *out, size_t outlen, const char *word, const char *what)
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
void client_fail(struct client *c, const char *fmt, ...)
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

void client_connect(struct client *c)
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

int client_data_connect(struct client *c, int nodelay)
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

void note_bufs(struct client *c, int fd, const char *result)
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
