/* The replay driver: main() for a fuzz target built without libFuzzer. Runs
 * LLVMFuzzerTestOneInput once per file named on the command line or found in
 * a directory named there (not recursing), so every corpus replays as an
 * ordinary test under any compiler and sanitizer. Prints how many inputs it
 * replayed; an input that breaks an expectation aborts with its name
 * printed first. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

static int replay_file(const char* path) {
  FILE* f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "replay: cannot open %s\n", path);
    return -1;
  }
  size_t cap = 4096, n = 0;
  uint8_t* buf = (uint8_t*)malloc(cap);
  size_t got;
  while (buf && (got = fread(buf + n, 1, cap - n, f)) > 0) {
    n += got;
    if (n == cap) {
      uint8_t* grown = (uint8_t*)realloc(buf, cap * 2);
      if (!grown) {
        free(buf);
        buf = NULL;
        break;
      }
      buf = grown;
      cap *= 2;
    }
  }
  fclose(f);
  if (!buf) {
    fprintf(stderr, "replay: out of memory reading %s\n", path);
    return -1;
  }
  fprintf(stderr, "replay: %s (%zu bytes)\n", path, n);
  LLVMFuzzerTestOneInput(buf, n);
  free(buf);
  return 0;
}

static int compare(const void* a, const void* b) { return strcmp(*(char* const*)a, *(char* const*)b); }

int main(int argc, char** argv) {
  size_t replayed = 0;
  for (int i = 1; i < argc; ++i) {
    struct stat st;
    if (stat(argv[i], &st) != 0) {
      fprintf(stderr, "replay: no such file or directory: %s\n", argv[i]);
      return 1;
    }
    if (!S_ISDIR(st.st_mode)) {
      if (replay_file(argv[i]) != 0) return 1;
      ++replayed;
      continue;
    }
    DIR* d = opendir(argv[i]);
    if (!d) {
      fprintf(stderr, "replay: cannot open directory %s\n", argv[i]);
      return 1;
    }
    /* In name order, so a failure reproduces in the same place. */
    char** names = NULL;
    size_t count = 0, cap = 0;
    struct dirent* e;
    while ((e = readdir(d)) != NULL) {
      if (e->d_name[0] == '.') continue;
      if (count == cap) {
        cap = cap ? cap * 2 : 64;
        names = (char**)realloc(names, cap * sizeof *names);
        if (!names) return 1;
      }
      const size_t len = strlen(argv[i]) + strlen(e->d_name) + 2;
      names[count] = (char*)malloc(len);
      snprintf(names[count], len, "%s/%s", argv[i], e->d_name);
      ++count;
    }
    closedir(d);
    qsort(names, count, sizeof *names, compare);
    for (size_t k = 0; k < count; ++k) {
      struct stat fs;
      if (stat(names[k], &fs) == 0 && S_ISREG(fs.st_mode)) {
        if (replay_file(names[k]) != 0) return 1;
        ++replayed;
      }
      free(names[k]);
    }
    free(names);
  }
  if (replayed == 0) {
    fprintf(stderr, "replay: no inputs given\n");
    return 1;
  }
  printf("replayed %zu inputs\n", replayed);
  return 0;
}
