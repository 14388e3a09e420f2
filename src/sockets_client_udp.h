/*
 * sockets_client_udp.h - the sockets kernel client's UDP tests
 * (sockets_client_udp.c): its UDP socket, one run of udp_stream, one size of
 * udp_rr.
 */
#ifndef HPCNET_SOCKETS_CLIENT_UDP_H
#define HPCNET_SOCKETS_CLIENT_UDP_H
#include "sockets_client_conn.h"
#include "sockets_client_rows.h"

void client_udp_socket(struct client *c, int udp_port);
void client_udp_stream(struct client *c, size_t size, double rate_mbps, struct rowbuf *rb, uint64_t *send_fail_total,
                       uint64_t *slips_total);
void client_udp_rr(struct client *c, size_t size, struct rowbuf *rb);

#endif
