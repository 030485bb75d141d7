// Unit tests of the decoder's parts: the llama2.c tokenizer, UTF-8 holding, the sampler, the
// thread pool and the registry.
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <set>
#include <thread>
#include <vector>

#include "backend/registry.h"
#include "convert/converter.h"
#include "convert/source_model.h"
#include "decoder/model.h"
#include "decoder/row_scheduler.h"
#include "decoder/sampler.h"
#include "decoder/thread_pool.h"
#include "format/vqf_reader.h"
#include "format/vqf_writer.h"
#include "test_support.h"
#include "tokenizer/tokenizer.h"

namespace kestrel {
namespace {

std::unique_ptr<Tokenizer> StoriesTokenizer() {
  const std::string bin = testing::SharedPath("models/stories260K/stories260K.bin");
  const std::string tok = testing::SharedPath("models/stories260K/tok512.bin");
  if (bin.empty() || tok.empty()) return nullptr;
  auto model = convert::LoadLlama2C(bin, tok);
  REQUIRE(model.ok());
  auto t = Tokenizer::Create(model->tokenizer);
  REQUIRE(t.ok());
  return std::move(*t);
}

#define REQUIRE_SHARED(ptr)                                                               \
  if (!(ptr)) {                                                                           \
    if (std::getenv("KESTREL_ALLOW_MISSING_SHARED") == nullptr) FAIL("../shared absent"); \
    WARN("SKIPPED: ../shared absent");                                                    \
    return;                                                                               \
  }

TEST_CASE("llama2.c tokenizer encodes as run.c does", "[tokenizer]") {
  auto t = StoriesTokenizer();
  REQUIRE_SHARED(t);
  auto ids = t->Encode("Once upon a time", EncodeOptions{});
  REQUIRE(ids.ok());
  REQUIRE(*ids == std::vector<int32_t>{1, 403, 407, 261, 378});
  auto empty = t->Encode("", EncodeOptions{});
  REQUIRE(*empty == std::vector<int32_t>{1});
  auto no_bos = t->Encode("Once", EncodeOptions{false, false});
  REQUIRE(no_bos->size() >= 1);
  REQUIRE(no_bos->front() != 1);
  // Characters missing from the vocabulary fall back to byte tokens (<0xXX> = 3 + byte).
  auto emoji = t->Encode("\xF0\x9F\x98\x80", EncodeOptions{false, false});
  REQUIRE(emoji.ok());
  std::string decoded;
  int32_t prev = -1;
  for (int32_t id : *emoji) {
    t->AppendPiece(prev, id, &decoded);
    prev = id;
  }
  REQUIRE(decoded == " \xF0\x9F\x98\x80");  // the dummy-prefix space, then the exact bytes
  // Invalid UTF-8 is encoded byte by byte, never crashes.
  auto invalid = t->Encode(std::string("\xff\xfe\x80", 3), EncodeOptions{});
  REQUIRE(invalid.ok());
}

TEST_CASE("llama2.c pieces: leading space dropped after BOS, byte tokens decoded", "[tokenizer]") {
  auto t = StoriesTokenizer();
  REQUIRE_SHARED(t);
  std::string s;
  t->AppendPiece(1, 403, &s);
  REQUIRE(s == "Once");
  s.clear();
  t->AppendPiece(403, 403, &s);
  REQUIRE(s == " Once");
  s.clear();
  t->AppendPiece(1, 3 + '\n', &s);
  REQUIRE(s == "\n");
  REQUIRE(t->IsEndOfGeneration(1));
  REQUIRE_FALSE(t->IsEndOfGeneration(2));  // run.c stops on BOS only
}

TEST_CASE("CompleteUtf8Prefix holds back only incomplete characters", "[tokenizer]") {
  REQUIRE(CompleteUtf8Prefix("abc") == 3);
  REQUIRE(CompleteUtf8Prefix("") == 0);
  REQUIRE(CompleteUtf8Prefix("a\xC3") == 1);
  REQUIRE(CompleteUtf8Prefix("a\xC3\xA9") == 3);
  REQUIRE(CompleteUtf8Prefix("\xF0\x9F\x98") == 0);
  REQUIRE(CompleteUtf8Prefix("\xF0\x9F\x98\x80") == 4);
  REQUIRE(CompleteUtf8Prefix("x\xE2\x82") == 1);
  REQUIRE(CompleteUtf8Prefix("\x80\x80\x80\x80") == 4);  // stray continuation bytes are not held forever
}

TEST_CASE("sampler validates its configuration", "[sampler]") {
  SamplingConfig ok;
  REQUIRE(ValidateSamplingConfig(ok).ok());
  auto bad = [](auto mutate) {
    SamplingConfig c;
    mutate(c);
    return !ValidateSamplingConfig(c).ok();
  };
  REQUIRE(bad([](SamplingConfig& c) { c.temperature = -1; }));
  REQUIRE(bad([](SamplingConfig& c) { c.temperature = NAN; }));
  REQUIRE(bad([](SamplingConfig& c) { c.top_k = -1; }));
  REQUIRE(bad([](SamplingConfig& c) { c.top_p = 0; }));
  REQUIRE(bad([](SamplingConfig& c) { c.top_p = 1.5f; }));
  REQUIRE(bad([](SamplingConfig& c) { c.min_p = -0.1f; }));
  REQUIRE(bad([](SamplingConfig& c) { c.repeat_penalty = 0; }));
  REQUIRE(bad([](SamplingConfig& c) { c.repeat_last_n = -2; }));
}

TEST_CASE("sampler: greedy, penalties, seeds and truncation", "[sampler]") {
  const int32_t vocab = 6;
  Sampler s(vocab);
  SamplingConfig greedy;
  greedy.temperature = 0;
  s.Reset(greedy);
  std::vector<float> logits = {0.1f, 3.0f, 2.9f, -1.0f, 0.0f, 2.0f};
  auto l = logits;
  REQUIRE(s.Sample(l.data(), nullptr, 0) == 1);
  // A repeat penalty on token 1 makes token 2 win.
  greedy.repeat_penalty = 1.5f;
  s.Reset(greedy);
  l = logits;
  const int32_t history[] = {1};
  REQUIRE(s.Sample(l.data(), history, 1) == 2);
  REQUIRE(l[1] == Approx(2.0f));
  // Presence and frequency penalties subtract.
  greedy.repeat_penalty = 1.0f;
  greedy.presence_penalty = 0.5f;
  greedy.frequency_penalty = 0.25f;
  s.Reset(greedy);
  l = logits;
  const int32_t twice[] = {2, 2};
  s.Sample(l.data(), twice, 2);
  REQUIRE(l[2] == Approx(2.9f - 0.5f - 0.5f));
  // top_k = 1 is greedy whatever the temperature.
  SamplingConfig topk;
  topk.temperature = 5.0f;
  topk.top_k = 1;
  s.Reset(topk);
  for (int i = 0; i < 20; ++i) {
    l = logits;
    REQUIRE(s.Sample(l.data(), nullptr, 0) == 1);
  }
  // Same seed, same draws; the draws cover more than one token at a high temperature.
  SamplingConfig hot;
  hot.temperature = 2.0f;
  hot.top_k = 0;
  hot.top_p = 1.0f;
  hot.min_p = 0.0f;
  hot.seed = 1234;
  std::vector<int32_t> a, b;
  s.Reset(hot);
  for (int i = 0; i < 200; ++i) {
    l = logits;
    a.push_back(s.Sample(l.data(), nullptr, 0));
  }
  s.Reset(hot);
  for (int i = 0; i < 200; ++i) {
    l = logits;
    b.push_back(s.Sample(l.data(), nullptr, 0));
  }
  REQUIRE(a == b);
  REQUIRE(std::set<int32_t>(a.begin(), a.end()).size() >= 4);
  // min_p = 1 keeps only the most likely token.
  hot.min_p = 1.0f;
  s.Reset(hot);
  for (int i = 0; i < 20; ++i) {
    l = logits;
    REQUIRE(s.Sample(l.data(), nullptr, 0) == 1);
  }
  // top_p tiny keeps only the most likely token.
  hot.min_p = 0.0f;
  hot.top_p = 0.01f;
  s.Reset(hot);
  for (int i = 0; i < 20; ++i) {
    l = logits;
    REQUIRE(s.Sample(l.data(), nullptr, 0) == 1);
  }
}

TEST_CASE("thread pool runs every index once per job, many times", "[threads]") {
  for (int n : {1, 2, 3, 8}) {
    ThreadPool pool(n);
    REQUIRE(pool.size() == n);
    for (int job = 0; job < 200; ++job) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      std::atomic<int> wrong_parts{0};  // Catch2 assertions are not thread-safe: check afterwards
      pool.Run([&](int i, int parts) {
        if (parts != n) wrong_parts++;
        hits[static_cast<size_t>(i)]++;
      });
      REQUIRE(wrong_parts.load() == 0);
      for (auto& h : hits) REQUIRE(h.load() == 1);
    }
  }
}

TEST_CASE("thread pool: idle workers stop spinning and go to sleep, and wake for the next job", "[threads]") {
  for (int n : {2, 3}) {
    ThreadPool pool(n);
    for (int round = 0; round < 3; ++round) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      pool.Run([&](int i, int) { hits[static_cast<size_t>(i)]++; });
      for (auto& h : hits) REQUIRE(h.load() == 1);
      // The idle spin is 200 us; allow a loaded machine 2 s to put every worker to sleep.
      const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(2);
      while (pool.sleeping_workers() < n - 1 && std::chrono::steady_clock::now() < give_up) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
      REQUIRE(pool.sleeping_workers() == n - 1);
    }
  }
}

