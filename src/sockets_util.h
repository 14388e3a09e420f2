/*
 * sockets_util.h - the sockets kernel's process-wide state, errors, time,
 * allocation and socket helpers (sockets_util.c); with them the helpers every
 * hpcnet kernel shares (hpcnet_common.h), whose usage errors go to usage_error.
 */
#ifndef HPCNET_SOCKETS_UTIL_H
#define HPCNET_SOCKETS_UTIL_H
#include "sockets_common.h"

extern int g_is_server;
extern int g_ctrl_fd;       /* server: control connection, to report errors */
extern char g_rv_path[PATH_MAX]; /* server: rendezvous file to remove at exit */
extern volatile sig_atomic_t g_rv_written;
extern uint64_t g_deadline_ns; /* overall --timeout */

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

#endif
