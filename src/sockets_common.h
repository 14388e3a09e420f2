/*
 * sockets_common.h - what every part of the sockets kernel (sockets*.c) shares:
 * the system headers, limits, protocol constants and the kinds of test.  Each
 * part's functions are declared in its own header; sockets.c says what the
 * kernel does.
 */
#ifndef HPCNET_SOCKETS_COMMON_H
#define HPCNET_SOCKETS_COMMON_H
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

static inline int is_udp(int t) { return t == T_UDP_STREAM || t == T_UDP_RR; }
static inline int is_rr(int t) { return t == T_TCP_RR || t == T_UDP_RR; }

#endif
