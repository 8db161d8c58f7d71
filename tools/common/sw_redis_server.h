/* Starts a redis-server (or valkey-server) process for the remote-tier
 * suites and benchmarks: one argument list for all of them, a server with no
 * persistence, noeviction, protected mode, bound to loopback, in its own
 * directory, optionally a read replica of another. The callers wait for it
 * to answer in their own way (the suites with their RESP client, the
 * benchmark with hiredis). POSIX only, header only. */
#ifndef SW_REDIS_SERVER_H_
#define SW_REDIS_SERVER_H_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <unistd.h>

typedef struct sw_redis_spec_t {
  const char* binary;      /* a path, or a name looked up in PATH */
  const char* dir;         /* the server's working directory */
  const char* log;         /* its log file */
  const char* socket;      /* a unix socket to listen on, or NULL */
  int port;                /* a loopback TCP port to listen on, or 0 */
  const char* requirepass; /* or NULL / "" */
  int replica_of_port;     /* a replica of the server on this loopback port, or 0 */
} sw_redis_spec_t;

/* A loopback TCP port free now, or -1. */
static inline int sw_redis_free_port(void) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  const int ok = bind(fd, (struct sockaddr*)&a, sizeof a) == 0 && getsockname(fd, (struct sockaddr*)&a, &len) == 0;
  close(fd);
  return ok ? ntohs(a.sin_port) : -1;
}

/* Forks and execs the server (in the foreground); the pid, or -1 if fork
 * failed. A server that cannot start exits; the caller sees it with
 * waitpid. */
static inline pid_t sw_redis_spawn(const sw_redis_spec_t* spec) {
  char port[16], primary_port[16];
  snprintf(port, sizeof port, "%d", spec->port);
  snprintf(primary_port, sizeof primary_port, "%d", spec->replica_of_port);
  const pid_t pid = fork();
  if (pid != 0) return pid;
  const char* argv[40];
  int n = 0;
  argv[n++] = spec->binary;
  argv[n++] = "--port"; argv[n++] = port;
  argv[n++] = "--bind"; argv[n++] = "127.0.0.1";
  if (spec->socket) {
    argv[n++] = "--unixsocket"; argv[n++] = spec->socket;
    argv[n++] = "--unixsocketperm"; argv[n++] = "700";
  }
  argv[n++] = "--dir"; argv[n++] = spec->dir;
  argv[n++] = "--save"; argv[n++] = "";
  argv[n++] = "--appendonly"; argv[n++] = "no";
  argv[n++] = "--protected-mode"; argv[n++] = "yes";
  argv[n++] = "--maxmemory-policy"; argv[n++] = "noeviction";
  argv[n++] = "--logfile"; argv[n++] = spec->log;
  argv[n++] = "--daemonize"; argv[n++] = "no";
  if (spec->requirepass && spec->requirepass[0]) {
    argv[n++] = "--requirepass"; argv[n++] = spec->requirepass;
    /* A replica authenticates to its primary with the same password. */
    argv[n++] = "--masterauth"; argv[n++] = spec->requirepass;
  }
  if (spec->replica_of_port) {
    argv[n++] = "--replicaof"; argv[n++] = "127.0.0.1"; argv[n++] = primary_port;
  }
  argv[n] = NULL;
  execvp(spec->binary, (char* const*)argv);
  _exit(127);
}

#endif
