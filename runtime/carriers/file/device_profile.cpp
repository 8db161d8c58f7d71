#include "carriers/file/device_profile.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>
#include <vector>

#include "base/mix.hpp"
#include "core/runtime.hpp"

namespace sw {

namespace {

constexpr std::array<size_t, 3> kProbeChunks = {size_t{1} << 20, size_t{2} << 20, size_t{4} << 20};
// From four: the runtime issues a transfer's next request from its loop
// thread as an earlier one completes, and on few cores that thread may wait
// for a core while the compute runs; requests queued ahead keep the device
// busy meanwhile (see the header).
constexpr std::array<uint32_t, 2> kProbeDepths = {4, 8};
// Bytes each measure reads: four rounds of its requests in flight, within
// these bounds (fewer rounds would charge the deeper queues their ramp and
// their tail); each configuration is measured once per pass.
constexpr size_t kProbeMinBytes = size_t{16} << 20, kProbeMaxBytes = size_t{48} << 20;
constexpr size_t kProbePasses = 3;
// Reads come in runs of this many contiguous bytes (a tile, an expert's
// matrix), each run at a scattered offset, a multiple of kProbeOffsetGrain
// (tiles of a model file start anywhere).
constexpr uint64_t kProbeRunBytes = uint64_t{8} << 20;
constexpr uint64_t kProbeOffsetGrain = 64 << 10;
// Configurations this close to the fastest count as fast as it (the
// passes' means still differ by a few per cent from one probe to the next).
constexpr double kProbeTolerance = 0.10;
constexpr const char* kCacheFormat = "strideweave-io-devices-1";

std::mutex& table_mutex() {
  static std::mutex m;
  return m;
}
// Profiles known to this process, by st_dev.
std::map<uint64_t, DeviceProfile>& table() {
  static std::map<uint64_t, DeviceProfile> t;
  return t;
}
// Held while probing: concurrent misses wait and then find the result.
std::mutex& probe_mutex() {
  static std::mutex m;
  return m;
}

enum class ProbeMode { kOn, kOff, kRefresh };

ProbeMode probe_mode() {
  const char* v = std::getenv("STRIDEWEAVE_IO_PROBE");
  if (!v || !*v) return ProbeMode::kOn;
  if (std::strcmp(v, "0") == 0 || std::strcmp(v, "off") == 0) return ProbeMode::kOff;
  if (std::strcmp(v, "refresh") == 0) return ProbeMode::kRefresh;
  return ProbeMode::kOn;
}

std::string device_name(uint64_t dev) {
  return std::to_string(major(static_cast<dev_t>(dev))) + ":" + std::to_string(minor(static_cast<dev_t>(dev)));
}

// What tells this device from another that later gets the same numbers:
// its size in sectors where sysfs knows it.
std::string device_identity(uint64_t dev) {
  std::ifstream in("/sys/dev/block/" + device_name(dev) + "/size");
  std::string sectors;
  if (in >> sectors && !sectors.empty() &&
      std::all_of(sectors.begin(), sectors.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return sectors;
  return "-";
}

std::string env_dir(const char* name, const char* suffix) {
  const char* v = std::getenv(name);
  if (!v || !*v) return {};
  return std::string(v) + suffix;
}

// One cache line: format, device, identity, chunk, depth, rate, time.
struct CacheLine {
  std::string device, identity;
  size_t chunk = 0;
  uint32_t depth = 0;
  double rate = 0;
  long long time = 0;
};

std::vector<CacheLine> read_cache(const std::string& path) {
  std::vector<CacheLine> lines;
  std::ifstream in(path);
  std::string text;
  while (std::getline(in, text)) {
    std::istringstream fields(text);
    std::string format;
    CacheLine l;
    if (!(fields >> format >> l.device >> l.identity >> l.chunk >> l.depth >> l.rate >> l.time)) continue;
    if (format != kCacheFormat) continue;
    // A damaged line counts as absent.
    if (l.chunk == 0 || l.chunk % 4096 || l.chunk > (size_t{1} << 30) || l.depth == 0 || l.depth > 64 ||
        !(l.rate > 0))
      continue;
    lines.push_back(l);
  }
  return lines;
}

void make_dirs(const std::string& dir) {
  for (size_t i = 1; i <= dir.size(); ++i)
    if (i == dir.size() || dir[i] == '/') ::mkdir(dir.substr(0, i).c_str(), 0755);
}

// Replaces the device's line of the cache file (write then rename: readers
// see the old file or the new one). Failures are logged, not raised.
void write_cache(Runtime& rt, const std::string& path, const CacheLine& entry) {
  if (path.empty()) return;
  make_dirs(path.substr(0, path.rfind('/')));
  std::vector<CacheLine> lines = read_cache(path);
  lines.erase(std::remove_if(lines.begin(), lines.end(), [&](const CacheLine& l) { return l.device == entry.device; }),
              lines.end());
  lines.push_back(entry);
  const std::string tmp = path + "." + std::to_string(::getpid()) + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    for (const CacheLine& l : lines)
      out << kCacheFormat << ' ' << l.device << ' ' << l.identity << ' ' << l.chunk << ' ' << l.depth << ' '
          << static_cast<long long>(l.rate) << ' ' << l.time << '\n';
    if (!out.flush()) {
      ::unlink(tmp.c_str());
      rt.log(SW_LOG_DEBUG, "cannot write the I/O profile cache '" + tmp + "'");
      return;
    }
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    ::unlink(tmp.c_str());
    rt.log(SW_LOG_DEBUG, "cannot replace the I/O profile cache '" + path + "'");
  }
}

// Bytes per second of `depth` threads reading `chunk`-byte pieces of runs
// at scattered offsets of `direct_fd`; 0 when a read fails.
double measure(int direct_fd, uint64_t file_bytes, size_t chunk, uint32_t depth, uint64_t seed,
               std::vector<void*>& buffers) {
  const size_t total = std::clamp<size_t>(chunk * depth * 4, kProbeMinBytes, kProbeMaxBytes);
  const size_t pieces = std::max<size_t>(total / chunk, depth);
  const uint64_t run = std::max<uint64_t>(kProbeRunBytes / chunk, 1);  // pieces per run
  const uint64_t grains = (file_bytes - run * chunk) / kProbeOffsetGrain + 1;
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  auto worker = [&](void* buffer) {
    for (size_t i; (i = next.fetch_add(1, std::memory_order_relaxed)) < pieces;) {
      const uint64_t offset = splitmix64(seed + i / run) % grains * kProbeOffsetGrain + i % run * chunk;
      size_t done = 0;
      while (done < chunk) {
        const ssize_t n = ::pread(direct_fd, static_cast<char*>(buffer) + done, chunk - done,
                                  static_cast<off_t>(offset + done));
        if (n <= 0 || n % 4096) {
          if (n < 0 && errno == EINTR) continue;
          failed.store(true, std::memory_order_relaxed);
          return;
        }
        done += static_cast<size_t>(n);
      }
    }
  };
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  for (uint32_t t = 1; t < depth; ++t) threads.emplace_back(worker, buffers[t]);
  worker(buffers[0]);
  for (auto& t : threads) t.join();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (failed.load()) return 0;
  return static_cast<double>(pieces * chunk) / std::max(seconds, 1e-9);
}

struct Trial {
  size_t chunk;
  uint32_t depth;
  double rate;
};

// Measures every configuration; false when a read failed.
bool probe(Runtime& rt, const std::string& name, int direct_fd, uint64_t file_bytes, DeviceProfile& out) {
  const size_t max_chunk = kProbeChunks.back();
  const uint32_t max_depth = kProbeDepths.back();
  std::vector<void*> buffers(max_depth, nullptr);
  struct Free {
    std::vector<void*>& b;
    ~Free() {
      for (void* p : b) std::free(p);
    }
  } free_buffers{buffers};
  for (void*& b : buffers)
    if (posix_memalign(&b, 4096, max_chunk) != 0) return false;
  for (void* b : buffers) std::memset(b, 0, max_chunk);  // touched: no page faults timed

  uint64_t seed = splitmix64(static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()));
  std::vector<Trial> trials;
  for (size_t chunk : kProbeChunks)
    if (chunk <= file_bytes)
      for (uint32_t depth : kProbeDepths) trials.push_back({chunk, depth, 0});
  if (trials.empty()) return false;
  // The device's speed drifts within a second: every configuration is
  // measured in each pass, each pass in another order, and counts by its
  // mean over the passes.
  for (size_t pass = 0; pass < kProbePasses; ++pass) {
    for (size_t k = 0; k < trials.size(); ++k) {
      Trial& t = trials[(k * (pass % 2 ? trials.size() - 1 : 1) + pass) % trials.size()];
      const double rate = measure(direct_fd, file_bytes, t.chunk, t.depth, seed, buffers);
      if (rate <= 0) return false;
      seed += 1 << 20;
      t.rate += rate / kProbePasses;
    }
  }
  const double best = std::max_element(trials.begin(), trials.end(), [](const Trial& a, const Trial& b) {
                        return a.rate < b.rate;
                      })->rate;
  std::string table;
  for (const Trial& t : trials) {
    char cell[64];
    std::snprintf(cell, sizeof cell, " %zuMx%u:%.2f", t.chunk >> 20, t.depth, t.rate / 1e9);
    table += cell;
  }
  rt.log(SW_LOG_DEBUG, "device " + name + " probe, GB/s by MiB per read x in flight:" + table);
  const Trial* pick = nullptr;
  for (const Trial& t : trials) {
    if (t.rate < best * (1 - kProbeTolerance)) continue;
    // The most requests in flight, then the smallest: see the header.
    const auto key = [](const Trial& x) { return std::make_pair(-static_cast<int64_t>(x.depth), x.chunk); };
    if (!pick || key(t) < key(*pick)) pick = &t;
  }
  out.chunk_bytes = pick->chunk;
  out.requests_in_flight = pick->depth;
  out.read_bytes_per_second = pick->rate;
  return true;
}

std::string mib_text(size_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, bytes % (1 << 20) ? "%.2f MiB" : "%.0f MiB", static_cast<double>(bytes) / (1 << 20));
  return text;
}

std::string gbs_text(double rate) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f GB/s", rate / 1e9);
  return text;
}

}  // namespace

