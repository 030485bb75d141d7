// kestrel-bench: end-to-end prefill and decode speed, printed like llama-bench so the numbers line
// up, plus the machine's read bandwidth measured in the same run and decode as a fraction of the
// bandwidth limit (weights read per token / bandwidth).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "decoder/model.h"
#include "decoder/session.h"

namespace {

using Clock = std::chrono::steady_clock;

const char kUsage[] =
    "usage: kestrel-bench -m FILE.vqf [-p 64] [-n 32] [-t 1,2] [-r 3] [--backend NAME] [-o md|json]\n";

struct Result {
  std::string test;
  int threads;
  double mean, stddev;
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

// Read bandwidth with `threads` threads over a buffer much larger than the caches (GB/s, best of 5).
double MeasureReadBandwidth(int threads) {
  const size_t bytes = size_t{512} << 20;
  std::vector<uint64_t> buffer(bytes / 8);
  for (size_t i = 0; i < buffer.size(); i += 512) buffer[i] = i;  // touch every page
  double best = 0;
  for (int rep = 0; rep < 5; ++rep) {
    std::atomic<uint64_t> sink{0};
    const auto start = Clock::now();
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) {
      pool.emplace_back([&, t] {
        const size_t begin = buffer.size() * t / threads, end = buffer.size() * (t + 1) / threads;
        uint64_t a = 0, b = 0, c = 0, d = 0;
        // One cache line per step, prefetched 32 KB ahead as the decode kernels do: without it this
        // loop reads slower than the kernels stream, and the limit it gives would be too low.
        for (size_t i = begin; i + 8 <= end; i += 8) {
          __builtin_prefetch(buffer.data() + i + 4096);
          a += buffer[i] + buffer[i + 4];
          b += buffer[i + 1] + buffer[i + 5];
          c += buffer[i + 2] + buffer[i + 6];
          d += buffer[i + 3] + buffer[i + 7];
        }
        sink += a + b + c + d;
      });
    }
    for (auto& th : pool) th.join();
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    best = std::max(best, bytes / seconds / 1e9);
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace kestrel;
  std::string path, backend, output = "md";
  int prompt = 64, gen = 32, reps = 3;
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
    else if (a == "-r") reps = integer(1, 1000);
    else if (a == "--backend") backend = value();
    else if (a == "-o") output = value();
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
  auto model = Model::Load(path, ModelOptions{backend});
  if (!model.ok()) {
    std::fprintf(stderr, "kestrel-bench: %s\n", std::string(model.status().message()).c_str());
    return 1;
  }
  const ModelConfig& c = (*model)->config();
  if (prompt + gen > c.context_length) {
    std::fprintf(stderr, "kestrel-bench: -p + -n = %d exceeds the model's context of %d\n", prompt + gen, c.context_length);
    return 1;
  }
  // Bytes of weights streamed per decoded token: every matrix except the embedding table (read one
  // row at a time), which counts once more when it doubles as the LM head.
  uint64_t weight_bytes = 0, params = 0;
  for (const TensorInfo& t : (*model)->file().tensors()) {
    params += static_cast<uint64_t>(t.elements());
    if (t.name != "token_embd.weight" || c.tied_embeddings) weight_bytes += t.bytes;
  }
  std::mt19937 rng(1);
  std::uniform_int_distribution<int32_t> token(0, c.vocab_size - 1);
  std::vector<int32_t> prompt_tokens(static_cast<size_t>(prompt));
  for (auto& t : prompt_tokens) t = token(rng);

  std::vector<Result> results;
  std::vector<double> bandwidth;
  for (int threads : thread_counts) {
    bandwidth.push_back(MeasureReadBandwidth(threads));
    SessionOptions options;
    options.n_threads = threads;
    options.context_length = std::max(prompt + gen, 1);
    auto session = Session::Create(**model, options);
    if (!session.ok()) {
      std::fprintf(stderr, "kestrel-bench: %s\n", std::string(session.status().message()).c_str());
      return 1;
    }
    Session& s = **session;
    std::vector<double> pp, tg;
    // One untimed warm-up run pages the weights in.
    for (int rep = -1; rep < reps; ++rep) {
      if (prompt > 0) {
        s.Reset();
        const auto start = Clock::now();
        if (auto st = s.Eval(prompt_tokens.data(), prompt_tokens.size()); !st.ok()) {
          std::fprintf(stderr, "kestrel-bench: %s\n", std::string(st.message()).c_str());
          return 1;
        }
        if (rep >= 0) pp.push_back(prompt / std::chrono::duration<double>(Clock::now() - start).count());
      }
      if (gen > 0) {
        s.Reset();
        int32_t next = prompt_tokens.empty() ? 1 : prompt_tokens[0];
        const auto start = Clock::now();
        for (int i = 0; i < gen; ++i) {
          if (auto st = s.Eval(&next, 1, true); !st.ok()) {
            std::fprintf(stderr, "kestrel-bench: %s\n", std::string(st.message()).c_str());
            return 1;
          }
          next = static_cast<int32_t>(std::max_element(s.logits(), s.logits() + c.vocab_size) - s.logits());
        }
        if (rep >= 0) tg.push_back(gen / std::chrono::duration<double>(Clock::now() - start).count());
      }
    }
    // Measured again after the timed runs and the better figure kept: on a shared machine a slow
    // moment would otherwise flatter the decode's fraction of the limit.
    bandwidth.back() = std::max(bandwidth.back(), MeasureReadBandwidth(threads));
    if (prompt > 0) results.push_back({"pp" + std::to_string(prompt), threads, Mean(pp), Stddev(pp)});
    if (gen > 0) results.push_back({"tg" + std::to_string(gen), threads, Mean(tg), Stddev(tg)});
  }

  const std::string name = c.name.empty() ? ArchitectureName(c.architecture) : c.name;
  const double size_gib = static_cast<double>((*model)->file().file_bytes()) / (1ull << 30);
  auto bandwidth_for = [&](int threads) {
    for (size_t i = 0; i < thread_counts.size(); ++i) {
      if (thread_counts[i] == threads) return bandwidth[i];
    }
    return 0.0;
  };
  if (output == "json") {
    std::printf("[\n");
    for (size_t i = 0; i < results.size(); ++i) {
      const Result& r = results[i];
      const bool decode = r.test.rfind("tg", 0) == 0;
      const double bw = bandwidth_for(r.threads);
      std::printf("  {\"model\": \"%s\", \"size_bytes\": %llu, \"params\": %llu, \"backend\": \"%s\", \"threads\": %d, "
                  "\"test\": \"%s\", \"tokens_per_second\": %.3f, \"stddev\": %.3f, \"read_bandwidth_gbps\": %.2f",
                  name.c_str(), static_cast<unsigned long long>((*model)->file().file_bytes()),
                  static_cast<unsigned long long>(params), (*model)->backend().name, r.threads, r.test.c_str(), r.mean,
                  r.stddev, bw);
      if (decode) {
        std::printf(", \"bandwidth_limit_tokens_per_second\": %.3f, \"bandwidth_fraction\": %.3f",
                    bw * 1e9 / weight_bytes, r.mean * weight_bytes / (bw * 1e9));
      }
      std::printf("}%s\n", i + 1 < results.size() ? "," : "");
    }
    std::printf("]\n");
  } else {
    std::printf("| model | size | params | backend | threads | test | t/s | bandwidth | of limit |\n");
    std::printf("| --- | ---: | ---: | --- | ---: | --- | ---: | ---: | ---: |\n");
    for (const Result& r : results) {
      const bool decode = r.test.rfind("tg", 0) == 0;
      const double bw = bandwidth_for(r.threads);
      char fraction[32] = "";
      if (decode) std::snprintf(fraction, sizeof(fraction), "%.0f%%", 100.0 * r.mean * weight_bytes / (bw * 1e9));
      std::printf("| %s | %.2f GiB | %.2f B | %s | %d | %s | %.2f ± %.2f | %.1f GB/s | %s |\n", name.c_str(), size_gib,
                  params / 1e9, (*model)->backend().name, r.threads, r.test.c_str(), r.mean, r.stddev, bw, fraction);
    }
  }
  return 0;
}
