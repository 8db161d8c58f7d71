/* Shared by the suites that write files (model files, GGUF files): a
 * fixture of a runtime and a fresh directory under $TMPDIR (or /tmp),
 * emptied and removed by the teardown, and helpers that write and read
 * whole files. Include after sw_test.h. */
#pragma once

#include <dirent.h>
#include <unistd.h>

typedef struct {
  sw_runtime_t* rt;
  char dir[256];
} fixture_t;

#define FIXTURE(state) ((fixture_t*)*(state))

/* A setup: the directory is named `<prefix>_XXXXXX`. */
static int file_fixture_setup(void** state, const char* prefix) {
  fixture_t* f = (fixture_t*)calloc(1, sizeof *f);
  if (!f) return -1;
  const char* tmp = getenv("TMPDIR");
  snprintf(f->dir, sizeof f->dir, "%s/%s_XXXXXX", tmp && *tmp ? tmp : "/tmp", prefix);
  if (!mkdtemp(f->dir)) {
    free(f);
    return -1;
  }
  sw_error_t* e = sw_runtime_create(NULL, &f->rt);
  if (e) {
    sw_error_free(e);
    rmdir(f->dir);
    free(f);
    return -1;
  }
  *state = f;
  return 0;
}

/* The number of entries of `dir` (not . and ..), -1 when it cannot be read;
 * the first one's path into `first` when given. */
static int count_entries(const char* dir, char* first, size_t capacity) {
  DIR* d = opendir(dir);
  if (!d) return -1;
  int n = 0;
  struct dirent* e;
  while ((e = readdir(d)) != NULL) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
    if (n == 0 && first) snprintf(first, capacity, "%s/%s", dir, e->d_name);
    ++n;
  }
  closedir(d);
  return n;
}

static void remove_all(const char* dir) {
  char path[512];
  while (count_entries(dir, path, sizeof path) > 0) unlink(path);
}

static int fixture_teardown(void** state) {
  fixture_t* f = (fixture_t*)*state;
  sw_runtime_release(f->rt);
  remove_all(f->dir);
  int ok = rmdir(f->dir) == 0 ? 0 : -1;
  free(f);
  return ok;
}

static void path_in(const fixture_t* f, const char* name, char* out, size_t capacity) {
  snprintf(out, capacity, "%s/%s", f->dir, name);
}

static void write_bytes(const char* path, const void* data, size_t n) {
  FILE* fp = fopen(path, "wb");
  assert_non_null(fp);
  if (n) assert_int_equal(fwrite(data, 1, n, fp), n);
  assert_int_equal(fclose(fp), 0);
}

/* The whole file, in a malloc'ed buffer one byte longer than its size. */
static unsigned char* read_bytes(const char* path, size_t* out_n) {
  FILE* fp = fopen(path, "rb");
  assert_non_null(fp);
  fseek(fp, 0, SEEK_END);
  long n = ftell(fp);
  fseek(fp, 0, SEEK_SET);
  unsigned char* data = (unsigned char*)malloc((size_t)n + 1);
  assert_int_equal(fread(data, 1, (size_t)n, fp), (size_t)n);
  fclose(fp);
  *out_n = (size_t)n;
  return data;
}
