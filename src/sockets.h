/*
 * sockets.h - what the parts of the sockets kernel (sockets*.c) share: types,
 * constants, process-wide state and functions.  sockets.c says what the kernel does.
 */
#ifndef HPCNET_SOCKETS_H
#define HPCNET_SOCKETS_H
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
#include <sys/prctl.h>
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

#define MAX_MSG_SIZE HC_MAX_SIZE /* 1 GiB, as the MPI kernels */
#define UDP_MAX_PAYLOAD 65507u           /* 65535 - 20 (IPv4) - 8 (UDP) */
#define MAX_SIZES 128
#define MAX_RATES 8                /* --rate-mbps: rates per size at most */
#define MAX_ROWS (MAX_SIZES * MAX_RATES)
/* a paced sender catches up at most this far behind its schedule: a stall
 * of the host up to 10 ms (common on a busy small host) costs no rate, and
 * the catch-up burst, 10 ms of the rate, fits the receiver's socket buffer
 * and a shaper's queue; beyond it the missed slots are dropped, since a
 * longer burst's loss would be the burst's, not the rate's */
#define PACE_MAX_BEHIND_NS 10000000ull
/* --windows: a size measured this many times at most */
#define MAX_WINDOWS 25
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
extern const char *const test_names[T_COUNT];

static inline int is_udp(int t) { return t == T_UDP_STREAM || t == T_UDP_RR; }
static inline int is_rr(int t) { return t == T_TCP_RR || t == T_UDP_RR; }

/* ------------------------------------------------------------------------ */
/* options                                                                   */

struct opts {
    int role;
    int test;
    const char *sizes_arg; /* --sizes list, NULL = range */
    uint64_t min_size, max_size;
    int have_min, have_max;
    long duration_ms;
    long windows; /* tcp streams: windows per size, the median one reported */
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
    double rates[MAX_RATES]; /* udp_stream: Mbit/s per run, ascending, 0 (unpaced) last */
    int nrates;
    const char *paced_sizes_arg; /* udp_stream: sizes run at the paced rates, NULL = all */
    long udp_timeout_ms;
    int nodelay;
    int validate;
    int verbose;
    /* which test-specific options were given (validated against --test) */
    int have_iters, have_warmup, have_rate, have_paced_sizes, have_udp_timeout, have_windows;
};


/* process-wide state (sockets_util.c) */
extern int g_is_server;
extern int g_ctrl_fd;       /* server: control connection, to report errors */
extern char g_rv_path[PATH_MAX]; /* server: rendezvous file to remove at exit */
extern volatile sig_atomic_t g_rv_written;
extern uint64_t g_deadline_ns; /* overall --timeout */

struct ctrl {
    int fd;
    size_t len;
    char buf[8192];
};
struct stream_send {
    int fd;
    const unsigned char *buf;
    size_t size;
    uint64_t dur_ns;
    uint64_t bytes;
    uint64_t span_ns;
    int err; /* errno of a failure, 0 = ok */
};
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
struct rowbuf {
    int n;
    char rows[MAX_ROWS][512];
    char windows[MAX_SIZES][512]; /* --windows > 1: every window's rate, per size */
    double best;      /* summary: best value and its size */
    uint64_t best_size;
    double first_rtt; /* rr: first transaction of the first size, us */
    int validated;
};
struct samples {
    double *v;
    long n, cap;
};

