// Decoding a token must not touch the heap: all buffers belong to the session. This binary
// replaces the global operator new to count allocations while the decoder runs.
#include <catch2/catch.hpp>

#include <atomic>
#include <cstdlib>
#include <new>

#include "convert/converter.h"
#include "convert/source_model.h"
#include "decoder/generator.h"
#include "decoder/model.h"
#include "decoder/session.h"
#include "test_support.h"

namespace {
std::atomic<bool> g_counting{false};
std::atomic<long> g_allocations{0};
}  // namespace

void* operator new(std::size_t size) {
  if (g_counting.load(std::memory_order_relaxed)) g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }

namespace kestrel {
namespace {

TEST_CASE("decoding tokens allocates nothing once a session exists", "[decoder][allocation]") {
  const std::string bin = testing::SharedPath("models/stories260K/stories260K.bin");
  const std::string tok = testing::SharedPath("models/stories260K/tok512.bin");
  if (bin.empty() || tok.empty()) {
    if (std::getenv("KESTREL_ALLOW_MISSING_SHARED") == nullptr) FAIL("../shared absent");
    WARN("SKIPPED: ../shared absent");
    return;
  }
  auto source = convert::LoadLlama2C(bin, tok);
  REQUIRE(source.ok());
  for (DType type : {DType::kF32, DType::kQ8_0, DType::kQ4_0}) {
    const std::string path = testing::TempPath(std::string("alloc-") + DTypeName(type) + ".vqf");
    convert::ConvertOptions options;
    options.type = type;
    REQUIRE(convert::ConvertModel(*source, path, options, nullptr).ok());
    auto model = Model::Load(path, ModelOptions{});
    REQUIRE(model.ok());
    for (int threads : {1, 2}) {
      SessionOptions so;
      so.n_threads = threads;
      so.kv_dtype = threads == 2 ? DType::kF16 : DType::kF32;
      auto session = Session::Create(**model, so);
      REQUIRE(session.ok());
      Generator generator((*model)->config().vocab_size);
      std::vector<int32_t> history = {1, 403, 407};
      history.reserve(static_cast<size_t>((*session)->context_length()));
      REQUIRE((*session)->Eval(history.data(), history.size()).ok());
      GenerateOptions go;
      go.sampling.temperature = 0.7f;
      go.sampling.seed = 3;
      go.max_tokens = 8;
      go.stop_strings = {"zzz"};
      auto warm = generator.Run(**session, go, &history, nullptr, nullptr);  // sizes every buffer
      REQUIRE(warm.ok());
      int32_t token = history.back();
      g_allocations = 0;
      g_counting = true;
      bool ok = true;
      for (int i = 0; i < 20 && ok; ++i) ok = (*session)->Eval(&token, 1, true).ok();
      auto more = generator.Run(**session, go, &history, nullptr, nullptr);
      g_counting = false;
      REQUIRE(ok);
      REQUIRE(more.ok());
      INFO(DTypeName(type) << " threads " << threads);
      REQUIRE(g_allocations.load() == 0);
    }
  }
}

}  // namespace
}  // namespace kestrel