const char* profile_source_name(ProfileSource source) {
  switch (source) {
    case ProfileSource::kProbed:
      return "probed";
    case ProfileSource::kCached:
      return "cached";
    case ProfileSource::kDefault:
      break;
  }
  return "default";
}

std::string device_profile_cache_path() {
  std::string dir = env_dir("STRIDEWEAVE_CACHE_DIR", "");
  if (dir.empty()) dir = env_dir("XDG_CACHE_HOME", "/strideweave");
  if (dir.empty()) dir = env_dir("HOME", "/.cache/strideweave");
  return dir.empty() ? std::string() : dir + "/io-devices";
}

DeviceProfile direct_read_profile(Runtime& rt, uint64_t device, int direct_fd, uint64_t file_bytes,
                                  const std::string& path, bool may_probe) {
  DeviceProfile profile;
  profile.device = device;
  if (direct_fd < 0) return profile;
  const ProbeMode mode = probe_mode();
  if (mode == ProbeMode::kOff) return profile;
  const std::string name = device_name(profile.device), identity = device_identity(profile.device);
  const std::string cache = device_profile_cache_path();

  auto known = [&](DeviceProfile& out) {
    std::lock_guard<std::mutex> lock(table_mutex());
    auto it = table().find(profile.device);
    if (it == table().end()) return false;
    out = it->second;
    if (out.source == ProfileSource::kProbed) out.source = ProfileSource::kCached;
    return true;
  };
  auto remember = [&](const DeviceProfile& p) {
    std::lock_guard<std::mutex> lock(table_mutex());
    table()[profile.device] = p;
  };

  // A refresh measures once per process, then uses what it measured.
  if (known(profile)) return profile;
  std::lock_guard<std::mutex> probing(probe_mutex());
  if (known(profile)) return profile;
  if (mode != ProbeMode::kRefresh && !cache.empty()) {
    for (const CacheLine& l : read_cache(cache)) {
      if (l.device != name || l.identity != identity) continue;
      profile.chunk_bytes = l.chunk;
      profile.requests_in_flight = l.depth;
      profile.read_bytes_per_second = l.rate;
      profile.source = ProfileSource::kCached;
      remember(profile);
      return profile;
    }
  }
  if (!may_probe || file_bytes < kProbeMinFileBytes) return profile;

  rt.log(SW_LOG_INFO, "measuring O_DIRECT reads of device " + name + " through '" + path +
                          "' (once per device" + (cache.empty() ? "" : "; kept in '" + cache + "'") + ")");
  const auto start = std::chrono::steady_clock::now();
  DeviceProfile measured = profile;
  if (!probe(rt, name, direct_fd, file_bytes, measured)) {
    rt.log(SW_LOG_DEBUG, "device " + name + ": a probe read of '" + path + "' failed; using the defaults");
    return profile;
  }
  measured.source = ProfileSource::kProbed;
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  rt.log(SW_LOG_INFO, "device " + name + ": " + mib_text(measured.chunk_bytes) + " reads, " +
                          std::to_string(measured.requests_in_flight) + " in flight, " +
                          gbs_text(measured.read_bytes_per_second) + " (measured in " +
                          std::to_string(static_cast<int>(ms)) + " ms)");
  remember(measured);
  write_cache(rt, cache,
              CacheLine{name, identity, measured.chunk_bytes, measured.requests_in_flight,
                        measured.read_bytes_per_second,
                        static_cast<long long>(std::chrono::duration_cast<std::chrono::seconds>(
                                                   std::chrono::system_clock::now().time_since_epoch())
                                                   .count())});
  return measured;
}

}  // namespace sw
