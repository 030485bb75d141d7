// kestrel-bench: end-to-end prefill and decode speed, printed like llama-bench so the numbers line
// up, plus the machine's read bandwidth measured in the same run and decode as a fraction of the
// bandwidth limit (weights read per token / bandwidth). On a shared machine the bandwidth moves by
// 10-30% from one second to the next, so it is measured right before and after every timed decode
// run, and each run is set against its own measurement: the best of those passes is the limit; the
// fastest loop's median pass is printed beside it (and decode's fraction of it in JSON), since on
// this host the best of 36 passes stands well above the usual rate.
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "decoder/model.h"
#include "decoder/session.h"
#include "platform/read_streams.h"

namespace {

using Clock = std::chrono::steady_clock;

const char kUsage[] =
    "usage: kestrel-bench -m FILE.vqf [-p 64] [-n 32] [-d 0] [-t 1,2] [-r 3] [--backend NAME] [-o md|json]\n"
    "                     [--kv f32|f16] [--weights auto|mapped|huge-pages|small-pages] [--probe-mib 512]\n"
    "                     [--roles]\n"
    "  -d N: decode after N context tokens (evaluated untimed), as llama-bench's -d\n"
    "  --kv TYPE: the KV cache's element type (default: the sessions' default)\n"
    "  --weights MODE: how the weights are held (kestrel.h, kestrel_weights_memory; default auto);\n"
    "    small-pages copies them onto anonymous 4 KiB pages, to tell the cost of small pages from\n"
    "    that of the page cache's (mapped)\n"
    "  --probe-mib N: size of the bandwidth probe's buffer (on huge pages where the OS gives them)\n"
    "  decode is set against the best of the probe's passes around each run (\"bandwidth\", \"of limit\";\n"
    "    JSON read_bandwidth_gbps, bandwidth_fraction) and the fastest probe loop's median pass (\"median\";\n"
    "    JSON read_bandwidth_median_gbps, bandwidth_fraction_of_median); JSON decode results also give\n"
    "    the tokens' milliseconds (token_ms_median, token_ms_p90, token_ms_max: every timed token) and\n"
    "    median_token_bandwidth_fraction (each run's median token against its limit, averaged), which a\n"
    "    token held up by the host does not lower\n"
    "  --roles: also print, on stderr, where each test's time went (milliseconds per run by role)\n"
    "    and, on several threads, the share of the products' thread time spent waiting, to start or for\n"
    "    the last thread; with -o json each result also has \"ms_per_run_by_role\", \"product_idle_share\" and\n"
    "    \"product_start_wait_share\" (the part of the idle share spent waiting to start); for decode, a\n"
    "    line of the tokens' milliseconds (median, p90, slowest) and the median token's fraction of the limit\n";

struct Result {
  std::string test;
  int threads;
  double mean, stddev;
  double bandwidth_gbps;     // mean of the probes next to the runs (0: none measured)
  double fraction, fraction_stddev;  // decode: tokens/s x bytes per token / bandwidth, per run
  // The same against the fastest probe loop's median pass around each run rather than the best
  // pass: how much of a fraction's shortfall is the luckiest pass standing above the usual rate.
  double median_bandwidth_gbps, median_fraction;
  kestrel::SessionTimings timings;   // summed over the timed runs
  int runs;
  // Decode: the timed tokens' milliseconds over all runs (median, p90, slowest), and the mean over
  // runs of the run's median token set against the run's limit. A token the host held up (another
  // tenant, a descheduled thread) lowers the run's mean rate but not its median token, so the two
  // apart show how much of a fraction's shortfall is such stalls rather than the kernels' rate.
  double token_ms_median = 0, token_ms_p90 = 0, token_ms_max = 0;
  double median_token_fraction = 0;

