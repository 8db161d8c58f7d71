/* Helpers of the remote-carrier suites: redis-server processes of their
 * own, on a unix socket (and loopback TCP when asked) in a temporary
 * directory, started and stopped within bounded times, and a minimal RESP
 * client to inspect and damage their keys. A missing redis-server fails the
 * suite: it does not skip. */
#ifndef SW_REMOTE_TEST_H_
#define SW_REMOTE_TEST_H_

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sw_redis_server.h"
#include "sw_tiled_test.h"

typedef struct rs_server_t {
  pid_t pid;
  char dir[128];
  char socket[160];
  char endpoint[192];  /* unix://<socket> */
  char tcp[64];        /* redis://127.0.0.1:<port>, or "" */
  int port;
  char requirepass[64]; /* "" for none */
} rs_server_t;

/* Copies `src` into dst[size], cut short if it is longer. */
static inline void rs_copy(char* dst, size_t size, const char* src) {
  const size_t n = strlen(src) < size - 1 ? strlen(src) : size - 1;
  memcpy(dst, src, n);
  dst[n] = '\0';
}

static inline double rs_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* A fresh temporary directory (for a server or a password file). */
static inline void rs_tempdir(char* out, size_t size) {
  snprintf(out, size, "/tmp/sw-remote-XXXXXX");
  if (!mkdtemp(out)) fail_msg("mkdtemp: %s", strerror(errno));
}

/* The path of redis-server, or a failure: the suite needs it. */
static inline const char* rs_server_binary(void) {
  static char found[512];
  if (found[0]) return found;
  const char* path = getenv("PATH");
  char buf[4096];
  snprintf(buf, sizeof buf, "%s", path ? path : "/usr/bin:/bin");
  for (char* dir = strtok(buf, ":"); dir; dir = strtok(NULL, ":")) {
    snprintf(found, sizeof found, "%s/redis-server", dir);
    if (access(found, X_OK) == 0) return found;
  }
  found[0] = '\0';
  fail_msg("redis-server is not on the PATH; the remote suites need it (tools/install_deps.sh installs redis-server)");
  return NULL;
}

/* Connects to the server's unix socket; -1 if it does not accept. */
static inline int rs_connect(const rs_server_t* s) {
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  struct sockaddr_un a;
  memset(&a, 0, sizeof a);
  a.sun_family = AF_UNIX;
  rs_copy(a.sun_path, sizeof a.sun_path, s->socket);
  if (connect(fd, (struct sockaddr*)&a, sizeof a) != 0) {
    close(fd);
    return -1;
  }
  /* Longer than any command of the suites waits itself (WAIT: 30 s). */
  struct timeval tv = {60, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  return fd;
}

/* One reply, flattened: its first character (+ - : $ *), a nil flag, and
 * its text (simple and bulk strings, errors, integers; an array's count). */
typedef struct rs_reply_t {
  char type;
  bool nil;
  char text[512];
  long long integer;
} rs_reply_t;

static inline bool rs_read_line(int fd, char* line, size_t size) {
  size_t n = 0;
  for (;;) {
    char c;
    if (read(fd, &c, 1) != 1) return false;
    if (c == '\n') break;
    if (c != '\r' && n + 1 < size) line[n++] = c;
  }
  line[n] = '\0';
  return true;
}

static inline bool rs_read_exact(int fd, char* out, size_t n) {
  size_t done = 0;
  while (done < n) {
    const ssize_t r = read(fd, out + done, n - done);
    if (r <= 0) return false;
    done += (size_t)r;
  }
  return true;
}

/* Reads one reply; arrays' elements are read and dropped. */
static inline bool rs_read_reply(int fd, rs_reply_t* r) {
  char line[600];
  memset(r, 0, sizeof *r);
  if (!rs_read_line(fd, line, sizeof line)) return false;
  r->type = line[0];
  rs_copy(r->text, sizeof r->text, line + 1);
  r->integer = atoll(line + 1);
  if (r->type == '$') {
    if (r->integer < 0) {
      r->nil = true;
      r->text[0] = '\0';
      return true;
    }
    char* body = (char*)malloc((size_t)r->integer + 2);
    const bool ok = rs_read_exact(fd, body, (size_t)r->integer + 2);
    const size_t keep = (size_t)r->integer < sizeof r->text - 1 ? (size_t)r->integer : sizeof r->text - 1;
    memcpy(r->text, body, keep);
    r->text[keep] = '\0';
    free(body);
    return ok;
  }
  if (r->type == '*') {
    for (long long i = 0; i < r->integer; ++i) {
      rs_reply_t element;
      if (!rs_read_reply(fd, &element)) return false;
    }
  }
  return true;
}

/* Runs one command (arguments as C strings; AUTH first with the server's
 * requirepass, if any) and returns its reply. */
static inline rs_reply_t rs_cmdv(const rs_server_t* s, int argc, const char* const* argv) {
  rs_reply_t r;
  memset(&r, 0, sizeof r);
  const int fd = rs_connect(s);
  if (fd < 0) fail_msg("cannot connect to %s", s->socket);
  char head[64];
  for (int pass = s->requirepass[0] ? 0 : 1; pass < 2; ++pass) {
    const char* auth[2] = {"AUTH", s->requirepass};
    const int n = pass == 0 ? 2 : argc;
    const char* const* args = pass == 0 ? auth : argv;
    snprintf(head, sizeof head, "*%d\r\n", n);
    if (write(fd, head, strlen(head)) < 0) fail_msg("write: %s", strerror(errno));
    for (int i = 0; i < n; ++i) {
      snprintf(head, sizeof head, "$%zu\r\n", strlen(args[i]));
      if (write(fd, head, strlen(head)) < 0 || write(fd, args[i], strlen(args[i])) < 0 || write(fd, "\r\n", 2) < 0)
        fail_msg("write: %s", strerror(errno));
    }
    if (!rs_read_reply(fd, &r)) fail_msg("no reply from %s", s->socket);
  }
  close(fd);
  return r;
}

#define RS_CMD(s, ...) rs_cmdv((s), (int)(sizeof((const char*[]){__VA_ARGS__}) / sizeof(const char*)), \
                               (const char*[]){__VA_ARGS__})

