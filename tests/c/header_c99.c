/* Compiled with -std=c99 -pedantic-errors: the public header is valid C99. */
#include "strideweave/strideweave.h"

#include <stdio.h>
#include <string.h>

int main(void) {
  if (sw_version() != SW_VERSION) return 1;
  if (strcmp(sw_version_string(), "0.1.0") != 0) return 1;
  sw_runtime_desc_t desc;
  sw_runtime_desc_init(&desc);
  if (desc.struct_size != sizeof desc) return 1;
  printf("C99 header ok: %s\n", sw_version_string());
  return 0;
}
