/*
 * sockets_client.h - the client role of the sockets kernel (sockets_client.c).
 */
#ifndef HPCNET_SOCKETS_CLIENT_H
#define HPCNET_SOCKETS_CLIENT_H
#include "sockets_options.h"

int run_client(const struct opts *o, const char *rank_env);

#endif