/* Writes one command on an open connection `fd` (from rs_connect) without
 * reading its reply: commands pipelined this way run in order, and their
 * replies are read later with rs_read_reply. */
static inline void rs_sendv(int fd, int argc, const char* const* argv) {
  char head[64];
  snprintf(head, sizeof head, "*%d\r\n", argc);
  if (write(fd, head, strlen(head)) < 0) fail_msg("write: %s", strerror(errno));
  for (int i = 0; i < argc; ++i) {
    snprintf(head, sizeof head, "$%zu\r\n", strlen(argv[i]));
    if (write(fd, head, strlen(head)) < 0 || write(fd, argv[i], strlen(argv[i])) < 0 || write(fd, "\r\n", 2) < 0)
      fail_msg("write: %s", strerror(errno));
  }
}

#define RS_SEND(fd, ...) rs_sendv((fd), (int)(sizeof((const char*[]){__VA_ARGS__}) / sizeof(const char*)), \
                                  (const char*[]){__VA_ARGS__})

/* The next reply on `fd`, which must come. */
static inline rs_reply_t rs_reply(int fd) {
  rs_reply_t r;
  if (!rs_read_reply(fd, &r)) fail_msg("no reply on the test's connection");
  return r;
}

/* A field of INFO `section` (a number), read from the start of its text. */
static inline long long rs_info_number(const rs_server_t* s, const char* section, const char* field) {
  const int fd = rs_connect(s);
  if (fd < 0) fail_msg("cannot connect to %s", s->socket);
  RS_SEND(fd, "INFO", section);
  char line[600];
  if (!rs_read_line(fd, line, sizeof line) || line[0] != '$') fail_msg("INFO %s: no reply", section);
  const long long n = atoll(line + 1);
  char* body = (char*)malloc((size_t)n + 3);
  if (!rs_read_exact(fd, body, (size_t)n + 2)) fail_msg("INFO %s: short reply", section);
  body[n] = '\0';
  close(fd);
  char key[128];
  snprintf(key, sizeof key, "\n%s:", field);
  const char* at = strstr(body, key);
  if (!at) fail_msg("INFO %s has no %s", section, field);
  const long long v = atoll(at + strlen(key));
  free(body);
  return v;
}

/* A free loopback TCP port (bound and released; the server binds it next). */
static inline int rs_free_port(void) {
  const int port = sw_redis_free_port();
  if (port < 0) fail_msg("cannot bind a loopback port: %s", strerror(errno));
  return port;
}

/* Starts redis-server in a new directory (or in s->dir again when
 * `restart`): a unix socket, loopback TCP too with `tcp`, no persistence,
 * noeviction, protected mode, `requirepass` if not NULL, a read replica of
 * the server on loopback port `replica_of_port` unless it is 0. Waits until
 * it answers PING, at most 10 s. */
