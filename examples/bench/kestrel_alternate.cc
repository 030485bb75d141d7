// kestrel-alternate: two model files timed in turn inside one process, the same test on each,
// round after round, with their per-round speed ratio. On a shared machine the speed of one
// process moves by +-10% from one minute to the next, so separate runs of each file compare
// moments as much as files; alternating in one process puts both under the same conditions and the
// per-round ratio cancels what drifts slowly. What it cannot cancel is where each file's weights
// landed in memory: on the Zen 5, at times, the same file loaded second (-b) decoded 8-10% faster
// than loaded first (bench/README.md, seventh session), so compare files with both orders, -a X -b Y
// and -a Y -b X, and take the square root of the ratio of the two medians.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "kestrel/kestrel.h"

namespace {

using Clock = std::chrono::steady_clock;

[[noreturn]] void Fail(const std::string& message) {
  std::fprintf(stderr, "kestrel-alternate: %s\n", message.c_str());
  std::exit(1);
}

void Usage() {
  std::fprintf(stderr,
               "usage: kestrel-alternate -a A.vqf -b B.vqf [-p 64 | -n 32] [-t 1] [-r 8] [--backend NAME]\n"
               "                         [--env-a NAME=VALUE] [--env-b NAME=VALUE]\n"
               "  times prefill of -p tokens, or decode of -n tokens after one, on A and B in turn\n"
               "  (order swapped every round, one untimed round first) and prints each file's median\n"
               "  tokens/s and the median, quartiles and range of the per-round ratio B/A; run it\n"
               "  again with -a and -b swapped (the order of loading can matter, bench/README.md)\n"
               "  --env-a/--env-b set an environment variable while that side's model and session are\n"
               "  made (Kestrel reads its KESTREL_* measurement settings then), so one file can be timed\n"
               "  against itself under two settings\n");
}

struct Side {
  std::string path;
  std::string env;  // NAME=VALUE, set while this side is made
  kestrel_model* model = nullptr;
  kestrel_session* session = nullptr;
  std::vector<double> rates;
};

void Check(kestrel_status status, const std::string& what) {
  if (status != KESTREL_OK) Fail(what + ": " + kestrel_last_error());
}

// Tokens per second of one timed run on `side`.
double RunOnce(Side& side, const std::vector<int32_t>& tokens, bool decode) {
  Check(kestrel_session_reset(side.session), side.path);
  if (!decode) {
    const auto start = Clock::now();
    Check(kestrel_session_eval(side.session, tokens.data(), tokens.size()), side.path);
    return tokens.size() / std::chrono::duration<double>(Clock::now() - start).count();
  }
  Check(kestrel_session_eval(side.session, tokens.data(), 1), side.path);  // a first position, untimed
  const auto start = Clock::now();
  for (size_t i = 1; i < tokens.size(); ++i) Check(kestrel_session_eval(side.session, &tokens[i], 1), side.path);
  return (tokens.size() - 1) / std::chrono::duration<double>(Clock::now() - start).count();
}

double Quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  const double at = q * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(at);
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (at - static_cast<double>(lo));
}

int ParseCount(const char* flag, const char* text, int low, int high) {
  char* end = nullptr;
  const long v = std::strtol(text, &end, 10);
  if (end == text || *end != '\0' || v < low || v > high) {
    Fail(std::string(flag) + " takes a whole number from " + std::to_string(low) + " to " + std::to_string(high) +
         ", got '" + text + "'");
  }
  return static_cast<int>(v);
}

}  // namespace

