/* Compiled as C99 and as C11 with -Wall -Wextra -Werror -pedantic: the
 * public headers are valid C of both. */
#include "strideweave/strideweave.h"
#include "strideweave/strideweave_testing.h"

#include <stdio.h>
#include <string.h>

int main(void) {
  char expect[32];
  if (sw_version() != SW_VERSION) return 1;
  snprintf(expect, sizeof expect, "%d.%d.%d", SW_VERSION_MAJOR, SW_VERSION_MINOR, SW_VERSION_PATCH);
  if (strcmp(sw_version_string(), expect) != 0) return 1;
  {
    sw_runtime_desc_t desc;
    sw_runtime_desc_init(&desc);
    if (desc.struct_size != sizeof desc) return 1;
  }
  printf("C header ok (%ld): %s\n", (long)__STDC_VERSION__, sw_version_string());
  return 0;
}
