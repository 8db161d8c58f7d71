/* The device bridge driven by a fuzzed program over host and fake devices:
 * allocations with fuzzed specs and extents, copies with fuzzed offsets and
 * sizes (synchronous and asynchronous, completed in fuzzed order), views with
 * fuzzed dtypes and shapes, compute marks, frees, armed fake failures and
 * restarts. A model of each allocation's bytes follows every copy that
 * succeeded; reads must match it, and after a restart every old handle
 * must fail STALE_HANDLE. */
#include "fuzz.h"

#define SLOTS 6
#define MAXBYTES 512

typedef struct slot {
  sw_device_allocation_t* a;
  uint64_t extent, generation;
  uint8_t model[MAXBYTES];
  bool known;  /* the model holds the device's bytes */
  int computes;
} slot;

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fz_in in = {data, size};
  sw_device_t* dev = NULL;
  const bool fake = fz_bool(&in);
  if (fake)
    FZ_OK(sw_device_create_fake(fz_runtime(), NULL, &dev));
  else
    FZ_OK(sw_device_create_host(fz_runtime(), &dev));
  slot s[SLOTS];
  memset(s, 0, sizeof s);
  /* Host bytes of asynchronous copies outlive the input: a copy abandoned by
   * a restart never reports host_released. */
  static uint8_t host[16][MAXBYTES];
  size_t nhost = 0;
  sw_copy_event_t events[16];
  size_t nevents = 0;
  for (int step = 0; step < 64 && in.n > 0; ++step) {
    slot* x = &s[fz_u8(&in) % SLOTS];
    uint64_t gen = 0;
    FZ_OK(sw_device_generation(dev, &gen));
    switch (fz_u8(&in) % 9) {
      case 0: {  /* alloc */
        sw_object_spec_t spec;
        sw_object_spec_init(&spec);
        spec.dtype = (sw_dtype_t)fz_range(&in, 0, 9);
        spec.rank = (size_t)fz_range(&in, 0, 3);
        for (size_t i = 0; i < spec.rank; ++i) spec.shape[i] = fz_range(&in, -1, 8);
        spec.max_extent_bytes = fz_bool(&in) ? 0 : (uint64_t)fz_range(&in, 0, MAXBYTES);
        spec.alignment = fz_bool(&in) ? 0 : (uint64_t)1 << fz_range(&in, 0, 12);
        const uint64_t extent = (uint64_t)fz_range(&in, 0, MAXBYTES);
        sw_device_allocation_t* a = NULL;
        if (FZ_CHECK(sw_device_alloc(dev, &spec, extent, &a)) == SW_OK) {
          uint64_t got = 0;
          FZ_OK(sw_device_allocation_extent(a, &got));
          FZ_REQUIRE(got == extent, "extent %llu of %llu", (unsigned long long)got, (unsigned long long)extent);
          sw_device_allocation_release(x->a);
          memset(x, 0, sizeof *x);
          x->a = a;
          x->extent = extent;
          x->generation = gen;
          x->known = true;  /* zero-filled */
        }
        break;
      }
      case 1:
      case 2: {  /* copies, both ways */
        if (!x->a) break;
        const bool to_device = fz_bool(&in);
        const bool async = fz_bool(&in);
        const uint64_t offset = fz_bool(&in) ? (uint64_t)fz_range(&in, 0, MAXBYTES + 8) : (uint64_t)fz_i64(&in);
        const uint64_t bytes = fz_bool(&in) ? (uint64_t)fz_range(&in, 0, MAXBYTES) : (uint64_t)fz_i64(&in);
        if (async && nhost == 16) break;
        uint8_t* h = async ? host[nhost] : host[15];
        const bool fits = bytes <= MAXBYTES;
        for (size_t i = 0; i < MAXBYTES; ++i) h[i] = (uint8_t)(i + step);
        sw_copy_event_t ev;
        sw_copy_event_init(&ev);
        /* A size past the host buffer is only ever refused by the range check. */
        const bool in_range = offset <= x->extent && bytes <= x->extent - offset;
        if (!fits && in_range) break;
        sw_error_code_t code = to_device ? FZ_CHECK(sw_device_host_to_device(x->a, offset, h, bytes, async, &ev))
                                         : FZ_CHECK(sw_device_device_to_host(x->a, offset, h, bytes, async, &ev));
        if (code == SW_OK) {
          FZ_REQUIRE(in_range && bytes > 0, "copy of [%llu, +%llu) over %llu bytes accepted", (unsigned long long)offset,
                     (unsigned long long)bytes, (unsigned long long)x->extent);
          if (async) {
            ++nhost;
            if (nevents < 16) events[nevents++] = ev;
            x->known = false;  /* until completed, in whatever order */
          } else if (to_device) {
            memcpy(x->model + offset, h, bytes);
          } else if (x->known) {
            FZ_REQUIRE(memcmp(h, x->model + offset, bytes) == 0, "device bytes differ from what was copied in");
          }
        } else if (code != SW_ERROR_STALE_HANDLE && code != SW_ERROR_IO && code != SW_ERROR_DEVICE_LOST &&
                   code != SW_ERROR_STATE) {
          FZ_REQUIRE(!in_range || bytes == 0, "an in-range copy failed %s", sw_error_code_name(code));
        }
        if (code == SW_ERROR_DEVICE_LOST || code == SW_ERROR_IO) x->known = false;
        break;
      }
      case 3: {  /* complete or query events */
        if (!nevents) break;
        sw_copy_event_t ev = events[fz_u8(&in) % nevents];
        if (fz_bool(&in)) ev.id += (uint64_t)fz_range(&in, 0, 3);
        if (fz_bool(&in)) ev.generation += (uint64_t)fz_range(&in, 0, 2);
        bool released = false, complete = false;
        if (fake && fz_bool(&in)) {
          FZ_CHECK(sw_fake_device_complete(dev, &ev));
        } else if (FZ_CHECK(sw_device_event_query(dev, &ev, &released, &complete)) == SW_OK) {
          FZ_REQUIRE(!complete || released, "complete before host_released");
        }
        if (!fake) FZ_CHECK(sw_device_event_wait(dev, &ev, 1000000000));
        break;
      }
      case 4: {  /* views */
        if (!x->a) break;
        int64_t shape[SW_MAX_RANK];
        const size_t rank = (size_t)fz_range(&in, 0, 4);
        for (size_t i = 0; i < rank; ++i) shape[i] = fz_range(&in, -1, 8);
        sw_device_view_t* v = NULL;
        if (FZ_CHECK(sw_device_view(x->a, (sw_dtype_t)fz_range(&in, 0, 9), shape, rank, &v)) == SW_OK) {
          sw_view_info_t info;
          sw_view_info_init(&info);
          FZ_OK(sw_device_view_describe(v, &info));
          FZ_REQUIRE(info.rank == rank, "view rank %zu of %zu", info.rank, rank);
          /* A live view refuses the free. */
          FZ_REQUIRE(FZ_CHECK(sw_device_free(x->a)) != SW_OK, "freed under a live view");
          sw_device_view_release(v);
        }
        break;
      }
      case 5: {  /* compute marks */
        if (!x->a) break;
        if (fz_bool(&in)) {
          if (FZ_CHECK(sw_device_compute_begin(x->a)) == SW_OK) ++x->computes;
        } else if (FZ_CHECK(sw_device_compute_end(x->a)) == SW_OK) {
          FZ_REQUIRE(x->computes > 0, "compute_end without a begin");
          --x->computes;
        }
        break;
      }
      case 6: {  /* free */
        if (!x->a) break;
        if (FZ_CHECK(sw_device_free(x->a)) == SW_OK) {
          FZ_REQUIRE(x->computes == 0, "freed under compute");
          FZ_REQUIRE(FZ_CHECK(sw_device_free(x->a)) == SW_ERROR_STATE, "freed twice");
        }
        break;
      }
      case 7: {  /* armed fake failures */
        if (fake) FZ_OK(sw_fake_device_arm_failure(dev, fz_u8(&in) & 15));
        break;
      }
      default: {  /* restart: every older handle is stale */
        FZ_OK(sw_device_restart(dev));
        uint64_t now = 0;
        FZ_OK(sw_device_generation(dev, &now));
        FZ_REQUIRE(now == gen + 1, "generation %llu after %llu", (unsigned long long)now, (unsigned long long)gen);
        for (int i = 0; i < SLOTS; ++i) {
          if (!s[i].a) continue;
          uint8_t b[4] = {0};
          FZ_REQUIRE(FZ_CHECK(sw_device_host_to_device(s[i].a, 0, b, 1, false, NULL)) == SW_ERROR_STALE_HANDLE,
                     "a handle of an older generation was used");
          s[i].computes = 0;
        }
        break;
      }
    }
  }
  /* Finish pending copies (the fake only does them when told), then release. */
  if (fake) FZ_CHECK(sw_fake_device_complete_all(dev, &(size_t){0}));
  for (size_t i = 0; i < nevents; ++i)
    if (!fake) FZ_CHECK(sw_device_event_wait(dev, &events[i], -1));
  for (int i = 0; i < SLOTS; ++i) {
    while (s[i].computes-- > 0) FZ_CHECK(sw_device_compute_end(s[i].a));
    sw_device_allocation_release(s[i].a);
  }
  sw_device_release(dev);
  return 0;
}