static inline void rs_start_replica(rs_server_t* s, bool tcp, const char* requirepass, bool restart,
                                    int replica_of_port) {
  const char* binary = rs_server_binary();
  if (!restart) {
    memset(s, 0, sizeof *s);
    rs_tempdir(s->dir, sizeof s->dir);
    snprintf(s->socket, sizeof s->socket, "%s/redis.sock", s->dir);
    snprintf(s->endpoint, sizeof s->endpoint, "unix://%s", s->socket);
    if (requirepass) snprintf(s->requirepass, sizeof s->requirepass, "%s", requirepass);
    if (tcp) {
      s->port = rs_free_port();
      snprintf(s->tcp, sizeof s->tcp, "redis://127.0.0.1:%d", s->port);
    }
  }
  char log[200];
  snprintf(log, sizeof log, "%s/redis.log", s->dir);
  const sw_redis_spec_t spec = {binary, s->dir, log, s->socket, s->port, s->requirepass, replica_of_port};
  const pid_t pid = sw_redis_spawn(&spec);
  if (pid < 0) fail_msg("fork: %s", strerror(errno));
  s->pid = pid;
  const double until = rs_now() + 10.0;
  for (;;) {
    const int fd = rs_connect(s);
    if (fd >= 0) {
      close(fd);
      rs_reply_t r = RS_CMD(s, "PING");
      if (r.type == '+') return;
    }
    int status;
    if (waitpid(pid, &status, WNOHANG) == pid) fail_msg("redis-server exited at start (see %s)", log);
    if (rs_now() > until) fail_msg("redis-server did not answer within 10 s (see %s)", log);
    usleep(10000);
  }
}

static inline void rs_start_ex(rs_server_t* s, bool tcp, const char* requirepass, bool restart) {
  rs_start_replica(s, tcp, requirepass, restart, 0);
}

static inline void rs_start(rs_server_t* s) { rs_start_ex(s, false, NULL, false); }

/* Waits at most `seconds` for the server process to end; kills it after. */
static inline void rs_reap(rs_server_t* s, double seconds) {
  if (s->pid <= 0) return;
  const double until = rs_now() + seconds;
  int status;
  while (waitpid(s->pid, &status, WNOHANG) == 0) {
    if (rs_now() > until) {
      kill(s->pid, SIGKILL);
      waitpid(s->pid, &status, 0);
      break;
    }
    usleep(5000);
  }
  s->pid = 0;
}

/* kill -9 of the server. */
static inline void rs_kill9(rs_server_t* s) {
  if (s->pid > 0) kill(s->pid, SIGKILL);
  rs_reap(s, 10.0);
}

/* Stops the server and removes its directory. */
static inline void rs_stop(rs_server_t* s) {
  if (s->pid > 0) {
    kill(s->pid, SIGCONT);
    kill(s->pid, SIGTERM);
    rs_reap(s, 10.0);
  }
  char path[256];
  const char* names[] = {"redis.sock", "redis.log", "dump.rdb"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; ++i) {
    snprintf(path, sizeof path, "%s/%s", s->dir, names[i]);
    unlink(path);
  }
  rmdir(s->dir);
}

/* A password file holding `password`, with `mode`, in a new directory. */
static inline void rs_password_file(char* path, size_t size, const char* password, mode_t mode) {
  char dir[128];
  rs_tempdir(dir, sizeof dir);
  snprintf(path, size, "%s/password", dir);
  const int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) fail_msg("open %s: %s", path, strerror(errno));
  if (write(fd, password, strlen(password)) < 0 || write(fd, "\n", 1) < 0) fail_msg("write: %s", strerror(errno));
  close(fd);
  chmod(path, mode);
}

static inline void rs_password_file_remove(const char* path) {
  unlink(path);
  char dir[256];
  snprintf(dir, sizeof dir, "%s", path);
  char* slash = strrchr(dir, '/');
  if (slash) *slash = '\0';
  rmdir(dir);
}

/* A remote descriptor over `endpoint` with namespace `ns`. */
static inline sw_remote_carrier_desc_t rs_desc(const char* const* endpoints, size_t count, const char* ns,
                                               size_t block_elements) {
  sw_remote_carrier_desc_t d;
  sw_remote_carrier_desc_init(&d);
  d.endpoints = endpoints;
  d.endpoint_count = count;
  d.key_namespace = ns;
  d.block_elements = block_elements;
  return d;
}

#endif
