/* Process-wide state, errors, time and allocation, socket helpers (sockets kernel). */
#include "sockets_util.h"

/* ------------------------------------------------------------------------ */
/* process-wide state                                                        */

int g_is_server = 0;
int g_ctrl_fd = -1;       /* server: control connection, to report errors */
char g_rv_path[PATH_MAX]; /* server: rendezvous file to remove at exit */
volatile sig_atomic_t g_rv_written = 0;
uint64_t g_deadline_ns = UINT64_MAX; /* overall --timeout */

uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void remove_rendezvous(void)
{
    if (g_rv_written) {
        unlink(g_rv_path);
        g_rv_written = 0;
    }
}

/* Run-time failure: "error: ..." on stderr, exit 1.  A server also tells the
 * client (best effort) so that the client reports the cause. */
void die(const char *fmt, ...)
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

void usage_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("error: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputs(" (see " KERNEL_NAME " --help)\n", stderr);
    va_end(ap);
    exit(EXIT_USAGE);
}

void on_alarm(int sig)
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
void on_term(int sig)
{
    if (g_rv_written)
        unlink(g_rv_path);
    signal(sig, SIG_DFL);
    raise(sig);
}

/* Hard backstop behind the clean deadline checks: SIGALRM a little after
 * the overall deadline, in case something blocks where we do not look. */
void arm_watchdog(double seconds)
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

void set_deadline(double seconds)
{
    g_deadline_ns = now_ns() + (uint64_t)(seconds * 1e9);
    arm_watchdog(seconds);
}

/* milliseconds left until 'deadline' (0 when passed), capped at INT_MAX */
int ms_until(uint64_t deadline)
{
    uint64_t n = now_ns();
    if (n >= deadline)
        return 0;
    uint64_t ms = (deadline - n + 999999u) / 1000000u;
    return ms > INT_MAX ? INT_MAX : (int)ms;
}

const char *io_strerror(int err)
{
    if (err == EAGAIN || err == EWOULDBLOCK)
        return "stalled (no progress within --connect-timeout)";
    return strerror(err);
}

/* square root without libm (Newton); x >= 0 */
void *xalloc(size_t bytes, unsigned char fill)
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
void fill_pattern(unsigned char *buf, size_t n)
{
    for (size_t k = 0; k < n; k++) {
        uint32_t x = (uint32_t)k * 2654435761u;
        unsigned char b = (unsigned char)(x >> 24);
        buf[k] = b ? b : 0x5a;
    }
}

void hostname_token(char *out, size_t len)
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
/* socket helpers                                                            */

void set_int_opt(int fd, int level, int name, int val, const char *what)
{
    if (setsockopt(fd, level, name, &val, sizeof val) != 0)
        die("setsockopt(%s=%d): %s", what, val, strerror(errno));
}

int get_int_opt(int fd, int level, int name)
{
    int v = 0;
    socklen_t l = sizeof v;
    if (getsockopt(fd, level, name, &v, &l) != 0)
        return -1;
    return v;
}

void set_bufs(int fd, long sndbuf, long rcvbuf)
{
    if (sndbuf > 0)
        set_int_opt(fd, SOL_SOCKET, SO_SNDBUF, (int)sndbuf, "SO_SNDBUF");
    if (rcvbuf > 0)
        set_int_opt(fd, SOL_SOCKET, SO_RCVBUF, (int)rcvbuf, "SO_RCVBUF");
}

void set_timeo_ns(int fd, int name, uint64_t ns)
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
void set_stall_timeouts(int fd, double stall_s)
{
    uint64_t ns = (uint64_t)(stall_s * 1e9);
    set_timeo_ns(fd, SO_RCVTIMEO, ns);
    set_timeo_ns(fd, SO_SNDTIMEO, ns);
}

void set_nonblock(int fd, int on)
{
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, on ? (fl | O_NONBLOCK) : (fl & ~O_NONBLOCK)) < 0)
        die("fcntl: %s", strerror(errno));
}

/* Sends all of buf (loops on short writes, retries EINTR).
 * 0 on success, -1 with errno on failure. */
int send_all(int fd, const void *buf, size_t len)
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
int recv_full(int fd, void *buf, size_t len)
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

void addr_to_str(const struct sockaddr *sa, char *out, size_t len)
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

int sa_port(const struct sockaddr_storage *ss)
{
    if (ss->ss_family == AF_INET6)
        return ntohs(((const struct sockaddr_in6 *)ss)->sin6_port);
    return ntohs(((const struct sockaddr_in *)ss)->sin_port);
}

void sa_set_port(struct sockaddr_storage *ss, int port)
{
    if (ss->ss_family == AF_INET6)
        ((struct sockaddr_in6 *)ss)->sin6_port = htons((uint16_t)port);
    else
        ((struct sockaddr_in *)ss)->sin_port = htons((uint16_t)port);
}

socklen_t sa_len(const struct sockaddr_storage *ss)
{
    return ss->ss_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
}

/* Connects a TCP socket with a timeout.  Socket buffers are set before
 * connect() so that the window scale is negotiated for them.  Returns the
 * connected (blocking) fd, or -1 with errno set. */
int tcp_connect(const struct sockaddr *sa, socklen_t salen, long sndbuf, long rcvbuf, int nodelay,
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