TEST_CASE("thread pool: jobs dispatched just as workers go to sleep are not lost", "[threads]") {
  // The dispatch bumps the generation without a lock and wakes sleepers only when it sees one: a
  // worker that counts itself asleep and then checks the generation, against a dispatch that bumps
  // it and then checks the count. Jobs arriving around the 200 us idle spin hit that window; a lost
  // wake-up would hang Run, so a watchdog ends the process with a message instead.
  std::atomic<bool> finished{false};
  std::thread watchdog([&] {
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (!finished.load() && std::chrono::steady_clock::now() < give_up) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (!finished.load()) {
      std::fprintf(stderr, "thread pool: a job was never picked up (lost wake-up)\n");
      std::_Exit(1);
    }
  });
  ThreadPool pool(3);
  std::atomic<int> ran{0};
  for (int job = 0; job < 1500; ++job) {
    // 150 .. 250 us apart, in 5 us steps: around the workers' 200 us spin.
    std::this_thread::sleep_for(std::chrono::microseconds(150 + (job * 37) % 21 * 5));
    pool.Run([&](int, int) { ran++; });
  }
  finished = true;
  watchdog.join();
  CHECK(ran.load() == 1500 * 3);
}

TEST_CASE("thread pool: idle work runs between jobs and gives way to the next job", "[threads]") {
  // Per-thread step counts; a step that never runs out of work must still let every job through
  // (a worker checks for a new job between steps), and steps run on the workers after each job and
  // on the caller while it waits for a slow worker.
  struct Idle {
    std::atomic<int64_t> steps[3];
    std::atomic<int> limit{-1};  // steps a thread takes before it has no more (-1: endless)
    static bool Step(void* self, int thread) {
      auto* idle = static_cast<Idle*>(self);
      const int64_t done = ++idle->steps[thread];
      const int limit = idle->limit.load();
      return limit < 0 || done < limit;
    }
  } idle;
  for (auto& s : idle.steps) s = 0;
  ThreadPool pool(3);
  pool.SetIdleWork(&Idle::Step, &idle);
  std::atomic<int> ran{0};
  for (int job = 0; job < 500; ++job) pool.Run([&](int, int) { ran++; });
  CHECK(ran.load() == 500 * 3);
  const auto wait_for = [](auto done) {
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (!done() && std::chrono::steady_clock::now() < give_up) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return done();
  };
  CHECK(wait_for([&] { return idle.steps[1].load() > 0 && idle.steps[2].load() > 0; }));
  // The caller steps while a worker is still busy.
  const int64_t caller_before = idle.steps[0].load();
  pool.Run([&](int i, int) {
    if (i == 2) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  });
  CHECK(idle.steps[0].load() > caller_before);
  // Work that runs out: after a job each worker takes steps until the last one says none is left.
  idle.limit = 0;
  pool.Run([&](int, int) {});  // the endless steps end: every count now passes the limit
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // each worker's one step after the job
  for (auto& s : idle.steps) s = 0;
  idle.limit = 40;
  pool.Run([&](int, int) {});
  CHECK(wait_for([&] { return idle.steps[1].load() == 40 && idle.steps[2].load() == 40; }));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  CHECK(idle.steps[1].load() == 40);  // and then no more
  CHECK(idle.steps[2].load() == 40);
}

