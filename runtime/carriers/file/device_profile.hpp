// How O_DIRECT reads of one storage device go fastest: the bytes per read
// request and the requests in flight. Devices disagree widely (an NVMe drive
// wants many requests in flight; a throttled virtual disk reads fastest with
// one or two requests of a megabyte or two and slower with deeper queues of
// larger ones), so the runtime measures each device once instead of asking
// the user to know.
//
// The measurement (the probe) reads the file being opened through its
// O_DIRECT descriptor: for each chunk size of kProbeChunks and each depth of
// kProbeDepths, `depth` threads read chunk-sized pieces of 8 MiB runs at
// scattered offsets for a fixed number of bytes, in three passes over every
// configuration (a virtual disk's speed drifts within a second), each
// counted by its mean. The chosen configuration is, among those within
// kProbeTolerance of the fastest, the one with the most requests in flight,
// then the smallest requests; depths start at four. Read alone, this
// machine's virtual disk is about as fast with 2 requests of 1 MiB in
// flight as with 8 (within its drift); but the runtime issues a transfer's
// next request from its loop thread as one completes, and on few cores that
// thread waits for a core while the compute runs: requests queued ahead keep
// the device busy meanwhile (a MoE step overlapping its reads with two
// compute threads ran at 0.93-0.97x its bound with 1 MiB x 8 in flight,
// 0.94-0.98x with 2 MiB x 4, 1.14x with 1 MiB x 2, 1.2-1.3x with the
// 4 MiB x 4 defaults).
// It takes about half a second on a disk reading ~2 GB/s, once per
// device: the result is kept for the process and in a cache file,
//
//   $STRIDEWEAVE_CACHE_DIR/io-devices, or $XDG_CACHE_HOME/strideweave/…,
//   or $HOME/.cache/strideweave/…
//
// one line per device (its major:minor and size, so a different disk under
// the same numbers is measured anew). STRIDEWEAVE_IO_PROBE=0 turns the probe
// off (the defaults apply where no profile is known); =refresh measures again
// and replaces the cached line. A cache that cannot be read or written only
// costs a new probe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace sw {

class Runtime;

inline constexpr size_t kDefaultChunkBytes = size_t{4} << 20;
inline constexpr uint32_t kDefaultRequestsInFlight = 4;
// Files smaller than this are not probed (too few distinct bytes to measure
// a device rather than its cache), nor are scratch files (sparse: holes read
// without touching the device).
inline constexpr uint64_t kProbeMinFileBytes = uint64_t{64} << 20;

enum class ProfileSource : uint8_t {
  kDefault = 0,  // nothing measured: the defaults
  kProbed = 1,   // measured by this process
  kCached = 2,   // measured earlier, read from the process or the cache file
};

struct DeviceProfile {
  size_t chunk_bytes = kDefaultChunkBytes;
  uint32_t requests_in_flight = kDefaultRequestsInFlight;
  double read_bytes_per_second = 0;  // the chosen configuration's rate; 0 when not measured
  uint64_t device = 0;               // st_dev of the file
  ProfileSource source = ProfileSource::kDefault;
};

// The profile of `device` (st_dev of the file `path`, named in messages),
// for reads through `direct_fd` (the file's O_DIRECT descriptor; -1: none,
// which gives the defaults). Probes on a miss when `may_probe` and the file holds
// at least kProbeMinFileBytes. Thread-safe; concurrent misses on one device
// probe once.
DeviceProfile direct_read_profile(Runtime& runtime, uint64_t device, int direct_fd, uint64_t file_bytes,
                                  const std::string& path, bool may_probe);

// The cache file's path ("" when neither STRIDEWEAVE_CACHE_DIR, XDG_CACHE_HOME
// nor HOME is set).
std::string device_profile_cache_path();

const char* profile_source_name(ProfileSource source);

}  // namespace sw