int main(int argc, char** argv) {
  Side sides[2];
  int prompt = 0, gen = 0, threads = 1, rounds = 8;
  const char* backend = nullptr;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      Usage();
      return 0;
    }
    if (i + 1 >= argc) {
      Usage();
      Fail("missing value after " + a);
    }
    const char* v = argv[++i];
    if (a == "-a")
      sides[0].path = v;
    else if (a == "-b")
      sides[1].path = v;
    else if (a == "-p")
      prompt = ParseCount("-p", v, 1, 1 << 16);
    else if (a == "-n")
      gen = ParseCount("-n", v, 1, 1 << 16);
    else if (a == "-t")
      threads = ParseCount("-t", v, 1, 256);
    else if (a == "-r")
      rounds = ParseCount("-r", v, 1, 10000);
    else if (a == "--backend")
      backend = v;
    else if (a == "--env-a" || a == "--env-b") {
      const std::string setting = v;
      const size_t eq = setting.find('=');
      if (eq == std::string::npos || eq == 0) Fail(a + " takes NAME=VALUE, got '" + setting + "'");
      sides[a == "--env-a" ? 0 : 1].env = setting;
    } else {
      Usage();
      Fail("unknown option " + a);
    }
  }
  if (sides[0].path.empty() || sides[1].path.empty()) {
    Usage();
    Fail("both -a and -b are needed");
  }
  if ((prompt > 0) == (gen > 0)) {
    Usage();
    Fail("give exactly one of -p (prefill) and -n (decode)");
  }
  const bool decode = gen > 0;
  const int length = decode ? gen + 1 : prompt;

  std::vector<int32_t> tokens;
  for (Side& side : sides) {
    // The setting, if any, for the time this side is made; what was there before comes back after.
    std::string name, before;
    bool had_before = false;
    if (!side.env.empty()) {
      name = side.env.substr(0, side.env.find('='));
      if (const char* old = std::getenv(name.c_str())) {
        before = old;
        had_before = true;
      }
      setenv(name.c_str(), side.env.substr(name.size() + 1).c_str(), 1);
    }
    kestrel_model_params mp;
    kestrel_model_params_init(&mp);
    mp.backend = backend;
    Check(kestrel_model_load(side.path.c_str(), &mp, &side.model), side.path);
    kestrel_model_info info;
    info.struct_size = sizeof(info);
    Check(kestrel_model_get_info(side.model, &info), side.path);
    if (length > info.context_length) {
      Fail(side.path + ": " + std::to_string(length) + " positions exceed the model's context of " +
           std::to_string(info.context_length));
    }
    if (tokens.empty()) {
      // Any valid ids do: speed does not depend on them. Both files must share a vocabulary size.
      for (int i = 0; i < length; ++i) tokens.push_back(static_cast<int32_t>((i * 7919 + 13) % info.vocab_size));
    }
    for (int32_t t : tokens) {
      if (t >= info.vocab_size) Fail(side.path + ": its vocabulary is smaller than the first file's");
    }
    kestrel_session_params sp;
    kestrel_session_params_init(&sp);
    sp.n_threads = threads;
    sp.context_length = length;
    Check(kestrel_session_create(side.model, &sp, &side.session), side.path);
    if (!side.env.empty()) {
      if (had_before) {
        setenv(name.c_str(), before.c_str(), 1);
      } else {
        unsetenv(name.c_str());
      }
    }
  }

  std::vector<double> ratios;
  for (int round = -1; round < rounds; ++round) {
    double rate[2];
    for (int j = 0; j < 2; ++j) {
      const int s = (round & 1) != 0 ? 1 - j : j;  // A first in even rounds, B first in odd ones
      rate[s] = RunOnce(sides[s], tokens, decode);
    }
    if (round < 0) continue;  // untimed: pages, caches and thread start-up
    for (int s = 0; s < 2; ++s) sides[s].rates.push_back(rate[s]);
    ratios.push_back(rate[1] / rate[0]);
  }

  const std::string test = decode ? "tg" + std::to_string(gen) : "pp" + std::to_string(prompt);
  std::printf("test %s, %d threads, %d rounds\n", test.c_str(), threads, rounds);
  for (int s = 0; s < 2; ++s) {
    const Side& side = sides[s];
    std::printf("%c: %s: median %.2f t/s (%.2f .. %.2f)\n", s == 0 ? 'A' : 'B', side.path.c_str(),
                Quantile(side.rates, 0.5), Quantile(side.rates, 0.0), Quantile(side.rates, 1.0));
  }
  std::printf("B/A per round: median %.3f, quartiles %.3f .. %.3f, range %.3f .. %.3f\n", Quantile(ratios, 0.5),
              Quantile(ratios, 0.25), Quantile(ratios, 0.75), Quantile(ratios, 0.0), Quantile(ratios, 1.0));
  for (Side& side : sides) {
    kestrel_session_free(side.session);
    kestrel_model_free(side.model);
  }
  return 0;
}