TEST_CASE("RowScheduler: every row once, owners first, thieves from the back", "[threads]") {
  RowScheduler rows(8);
  SECTION("one thread drains every share: its own from the front, the others' from the back") {
    // Shares of 33, 33 and 34 rows: chunks of 5 rows (per_part 7), and those that start in a share's
    // last quarter (8 rows) of 2.
    rows.Plan(100, 3, 7);
    std::vector<int64_t> begins;
    RowScheduler::Chunk c{};
    while (rows.Next(1, &c)) {
      REQUIRE(c.matrix == 0);
      begins.push_back(c.begin);
    }
    const std::vector<int64_t> expected = {33, 38, 43, 48, 53, 58, 60, 62, 64,  // share 1, in order
                                           98, 96, 91, 86, 81, 76, 71, 66,      // share 2, from the back
                                           31, 29, 27, 25, 20, 15, 10, 5,  0};  // share 0, from the back
    REQUIRE(begins == expected);
  }
  SECTION("each share ends in chunks a quarter as long") {
    rows.Plan(4096, 2, 8, 16);  // shares of 2048 rows: chunks of 256, then of 64 from row 1536 on
    RowScheduler::Chunk c{};
    std::vector<int64_t> sizes;
    while (rows.Next(0, &c)) {
      if (c.begin >= 2048) break;
      sizes.push_back(c.end - c.begin);
    }
    const std::vector<int64_t> expected = {256, 256, 256, 256, 256, 256, 64, 64, 64, 64, 64, 64, 64, 64};
    REQUIRE(sizes == expected);
  }
  SECTION("several matrices: chunks stay inside one, on its alignment, and cover every row once") {
    for (int n_threads : {1, 2, 3, 8}) {
      for (const std::vector<int64_t>& sizes :
           std::vector<std::vector<int64_t>>{{2048, 1024, 1024}, {6144, 6144}, {16, 0, 48}, {0}, {1, 17}, {151936}}) {
        for (int64_t a : {1, 16, 32}) {
          const std::vector<int64_t> aligns(sizes.size(), a);
          rows.Plan(sizes.data(), aligns.data(), static_cast<int>(sizes.size()), n_threads, 8);
          std::vector<std::vector<int>> hits(sizes.size());
          for (size_t m = 0; m < sizes.size(); ++m) hits[m].assign(static_cast<size_t>(sizes[m]), 0);
          RowScheduler::Chunk c{};
          for (int part = 0; part < n_threads; ++part) {
            while (rows.Next(part, &c)) {
              REQUIRE(c.matrix >= 0);
              REQUIRE(c.matrix < static_cast<int>(sizes.size()));
              REQUIRE(c.begin < c.end);
              REQUIRE(c.end <= sizes[static_cast<size_t>(c.matrix)]);
              REQUIRE(c.begin % a == 0);
              REQUIRE((c.end % a == 0 || c.end == sizes[static_cast<size_t>(c.matrix)]));
              for (int64_t r = c.begin; r < c.end; ++r) hits[static_cast<size_t>(c.matrix)][static_cast<size_t>(r)]++;
            }
          }
          for (const auto& m : hits) {
            for (int h : m) REQUIRE(h == 1);
          }
        }
      }
    }
  }
  SECTION("threads of a pool cover [0, n) exactly once") {
    for (int n_threads : {1, 2, 3, 8}) {
      ThreadPool pool(n_threads);
      for (int64_t n : {0, 1, 15, 16, 17, 1000, 4099}) {
        for (int64_t align : {1, 16, 64}) {
          rows.Plan(n, n_threads, 8, align);
          std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
          std::atomic<int> misaligned{0};
          pool.Run([&](int i, int) {
            RowScheduler::Chunk c{};
            while (rows.Next(i, &c)) {
              if (c.begin % align != 0 || c.end <= c.begin || c.end > n) misaligned++;
              for (int64_t r = c.begin; r < c.end; ++r) hits[static_cast<size_t>(r)]++;
            }
          });
          REQUIRE(misaligned.load() == 0);
          for (auto& h : hits) REQUIRE(h.load() == 1);
        }
      }
    }
  }
  SECTION("a thread that starts late has its share taken by the others") {
    ThreadPool pool(2);
    rows.Plan(64, 2, 8);  // shares of 32 rows
    std::atomic<int> late_rows{0}, stolen_rows{0};
    pool.Run([&](int i, int) {
      if (i == 1) std::this_thread::sleep_for(std::chrono::milliseconds(100));
      RowScheduler::Chunk c{};
      while (rows.Next(i, &c)) {
        if (i == 1) late_rows += static_cast<int>(c.end - c.begin);
        if (i == 0 && c.begin >= 32) stolen_rows += static_cast<int>(c.end - c.begin);
      }
    });
    REQUIRE(late_rows.load() == 0);
    REQUIRE(stolen_rows.load() == 32);
  }
}

