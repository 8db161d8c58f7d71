/* Preloaded (LD_PRELOAD, after the ASan runtime) into the examples that
 * bring up a Vulkan device under the sanitizer builds: dlclose() keeps every
 * library mapped. Debian 12's Vulkan loader (1.3.239) unloads the driver in
 * vkDestroyInstance and has no VK_LOADER_DISABLE_DYNAMIC_LIBRARY_UNLOADING
 * yet; once lavapipe is unmapped, a buffer it still holds in its own globals
 * reads to LeakSanitizer as a leak from "<unknown module>", which no
 * suppression can name. Kept mapped, the driver's globals still reach it, and
 * a true leak of the driver's is named (tests/lsan.supp), so StrideWeave's own
 * allocations stay checked. */
int dlclose(void *handle);

int dlclose(void *handle) {
  (void)handle;
  return 0;
}