  // Milliseconds per run that role `role` took (--roles).
  double RoleMilliseconds(size_t role) const { return 1e3 * timings.role_seconds[role] / runs; }
  // Of the products' thread time, the share idle: waiting to start (a worker's wake-up) or for the
  // last thread to finish (0 on one thread); and the part of it spent waiting to start.
  double ProductIdleShare() const {
    return timings.product_thread_seconds > 0 ? timings.product_idle_thread_seconds / timings.product_thread_seconds : 0;
  }
  double ProductStartWaitShare() const {
    return timings.product_thread_seconds > 0 ? timings.product_start_wait_thread_seconds / timings.product_thread_seconds
                                              : 0;
  }
};

double Mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return v.empty() ? 0 : s / v.size();
}
double Stddev(const std::vector<double>& v) {
  if (v.size() < 2) return 0;
  const double m = Mean(v);
  double s = 0;
  for (double x : v) s += (x - m) * (x - m);
  return std::sqrt(s / (v.size() - 1));
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 != 0 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// The nearest-rank percentile p (0 < p <= 100) of v: the smallest value with at least p% of v at or
// below it.
double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const auto rank = static_cast<size_t>(std::ceil(p / 100.0 * static_cast<double>(v.size())));
  return v[std::clamp<size_t>(rank, 1, v.size()) - 1];
}

// Read bandwidth over a buffer much larger than the caches, allocated and paged in once.
class BandwidthProbe {
 public:
  // On huge pages where the OS gives them, as the weights are by default: a probe slowed by TLB
  // misses would set the limit too low. Advised before the first touch, which is when pages are
  // chosen.
  explicit BandwidthProbe(size_t bytes) : buffer_(new uint64_t[bytes / 8 + (2u << 20) / 8]), size_(bytes / 8) {
    data_ = buffer_.get();
#ifdef MADV_HUGEPAGE
    const auto begin = (reinterpret_cast<uintptr_t>(data_) + (2u << 20) - 1) & ~uintptr_t{(2u << 20) - 1};
    data_ = reinterpret_cast<uint64_t*>(begin);
    if (size_ >= (2u << 20) / 8) ::madvise(data_, size_ * 8 / (2u << 20) * (2u << 20), MADV_HUGEPAGE);
#endif
    for (size_t i = 0; i < size_; i += 512) data_[i] = i;  // touch every page
  }

  // GB/s with `threads` threads, best of `reps` passes of each read loop: with and without software
  // prefetch (which one reads faster depends on the thread count and the moment; in a read-loop
  // experiment one thread here read 10.4-10.8 GB/s without it and 8.8-10.2 with it, and the
  // prefetching probe alone gave a limit that one-thread decode exceeded, up to 110%), and each
  // thread reading 1, 2 or 4 streams at once (the Q8_0 decode kernel reads 4 row groups at once,
  // which took one thread to 104-110% of the one- and two-stream limits). The loop is the one
  // function the kernels bench's memory_read cases also run (ReadStreams), which read 3-23% more
  // than a copy inlined here, same instructions but for where the captured values were kept
  // (bench/README.md, twenty-fifth session); a probe that reads less flatters the fraction.
  static constexpr int kLoops = 6;  // 1, 2 or 4 streams, with and without prefetch
  // Every pass's rate is also appended to (*passes)[loop].
  double Measure(int threads, int reps, std::vector<double> (*passes)[kLoops]) {
    double best = 0;
    for (int rep = 0; rep < reps; ++rep) {
      int loop = 0;
      for (int streams : {1, 2, 4}) {
        for (bool prefetch : {true, false}) {
          (*passes)[loop].push_back(Pass(threads, prefetch, streams));
          best = std::max(best, (*passes)[loop++].back());
        }
      }
    }
    return best;
  }
  // The fastest loop's usual rate: the best over the loops of the median of each loop's passes.
  static double BestLoopMedian(const std::vector<double> (&passes)[kLoops]) {
    double best = 0;
    for (const auto& loop : passes) best = std::max(best, Median(loop));
    return best;
  }

 private:
  double Pass(int threads, bool prefetch, int streams) {
    std::atomic<uint64_t> sink{0}, bytes{0};
    const auto start = Clock::now();
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) {
      pool.emplace_back([&, t] {
        const size_t begin = size_ * t / threads, end = size_ * (t + 1) / threads;
        size_t read = 0;
        sink += kestrel::ReadStreams(data_ + begin, end - begin, streams, prefetch, &read);
        bytes += read;
      });
    }
    for (auto& th : pool) th.join();
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    return static_cast<double>(bytes.load()) / seconds / 1e9;
  }

  std::unique_ptr<uint64_t[]> buffer_;  // new[] of a trivial type: pages untouched until the loop above
  uint64_t* data_;
  size_t size_;
};