void die(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
void usage_error(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
#define HC_USAGE_ERROR usage_error
#include "hpcnet_common.h"
uint64_t now_ns(void);
void remove_rendezvous(void);
void on_alarm(int sig);
void on_term(int sig);
void arm_watchdog(double seconds);
void set_deadline(double seconds);
int ms_until(uint64_t deadline);
const char *io_strerror(int err);
void *xalloc(size_t bytes, unsigned char fill);
void fill_pattern(unsigned char *buf, size_t n);
void hostname_token(char *out, size_t len);
void set_int_opt(int fd, int level, int name, int val, const char *what);
int get_int_opt(int fd, int level, int name);
void set_bufs(int fd, long sndbuf, long rcvbuf);
void set_timeo_ns(int fd, int name, uint64_t ns);
void set_stall_timeouts(int fd, double stall_s);
void set_nonblock(int fd, int on);
int send_all(int fd, const void *buf, size_t len);
int recv_full(int fd, void *buf, size_t len);
void addr_to_str(const struct sockaddr *sa, char *out, size_t len);
int sa_port(const struct sockaddr_storage *ss);
void sa_set_port(struct sockaddr_storage *ss, int port);
socklen_t sa_len(const struct sockaddr_storage *ss);
int tcp_connect(const struct sockaddr *sa, socklen_t salen, long sndbuf, long rcvbuf, int nodelay, int timeout_ms);
double opt_double(const char *opt, const char *s, double lo, double hi, int allow_zero);
void usage(void);
void parse_args(int argc, char **argv, struct opts *o);
int cmp_u64(const void *a, const void *b);
int make_sizes(const struct opts *o, uint64_t *v);
int parse_size_list(const char *opt, const char *arg, uint64_t *v);
void ctrl_send(int fd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int ctrl_has_line(const struct ctrl *c);
int ctrl_getline(struct ctrl *c, char *out, size_t outlen, int timeout_ms);
int ctrl_ready(const struct ctrl *c);
int line_is(const char *line, const char *word);
int kv_str(const char *line, const char *key, char *out, size_t outlen);
int kv_u64(const char *line, const char *key, uint64_t *out);
int kv_dbl(const char *line, const char *key, double *out);
void *stream_sender(void *arg);
void *stream_receiver(void *arg);
unsigned char *make_stream_ref(const unsigned char *pattern, size_t size, size_t rsz);
void put_seq(unsigned char *buf, size_t size, uint64_t seq);
uint64_t get_seq(const unsigned char *buf, size_t size);
uint64_t seq_mask(size_t size);
size_t stream_recv_size(long opt_rsz, size_t size);
void vlog(const struct opts *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void write_rendezvous(const char *path, const char *content);
int accept_data(struct session *s, uint64_t *t_hello);
void server_tcp_size(struct session *s, size_t size, uint64_t dur_ns);
int server_check_end(struct session *s, uint64_t *sent);
void server_udp_stream_size(struct session *s, size_t size);
void server_udp_rr_size(struct session *s, size_t size);
int server_udp_socket(const struct session *s, long sndbuf, long rcvbuf);
int run_server(const struct opts *o);
void client_fail(struct client *c, const char *fmt, ...) __attribute__((noreturn, format(printf, 2, 3)));
void client_expect(struct client *c, char *out, size_t outlen, const char *word, const char *what);
int parse_hostport(const char *s, char *host, size_t hl, int *port);
int read_rendezvous(const char *path, char *host, size_t hl, int *port, char *err, size_t el);
void client_connect(struct client *c);
int client_data_connect(struct client *c, int nodelay);
void note_bufs(struct client *c, int fd, const char *result);
double mbps(uint64_t bytes, double secs);
void stream_best(struct rowbuf *rb, size_t size, double rate);
double client_tcp_stream(struct client *c, size_t size, char *row, size_t row_len);
void client_tcp_stream_windows(struct client *c, size_t size, struct rowbuf *rb);
void samples_push(struct samples *s, double x);
void tcp_transaction(struct client *c, int fd, unsigned char *sbuf, unsigned char *rbuf, size_t size, int validate);
void rr_done(struct rowbuf *rb, const struct opts *o, size_t size, double first_us, double median_us);
void client_tcp_rr(struct client *c, size_t size, struct rowbuf *rb);
void client_udp_socket(struct client *c, int udp_port);
void sleep_until_ns(uint64_t target);
void client_udp_stream(struct client *c, size_t size, double rate_mbps, struct rowbuf *rb, uint64_t *send_fail_total,
                       uint64_t *slips_total);
uint64_t udp_transaction(struct client *c, unsigned char *sbuf, unsigned char *rbuf, size_t size, uint64_t seq, uint64_t timeout_ns, int *corrupt);
void client_udp_rr(struct client *c, size_t size, struct rowbuf *rb);
int run_client(const struct opts *o, const char *rank_env);

#endif
