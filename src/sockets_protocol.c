/* What client and server share: the control connection (text lines
 * "word key=value ...") and the data-path pieces (stream threads, sequence numbers). */
#include "sockets_protocol.h"
#include "sockets_util.h"

/* ------------------------------------------------------------------------ */
/* control connection: text lines "word key=value ...\n"                     */


int ctrl_has_line(const struct ctrl *c)
{
    return memchr(c->buf, '\n', c->len) != NULL;
}

/* One line (without "\n") into out.  Waits at most timeout_ms (negative:
 * until the overall deadline).  1: line; 0: EOF; -1: timeout; -2: error. */
int ctrl_getline(struct ctrl *c, char *out, size_t outlen, int timeout_ms)
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
int ctrl_ready(const struct ctrl *c)
{
    if (ctrl_has_line(c))
        return 1;
    struct pollfd p = {c->fd, POLLIN, 0};
    return poll(&p, 1, 0) > 0;
}

void ctrl_send(int fd, const char *fmt, ...)
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
int line_is(const char *line, const char *word)
{
    size_t n = strlen(word);
    return strncmp(line, word, n) == 0 && (line[n] == '\0' || line[n] == ' ');
}

/* value of " key=" in line, copied to out (up to the next blank) */
int kv_str(const char *line, const char *key, char *out, size_t outlen)
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

int kv_u64(const char *line, const char *key, uint64_t *out)
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

int kv_dbl(const char *line, const char *key, double *out)
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


/* Sends 'size'-byte messages for dur_ns, then shuts the write side down. */
void *stream_sender(void *arg)
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


/* Receives until EOF; span from t0 to EOF. */
void *stream_receiver(void *arg)
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
unsigned char *make_stream_ref(const unsigned char *pattern, size_t size, size_t rsz)
{
    unsigned char *ref = (unsigned char *)xalloc(size + rsz, 0);
    for (size_t j = 0; j < size + rsz; j++)
        ref[j] = pattern[j % size];
    return ref;
}

/* sequence number stamped into the first min(size, 8) bytes (big endian,
 * truncated to what fits) */
void put_seq(unsigned char *buf, size_t size, uint64_t seq)
{
    size_t nb = size < 8 ? size : 8;
    for (size_t k = 0; k < nb; k++)
        buf[k] = (unsigned char)(seq >> (8 * (nb - 1 - k)));
}

uint64_t get_seq(const unsigned char *buf, size_t size)
{
    size_t nb = size < 8 ? size : 8;
    uint64_t s = 0;
    for (size_t k = 0; k < nb; k++)
        s = (s << 8) | buf[k];
    return s;
}

uint64_t seq_mask(size_t size)
{
    size_t nb = size < 8 ? size : 8;
    return nb >= 8 ? UINT64_MAX : (((uint64_t)1 << (8 * nb)) - 1);
}

size_t stream_recv_size(long opt_rsz, size_t size)
{
    if (opt_rsz > 0)
        return (size_t)opt_rsz;
    return size > DEFAULT_RECV_MIN ? size : DEFAULT_RECV_MIN;
}