// Bytes a decoded token reads: the weights, plus the keys and values of every earlier position
// (kv_bytes each), averaged over the positions of a run of `gen` tokens after `depth`.
double BytesPerToken(uint64_t weight_bytes, const kestrel::ModelConfig& c, size_t kv_bytes, int depth, int gen) {
  const double kv_per_position = 2.0 * c.n_layers * c.n_kv_heads * c.head_dim * static_cast<double>(kv_bytes);
  return static_cast<double>(weight_bytes) + kv_per_position * (depth + (gen + 1) / 2.0);
}

}  // namespace

int main(int argc, char** argv) {
  using namespace kestrel;
  std::string path, backend, output = "md";
  FileResidence weights = FileResidence::kAuto;
  int prompt = 64, gen = 32, depth = 0, reps = 3, probe_mib = 512;
  bool roles = false;
  DType kv_dtype = SessionOptions{}.kv_dtype;
  std::vector<int> thread_counts = {1, 2};
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "kestrel-bench: %s needs a value\n%s", a.c_str(), kUsage);
        std::exit(1);
      }
      return argv[++i];
    };
    auto integer = [&](int lo, int hi) {
      const std::string v = value();
      int n = 0;
      if (!absl::SimpleAtoi(v, &n) || n < lo || n > hi) {
        std::fprintf(stderr, "kestrel-bench: %s needs an integer in [%d, %d], got '%s'\n", a.c_str(), lo, hi, v.c_str());
        std::exit(1);
      }
      return n;
    };
    if (a == "-m") path = value();
    else if (a == "-p") prompt = integer(0, 1 << 16);
    else if (a == "-n") gen = integer(0, 1 << 16);
    else if (a == "-d") depth = integer(0, 1 << 20);
    else if (a == "-r") reps = integer(1, 1000);
    else if (a == "--probe-mib") probe_mib = integer(1, 1 << 16);
    else if (a == "--backend") backend = value();
    else if (a == "--roles")
      roles = true;
    else if (a == "--weights") {
      const std::string v = value();
      if (v == "auto")
        weights = FileResidence::kAuto;
      else if (v == "mapped")
        weights = FileResidence::kMapped;
      else if (v == "huge-pages")
        weights = FileResidence::kHugePageCopy;
      else if (v == "small-pages")
        weights = FileResidence::kSmallPageCopy;
      else {
        std::fprintf(stderr, "kestrel-bench: --weights must be auto, mapped, huge-pages or small-pages, got '%s'\n",
                     v.c_str());
        return 1;
      }
    } else if (a == "--kv") {
      const std::string v = value();
      const std::optional<DType> t = DTypeFromName(v);
      if (t != DType::kF32 && t != DType::kF16) {
        std::fprintf(stderr, "kestrel-bench: --kv must be f32 or f16, got '%s'\n", v.c_str());
        return 1;
      }
      kv_dtype = *t;
    } else if (a == "-o")
      output = value();
    else if (a == "-t") {
      thread_counts.clear();
      for (absl::string_view part : absl::StrSplit(value(), ',')) {
        int n = 0;
        if (!absl::SimpleAtoi(part, &n) || n < 1 || n > 256) {
          std::fprintf(stderr, "kestrel-bench: -t takes a comma-separated list of thread counts\n");
          return 1;
        }
        thread_counts.push_back(n);
      }
    } else if (a == "-h" || a == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    } else {
      std::fprintf(stderr, "kestrel-bench: unknown argument '%s'\n%s", a.c_str(), kUsage);
      return 1;
    }
  }
  if (path.empty()) {
    std::fprintf(stderr, "kestrel-bench: no model (-m FILE.vqf)\n%s", kUsage);
    return 1;
  }
  if (output != "md" && output != "json") {
    std::fprintf(stderr, "kestrel-bench: -o must be md or json\n");
    return 1;
  }
  auto model = Model::Load(path, ModelOptions{backend, weights});
  if (!model.ok()) {
    std::fprintf(stderr, "kestrel-bench: %s\n", std::string(model.status().message()).c_str());
    return 1;
  }
  const ModelConfig& c = (*model)->config();
  if (prompt + depth + gen > c.context_length) {
    std::fprintf(stderr, "kestrel-bench: -p + -d + -n = %d exceeds the model's context of %d\n", prompt + depth + gen,
                 c.context_length);
    return 1;
  }
  // Bytes of weights streamed per decoded token: every matrix except the embedding table (read one
  // row at a time), which counts once more when it doubles as the LM head.
  const size_t kv_bytes = DTypeBlockBytes(kv_dtype);  // one element: f32 4, f16 2
  const char* kv_name = DTypeName(kv_dtype);
  uint64_t weight_bytes = 0, params = 0;
  for (const TensorInfo& t : (*model)->file().tensors()) {
    params += static_cast<uint64_t>(t.elements());
    if (t.name != "token_embd.weight" || c.tied_embeddings) weight_bytes += t.bytes;
  }
  std::mt19937 rng(1);
  std::uniform_int_distribution<int32_t> token(0, c.vocab_size - 1);
  std::vector<int32_t> prompt_tokens(static_cast<size_t>(prompt)), depth_tokens(static_cast<size_t>(depth));
  for (auto& t : prompt_tokens) t = token(rng);
  for (auto& t : depth_tokens) t = token(rng);

  std::vector<Result> results;
  BandwidthProbe probe(gen > 0 ? size_t(probe_mib) << 20 : 0);  // only decode runs are set against it
  for (int threads : thread_counts) {
    SessionOptions options;
    options.n_threads = threads;
    options.context_length = std::max(std::max(prompt, depth + gen), 1);
    options.kv_dtype = kv_dtype;
    auto session = Session::Create(**model, options);
    if (!session.ok()) {
      std::fprintf(stderr, "kestrel-bench: %s\n", std::string(session.status().message()).c_str());
      return 1;
    }
    Session& s = **session;
    std::vector<double> pp, tg, bandwidth, fraction, median_bandwidth, median_fraction, token_seconds, token_fraction;
    SessionTimings pp_timings, tg_timings;
    auto add_timings = [&s](SessionTimings* sum) {
      for (size_t r = 0; r < sum->role_seconds.size(); ++r) sum->role_seconds[r] += s.timings().role_seconds[r];
      sum->product_idle_thread_seconds += s.timings().product_idle_thread_seconds;
      sum->product_start_wait_thread_seconds += s.timings().product_start_wait_thread_seconds;
      sum->product_thread_seconds += s.timings().product_thread_seconds;
    };
    // One untimed warm-up run pages the weights in.
    for (int rep = -1; rep < reps; ++rep) {
      if (prompt > 0) {
        s.Reset();
        s.ResetTimings();
        const auto start = Clock::now();
        if (auto st = s.Eval(prompt_tokens.data(), prompt_tokens.size()); !st.ok()) {
          std::fprintf(stderr, "kestrel-bench: %s\n", std::string(st.message()).c_str());
          return 1;
        }
        if (rep >= 0) {
          pp.push_back(prompt / std::chrono::duration<double>(Clock::now() - start).count());
          add_timings(&pp_timings);
        }
      }
      if (gen > 0) {
        s.Reset();
        if (depth > 0) {
          if (auto st = s.Eval(depth_tokens.data(), depth_tokens.size()); !st.ok()) {
            std::fprintf(stderr, "kestrel-bench: %s\n", std::string(st.message()).c_str());
            return 1;
          }
        }
        std::vector<double> passes[BandwidthProbe::kLoops];
        const double bw_before = rep >= 0 ? probe.Measure(threads, 3, &passes) : 0;
        int32_t next = prompt_tokens.empty() ? 1 : prompt_tokens[0];
        s.ResetTimings();
        std::vector<double> run_tokens;  // each token's seconds, the greedy pick included
        const auto start = Clock::now();
        auto token_start = start;
        for (int i = 0; i < gen; ++i) {
          if (auto st = s.Eval(&next, 1, true); !st.ok()) {
            std::fprintf(stderr, "kestrel-bench: %s\n", std::string(st.message()).c_str());
            return 1;
          }
          next = static_cast<int32_t>(std::max_element(s.logits(), s.logits() + c.vocab_size) - s.logits());
          const auto token_end = Clock::now();
          run_tokens.push_back(std::chrono::duration<double>(token_end - token_start).count());
          token_start = token_end;
        }
        const double rate = gen / std::chrono::duration<double>(token_start - start).count();
        if (rep >= 0) {
          // The better of the two probes around the run: a slow moment would flatter the fraction.
          const double bw = std::max(bw_before, probe.Measure(threads, 3, &passes));
          const double bytes_per_token = BytesPerToken(weight_bytes, c, kv_bytes, depth, gen);
          const double bytes_per_second = rate * bytes_per_token;
          tg.push_back(rate);
          add_timings(&tg_timings);
          bandwidth.push_back(bw);
          fraction.push_back(bytes_per_second / (bw * 1e9));
          median_bandwidth.push_back(BandwidthProbe::BestLoopMedian(passes));
          median_fraction.push_back(bytes_per_second / (median_bandwidth.back() * 1e9));
          token_seconds.insert(token_seconds.end(), run_tokens.begin(), run_tokens.end());
          token_fraction.push_back(bytes_per_token / Median(run_tokens) / (bw * 1e9));
        }
      }
    }
    const double bw = Mean(bandwidth);
    if (prompt > 0)
      results.push_back({"pp" + std::to_string(prompt), threads, Mean(pp), Stddev(pp), bw, 0, 0, 0, 0, pp_timings, reps});
    if (gen > 0) {
      results.push_back({"tg" + std::to_string(gen) + (depth > 0 ? " @ d" + std::to_string(depth) : ""), threads,
                         Mean(tg), Stddev(tg), bw, Mean(fraction), Stddev(fraction), Mean(median_bandwidth),
                         Mean(median_fraction), tg_timings, reps, 1e3 * Median(token_seconds),
                         1e3 * Percentile(token_seconds, 90), 1e3 * Percentile(token_seconds, 100),
                         Mean(token_fraction)});
    }
  }

  if (roles) {
    // The session's own clocks: each product, attention, and the rest (norms, quantization of
    // activations, RoPE, residual adds), as wall time of the calling thread, per run of the test.
    for (const Result& r : results) {
      std::fprintf(stderr, "roles %s, %d threads, ms per run:", r.test.c_str(), r.threads);
      double total = 0;
      for (size_t i = 0; i < r.timings.role_seconds.size(); ++i) {
        const double ms = r.RoleMilliseconds(i);
        total += ms;
        std::fprintf(stderr, " %s %.2f", TimingRoleName(static_cast<TimingRole>(i)), ms);
      }
      std::fprintf(stderr, " (sum %.2f)", total);
      if (r.timings.product_thread_seconds > 0) {
        std::fprintf(stderr, "; threads idle for %.1f%% of the products' thread time (%.1f%% waiting to start)",
                     100 * r.ProductIdleShare(), 100 * r.ProductStartWaitShare());
      }
      std::fprintf(stderr, "\n");
      if (r.token_ms_median > 0) {
        std::fprintf(stderr,
                     "tokens %s, %d threads, ms per token: median %.3f, p90 %.3f, slowest %.3f; the median token at "
                     "%.0f%% of the bandwidth limit\n",
                     r.test.c_str(), r.threads, r.token_ms_median, r.token_ms_p90, r.token_ms_max,
                     100 * r.median_token_fraction);
      }
    }
  }
  const std::string name = c.name.empty() ? ArchitectureName(c.architecture) : c.name;
  // How the weights were held, with the share the OS really put on huge pages.
  const MappedFile& mapping = *(*model)->file().mapping();
  const double huge_share = static_cast<double>(mapping.HugePageBytes()) / static_cast<double>(mapping.size());
  // And whether the loader regrouped the Q4_0 matrices for the backend (format/layout.h).
  const int lines_tensors = (*model)->q4_0x4_lines_tensors();
  char weights_note[96];
  std::snprintf(weights_note, sizeof(weights_note), "%s (%.0f%% huge)%s", FileResidenceName(mapping.residence()),
                100.0 * huge_share, lines_tensors > 0 ? ", q4_0x4_lines" : "");
  const double size_gib = static_cast<double>((*model)->file().file_bytes()) / (1ull << 30);
  if (output == "json") {
    std::printf("[\n");
    for (size_t i = 0; i < results.size(); ++i) {
      const Result& r = results[i];
      std::printf(
          "  {\"model\": \"%s\", \"size_bytes\": %llu, \"params\": %llu, \"backend\": \"%s\", \"threads\": %d, "
          "\"kv_type\": \"%s\", \"weights\": \"%s\", \"weights_on_huge_pages\": %.3f, "
          "\"q4_0x4_lines_tensors\": %d, \"test\": \"%s\", \"tokens_per_second\": %.3f, \"stddev\": %.3f",
          name.c_str(), static_cast<unsigned long long>((*model)->file().file_bytes()),
          static_cast<unsigned long long>(params), (*model)->backend().name, r.threads, kv_name,
          FileResidenceName(mapping.residence()), huge_share, lines_tensors, r.test.c_str(), r.mean, r.stddev);
      if (r.bandwidth_gbps > 0) std::printf(", \"read_bandwidth_gbps\": %.2f", r.bandwidth_gbps);
      if (r.fraction > 0) {
        std::printf(", \"bandwidth_limit_tokens_per_second\": %.3f, \"bandwidth_fraction\": %.3f, "
                    "\"bandwidth_fraction_stddev\": %.3f",
                    r.bandwidth_gbps * 1e9 / BytesPerToken(weight_bytes, c, kv_bytes, depth, gen), r.fraction, r.fraction_stddev);
        std::printf(", \"read_bandwidth_median_gbps\": %.2f, \"bandwidth_fraction_of_median\": %.3f",
                    r.median_bandwidth_gbps, r.median_fraction);
        std::printf(
            ", \"token_ms_median\": %.4f, \"token_ms_p90\": %.4f, \"token_ms_max\": %.4f, "
            "\"median_token_bandwidth_fraction\": %.3f",
            r.token_ms_median, r.token_ms_p90, r.token_ms_max, r.median_token_fraction);
      }
      if (roles) {
        std::printf(", \"ms_per_run_by_role\": {");
        for (size_t j = 0; j < r.timings.role_seconds.size(); ++j) {
          std::printf("%s\"%s\": %.4f", j > 0 ? ", " : "", TimingRoleName(static_cast<TimingRole>(j)),
                      r.RoleMilliseconds(j));
        }
        std::printf("}");
        if (r.timings.product_thread_seconds > 0) {
          std::printf(", \"product_idle_share\": %.4f, \"product_start_wait_share\": %.4f", r.ProductIdleShare(),
                      r.ProductStartWaitShare());
        }
      }
      std::printf("}%s\n", i + 1 < results.size() ? "," : "");
    }
    std::printf("]\n");
  } else {
    std::printf("| model | size | params | backend | threads | test | t/s | bandwidth | of limit | kv | weights |\n");
    std::printf("| --- | ---: | ---: | --- | ---: | --- | ---: | ---: | ---: | --- | --- |\n");
    for (const Result& r : results) {
      char bandwidth[32] = "", fraction[32] = "";
      if (r.fraction > 0) {
        std::snprintf(fraction, sizeof(fraction), "%.0f%% ± %.0f", 100.0 * r.fraction, 100.0 * r.fraction_stddev);
        std::snprintf(bandwidth, sizeof(bandwidth), "%.1f (median %.1f) GB/s", r.bandwidth_gbps,
                      r.median_bandwidth_gbps);
      } else if (r.bandwidth_gbps > 0) {
        std::snprintf(bandwidth, sizeof(bandwidth), "%.1f GB/s", r.bandwidth_gbps);
      }
      std::printf("| %s | %.2f GiB | %.2f B | %s | %d | %s | %.2f ± %.2f | %s | %s | %s | %s |\n", name.c_str(),
                  size_gib, params / 1e9, (*model)->backend().name, r.threads, r.test.c_str(), r.mean, r.stddev,
                  bandwidth, fraction, kv_name, weights_note);
    }
  }
  return 0;
}