TEST_CASE("registry: auto picks a usable backend, unknown names are refused", "[registry]") {
  auto best = SelectBackend("");
  REQUIRE(best.ok());
  REQUIRE((*best)->cpu_supports());
  auto generic = SelectBackend("generic");
  REQUIRE(generic.ok());
  REQUIRE(std::string((*generic)->name) == "generic");
  auto unknown = SelectBackend("nope");
  REQUIRE_FALSE(unknown.ok());
  REQUIRE(std::string(unknown.status().message()).find("unknown backend 'nope'") != std::string::npos);
}

}  // namespace
}  // namespace kestrel

namespace kestrel {
namespace {

// Rewrites `source` without the tensor `drop` (and with `reshape` given new dims when named).
std::string RewriteModel(const std::string& source, const std::string& drop, const std::string& out_name) {
  auto file = VqfFile::Open(source);
  REQUIRE(file.ok());
  std::vector<TensorPlan> plans;
  std::vector<const TensorInfo*> kept;
  for (const TensorInfo& t : (*file)->tensors()) {
    if (t.name == drop) continue;
    plans.push_back(TensorPlan{t.name, t.dtype, t.layout, t.dims});
    kept.push_back(&t);
  }
  const std::string out = testing::TempPath(out_name);
  auto writer = VqfWriter::Create(out, (*file)->metadata(), plans);
  REQUIRE(writer.ok());
  for (size_t i = 0; i < kept.size(); ++i) REQUIRE((*writer)->WriteTensor(i, kept[i]->data, kept[i]->bytes).ok());
  REQUIRE((*writer)->Finish().ok());
  return out;
}

TEST_CASE("a model file lacking a tensor is refused as a bad file, naming the tensor", "[model]") {
  const std::string bin = testing::SharedPath("models/stories260K/stories260K.bin");
  const std::string tok = testing::SharedPath("models/stories260K/tok512.bin");
  REQUIRE_SHARED(!bin.empty() && !tok.empty());
  auto source = convert::LoadLlama2C(bin, tok);
  REQUIRE(source.ok());
  const std::string path = testing::TempPath("decoder-stories.vqf");
  REQUIRE(convert::ConvertModel(*source, path, convert::ConvertOptions{}, nullptr).ok());
  REQUIRE(Model::Load(path, ModelOptions{}).ok());
  const std::string broken = RewriteModel(path, "blk.3.ffn_up.weight", "decoder-missing.vqf");
  auto model = Model::Load(broken, ModelOptions{});
  REQUIRE_FALSE(model.ok());
  REQUIRE(model.status().code() == absl::StatusCode::kDataLoss);
  REQUIRE(std::string(model.status().message()).find("blk.3.ffn_up.weight") != std::string::npos);
  // A backend named explicitly that does not exist is refused before the file is read.
  auto unknown = Model::Load(path, ModelOptions{"nope"});
  REQUIRE_FALSE(unknown.ok());
}

}  // namespace
}  // namespace kestrel
