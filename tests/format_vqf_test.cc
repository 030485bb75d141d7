// Tests of the VQF container: writer/reader round trips for every dtype and layout, placement rules
// (64-byte tensors, page-aligned adjacent layers), writer refusals, a corpus of corrupted files that
// the reader must reject with a message naming the problem, and the ModelConfig / TokenizerData
// metadata mappings.
//
// The corpus is built by an assembler written here from docs/vqf.md alone, independent of
// VqfWriter; a test checks that both produce the same bytes, so the document and the code agree.
#include <sys/mman.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "format/dtype.h"
#include "format/layout.h"
#include "format/metadata.h"
#include "format/model_config.h"
#include "format/vqf_reader.h"
#include "format/vqf_spec.h"
#include "format/vqf_writer.h"
#include "platform/huge_page_buffer.h"
#include "platform/read_streams.h"
#include "platform/scratch_arena.h"
#include "test_support.h"

namespace kestrel {
namespace {

using Bytes = std::vector<uint8_t>;

// ---------------------------------------------------------------------------------------------
// A little-endian byte builder and an independent VQF assembler (docs/vqf.md).

struct ByteBuilder {
  std::string s;
  ByteBuilder& U8(uint8_t v) { return Raw(&v, 1); }
  ByteBuilder& U32(uint32_t v) { return Raw(&v, 4); }
  ByteBuilder& I32(int32_t v) { return Raw(&v, 4); }
  ByteBuilder& U64(uint64_t v) { return Raw(&v, 8); }
  ByteBuilder& F32(float v) { return Raw(&v, 4); }
  ByteBuilder& Str32(const std::string& v) { U32(static_cast<uint32_t>(v.size())); return Raw(v.data(), v.size()); }
  ByteBuilder& Str64(const std::string& v) { U64(v.size()); return Raw(v.data(), v.size()); }
  ByteBuilder& Raw(const void* p, size_t n) {
    s.append(static_cast<const char*>(p), n);
    return *this;
  }
};

// Metadata value tags from the spec.
constexpr uint32_t kTagU32 = 0, kTagI32 = 1, kTagF32 = 2, kTagU64 = 3, kTagBool = 4, kTagString = 5, kTagArray = 6;

// Serializes metadata by the spec: u64 count, then per entry (sorted by key here, as the writer
// does) a u32-length key, a u32 tag and the value.
std::string SpecMetadataSection(const Metadata& m) {
  ByteBuilder b;
  b.U64(m.entries().size());
  for (const auto& [key, value] : m.entries()) {
    b.Str32(key);
    if (auto* v = std::get_if<uint32_t>(&value)) b.U32(kTagU32).U32(*v);
    else if (auto* v = std::get_if<int32_t>(&value)) b.U32(kTagI32).I32(*v);
    else if (auto* v = std::get_if<float>(&value)) b.U32(kTagF32).F32(*v);
    else if (auto* v = std::get_if<uint64_t>(&value)) b.U32(kTagU64).U64(*v);
    else if (auto* v = std::get_if<bool>(&value)) b.U32(kTagBool).U8(*v ? 1 : 0);
    else if (auto* v = std::get_if<std::string>(&value)) b.U32(kTagString).Str64(*v);
    else if (auto* v = std::get_if<std::vector<uint32_t>>(&value)) {
      b.U32(kTagArray).U32(kTagU32).U64(v->size());
      for (auto x : *v) b.U32(x);
    } else if (auto* v = std::get_if<std::vector<int32_t>>(&value)) {
      b.U32(kTagArray).U32(kTagI32).U64(v->size());
      for (auto x : *v) b.I32(x);
    } else if (auto* v = std::get_if<std::vector<float>>(&value)) {
      b.U32(kTagArray).U32(kTagF32).U64(v->size());
      for (auto x : *v) b.F32(x);
    } else if (auto* v = std::get_if<std::vector<uint64_t>>(&value)) {
      b.U32(kTagArray).U32(kTagU64).U64(v->size());
      for (auto x : *v) b.U64(x);
    } else if (auto* v = std::get_if<std::vector<std::string>>(&value)) {
      b.U32(kTagArray).U32(kTagString).U64(v->size());
      for (const auto& x : *v) b.Str64(x);
    }
  }
  return b.s;
}

struct RawTensor {
  std::string name;
  uint32_t dtype = 0;
  uint32_t layout = 0;
  std::vector<uint64_t> dims;
  uint64_t offset = 0;
  uint64_t bytes = 0;
  Bytes data;  // written at `offset` when it fits in the file
};

struct RawFile {
  uint32_t layout_flags = 1;
  std::string metadata;  // the whole metadata section
  std::vector<RawTensor> tensors;
  uint64_t file_size = 0;  // 0: where the last tensor ends
};

std::string SpecDirectorySection(const std::vector<RawTensor>& tensors) {
  ByteBuilder b;
  b.U64(tensors.size());
  for (const auto& t : tensors) {
    b.Str32(t.name).U32(t.dtype).U32(t.layout).U32(static_cast<uint32_t>(t.dims.size()));
    for (uint64_t d : t.dims) b.U64(d);
    b.U64(t.offset).U64(t.bytes);
  }
  return b.s;
}

uint64_t AlignUp(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

// The placement rule: tensors in directory order, each on a 64-byte boundary, and on a 4096-byte
// boundary whenever the "blk.N" layer changes (entering a layer, or leaving one).
void PlaceTensors(RawFile* f) {
  uint64_t pos = vqf::kHeaderBytes + f->metadata.size() + SpecDirectorySection(f->tensors).size();
  int previous = -1;
  for (auto& t : f->tensors) {
    const int layer = LayerFromTensorName(t.name);
    const bool new_page = layer != previous && (layer >= 0 || previous >= 0);
    pos = AlignUp(pos, new_page ? vqf::kLayerAlignment : vqf::kTensorAlignment);
    t.offset = pos;
    pos += t.bytes;
    previous = layer;
  }
}

// Header at 0, metadata at 64, directory right after, tensor data at the stated offsets, zero
// padding. The file ends where the last tensor that fits ends (or at the directory).
Bytes Assemble(const RawFile& f) {
  const std::string dir = SpecDirectorySection(f.tensors);
  const uint64_t meta_off = vqf::kHeaderBytes, dir_off = meta_off + f.metadata.size();
  uint64_t size = f.file_size;
  if (size == 0) {
    size = dir_off + dir.size();
    for (const auto& t : f.tensors) size = std::max<uint64_t>(size, t.offset + t.data.size());
  }
  Bytes out(size, 0);
  // Data first, so a tensor placed over the sections cannot clobber them.
  for (const auto& t : f.tensors) {
    if (t.offset < size && t.data.size() <= size - t.offset) {
      std::copy(t.data.begin(), t.data.end(), out.begin() + static_cast<std::ptrdiff_t>(t.offset));
    }
  }
  std::memcpy(out.data(), "KESTRVQF", 8);
  auto put32 = [&](uint64_t at, uint32_t v) { std::memcpy(out.data() + at, &v, 4); };
  auto put64 = [&](uint64_t at, uint64_t v) { std::memcpy(out.data() + at, &v, 8); };
  put32(8, 1);
  put32(12, 0);
  put32(16, 64);
  put32(20, f.layout_flags);
  put64(24, size);
  put64(32, meta_off);
  put64(40, f.metadata.size());
  put64(48, dir_off);
  put64(56, dir.size());
  std::memcpy(out.data() + meta_off, f.metadata.data(), f.metadata.size());
  std::memcpy(out.data() + dir_off, dir.data(), dir.size());
  return out;
}

void Put32(Bytes* b, uint64_t at, uint32_t v) { std::memcpy(b->data() + at, &v, 4); }
void Put64(Bytes* b, uint64_t at, uint64_t v) { std::memcpy(b->data() + at, &v, 8); }
uint64_t Get64(const Bytes& b, uint64_t at) {
  uint64_t v;
  std::memcpy(&v, b.data() + at, 8);
  return v;
}

// ---------------------------------------------------------------------------------------------
// Test data.

// UTF-8, an embedded NUL and a newline: strings are length-delimited byte sequences.
std::string StringWithNul() {
  static const char kText[] = "h\xc3\xa9llo\0with a NUL\n";
  return std::string(kText, sizeof(kText) - 1);
}

Metadata AllTypesMetadata() {
  Metadata m;
  m.Set("a.u32", uint32_t{7});
  m.Set("b.i32", int32_t{-5});
  m.Set("c.f32", 1.5f);
  m.Set("c.f32_tiny", std::numeric_limits<float>::denorm_min());
  m.Set("d.u64", uint64_t{1} << 40);
  m.Set("e.bool", true);
  m.Set("e.bool_false", false);
  m.Set("f.string", StringWithNul());
  m.Set("f.empty", std::string());
  m.Set("g.u32s", std::vector<uint32_t>{1, 2, 0xffffffffu});
  m.Set("g.i32s", std::vector<int32_t>{-1, 0, std::numeric_limits<int32_t>::min()});
  m.Set("g.f32s", std::vector<float>{0.5f, -2.0f, std::numeric_limits<float>::infinity()});
  m.Set("g.u64s", std::vector<uint64_t>{uint64_t{1} << 63, 0});
  m.Set("g.strings", std::vector<std::string>{"a", "", "ccc", std::string(300, 'x')});
  m.Set("g.empty_strings", std::vector<std::string>{});
  m.Set("g.empty_u32s", std::vector<uint32_t>{});
  m.Set("chat.template", std::string("{% for m in messages %}{{ m.content }}{% endfor %}"));
  return m;
}

// Encoded bytes of a random matrix in the given dtype and layout (tiled layouts are repacked from
// the plain encoding), plus that plain encoding for comparison.
struct Matrix {
  Bytes bytes, plain;
};
Matrix RandomMatrix(DType t, Layout l, int64_t columns, int64_t rows, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  Matrix m;
  m.plain.resize(MatrixBytes(t, columns, rows));
  std::vector<float> row(static_cast<size_t>(columns));
  for (int64_t r = 0; r < rows; ++r) {
    for (auto& v : row) v = dist(rng);
    EncodeRow(t, row.data(), m.plain.data() + DTypeRowBytes(t, columns) * static_cast<size_t>(r), columns);
  }
  m.bytes = m.plain;
  if (l != Layout::kPlain) RepackPlainToTiled(l, m.plain.data(), m.bytes.data(), columns, rows);
  return m;
}

struct PlannedTensor {
  TensorPlan plan;
  Bytes data;
  Bytes plain;
};

absl::Status WriteWithWriter(const std::string& path, const Metadata& m, const std::vector<PlannedTensor>& tensors) {
  std::vector<TensorPlan> plans;
  for (const auto& t : tensors) plans.push_back(t.plan);
  auto w = VqfWriter::Create(path, m, plans);
  if (!w.ok()) return w.status();
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (auto s = (*w)->WriteTensor(i, tensors[i].data.data(), tensors[i].data.size()); !s.ok()) return s;
  }
  return (*w)->Finish();
}

PlannedTensor MakeTensor(const std::string& name, DType t, Layout l, std::vector<int64_t> dims, uint32_t seed) {
  int64_t rows = 1;
  for (size_t i = 1; i < dims.size(); ++i) rows *= dims[i];
  Matrix m = RandomMatrix(t, l, dims[0], rows, seed);
  return PlannedTensor{TensorPlan{name, t, l, std::move(dims)}, std::move(m.bytes), std::move(m.plain)};
}

// The small model used for the corpus: every dtype and layout, two layers, a non-layer tensor
// before and after them.
std::vector<PlannedTensor> SmallModelTensors() {
  std::vector<PlannedTensor> t;
  t.push_back(MakeTensor("token_embd.weight", DType::kF16, Layout::kPlain, {32, 6}, 1));
  t.push_back(MakeTensor("blk.0.attn_norm.weight", DType::kF32, Layout::kPlain, {32}, 2));
  t.push_back(MakeTensor("blk.0.attn_q.weight", DType::kQ4_0, Layout::kQ4_0x4, {64, 8}, 3));
  t.push_back(MakeTensor("blk.0.ffn_down.weight", DType::kQ8_0, Layout::kQ8_0x8, {32, 8}, 4));
  t.push_back(MakeTensor("blk.1.attn_norm.weight", DType::kBF16, Layout::kPlain, {32}, 5));
  t.push_back(MakeTensor("blk.1.attn_k.weight", DType::kQ8_0, Layout::kPlain, {32, 3}, 6));
  t.push_back(MakeTensor("blk.1.ffn_up.weight", DType::kQ4_0, Layout::kPlain, {32, 2, 2}, 7));
  t.push_back(MakeTensor("output_norm.weight", DType::kF32, Layout::kPlain, {32}, 8));
  return t;
}

RawFile SmallModelRaw() {
  RawFile f;
  f.layout_flags = 7;
  f.metadata = SpecMetadataSection(AllTypesMetadata());
  for (const auto& p : SmallModelTensors()) {
    RawTensor t;
    t.name = p.plan.name;
    t.dtype = static_cast<uint32_t>(p.plan.dtype);
    t.layout = static_cast<uint32_t>(p.plan.layout);
    for (int64_t d : p.plan.dims) t.dims.push_back(static_cast<uint64_t>(d));
    t.bytes = p.data.size();
    t.data = p.data;
    f.tensors.push_back(std::move(t));
  }
  PlaceTensors(&f);
  return f;
}

std::string Message(const absl::Status& s) { return std::string(s.message()); }

// The image must be rejected by Parse (and by Open from a file) with a message that names the
// problem (`needle`) and the file.
void ExpectRejected(const Bytes& image, const std::string& needle, bool also_open = true) {
  auto parsed = VqfFile::Parse(image.data(), image.size(), "corrupt.vqf");
  INFO("expecting an error containing: " << needle);
  REQUIRE_FALSE(parsed.ok());
  INFO("got: " << parsed.status().ToString());
  CHECK(Message(parsed.status()).find(needle) != std::string::npos);
  CHECK(Message(parsed.status()).find("corrupt.vqf") != std::string::npos);
  if (also_open && !image.empty()) {
    const std::string path = testing::TempPath("corrupt.vqf");
    testing::WriteFileBytes(path, image.data(), image.size());
    auto opened = VqfFile::Open(path);
    REQUIRE_FALSE(opened.ok());
    CHECK(Message(opened.status()).find(needle) != std::string::npos);
  }
}

void ExpectAccepted(const Bytes& image) {
  auto parsed = VqfFile::Parse(image.data(), image.size(), "valid.vqf");
  INFO((parsed.ok() ? std::string("ok") : parsed.status().ToString()));
  REQUIRE(parsed.ok());
}

// Byte position of tensor `index`'s fields in an assembled image.
struct EntryFields {
  uint64_t name_length, dtype, layout, n_dims, dims, offset, bytes;
};
EntryFields LocateEntry(const Bytes& image, size_t index) {
  uint64_t pos = Get64(image, vqf::kOffDirectoryOffset) + 8;
  for (size_t i = 0;; ++i) {
    EntryFields e{};
    uint32_t name_len, n_dims;
    std::memcpy(&name_len, image.data() + pos, 4);
    e.name_length = pos;
    e.dtype = pos + 4 + name_len;
    e.layout = e.dtype + 4;
    e.n_dims = e.layout + 4;
    std::memcpy(&n_dims, image.data() + e.n_dims, 4);
    e.dims = e.n_dims + 4;
    e.offset = e.dims + 8 * n_dims;
    e.bytes = e.offset + 8;
    if (i == index) return e;
    pos = e.bytes + 8;
  }
}

// ---------------------------------------------------------------------------------------------
// Round trips.

TEST_CASE("The spec assembler and VqfWriter produce identical bytes", "[vqf]") {
  const std::string path = testing::TempPath("spec_vs_writer.vqf");
  REQUIRE(WriteWithWriter(path, AllTypesMetadata(), SmallModelTensors()).ok());
  const Bytes written = testing::ReadFileBytes(path);
  const Bytes assembled = Assemble(SmallModelRaw());
  REQUIRE(SerializeMetadata(AllTypesMetadata()) == SpecMetadataSection(AllTypesMetadata()));
  REQUIRE(written.size() == assembled.size());
  REQUIRE(written == assembled);
  ExpectAccepted(assembled);
}

TEST_CASE("Writer/reader round trip for every dtype x layout", "[vqf]") {
  struct Combo {
    DType dtype;
    Layout layout;
  };
  const Combo combos[] = {{DType::kF32, Layout::kPlain},  {DType::kF16, Layout::kPlain},
                          {DType::kBF16, Layout::kPlain}, {DType::kQ8_0, Layout::kPlain},
                          {DType::kQ4_0, Layout::kPlain}, {DType::kQ4_0, Layout::kQ4_0x4},
                          {DType::kQ8_0, Layout::kQ8_0x8}};
  for (const Combo& c : combos) {
    for (const std::vector<int64_t>& dims : {std::vector<int64_t>{64, 8}, std::vector<int64_t>{96, 16},
                                             std::vector<int64_t>{32, 8, 2}, std::vector<int64_t>{256, 24}}) {
      INFO(DTypeName(c.dtype) << " " << LayoutName(c.layout) << " " << dims[0] << "x" << dims[1]);
      std::vector<PlannedTensor> tensors;
      tensors.push_back(MakeTensor("blk.0.ffn_up.weight", c.dtype, c.layout, dims, 11));
      tensors.push_back(MakeTensor("blk.0.ffn_norm.weight", DType::kF32, Layout::kPlain, {dims[0]}, 12));
      const std::string path = testing::TempPath("roundtrip.vqf");
      REQUIRE(WriteWithWriter(path, AllTypesMetadata(), tensors).ok());
      auto file = VqfFile::Open(path);
      REQUIRE(file.ok());
      const VqfFile& f = **file;
      REQUIRE(f.version_major() == vqf::kVersionMajor);
      REQUIRE(f.version_minor() == vqf::kVersionMinor);
      REQUIRE(f.layout_flags() == (LayoutFlag(Layout::kPlain) | LayoutFlag(c.layout)));
      REQUIRE(f.tensors().size() == 2);
      REQUIRE(f.metadata().entries() == AllTypesMetadata().entries());
      for (const auto& planned : tensors) {
        const TensorInfo* t = f.Find(planned.plan.name);
        REQUIRE(t != nullptr);
        REQUIRE(t->dtype == planned.plan.dtype);
        REQUIRE(t->layout == planned.plan.layout);
        REQUIRE(t->dims == planned.plan.dims);
        REQUIRE(t->layer == 0);
        REQUIRE(t->bytes == planned.data.size());
        REQUIRE(t->offset % vqf::kTensorAlignment == 0);
        REQUIRE(std::memcmp(t->data, planned.data.data(), planned.data.size()) == 0);
        // Every row decodes from the file exactly as from the plain encoding.
        std::vector<float> a(static_cast<size_t>(t->columns())), b(a.size());
        for (int64_t r = 0; r < t->rows(); ++r) {
          DequantizeMatrixRow(t->dtype, t->layout, t->data, t->columns(), r, a.data());
          DequantizeMatrixRow(t->dtype, Layout::kPlain, planned.plain.data(), t->columns(), r, b.data());
          REQUIRE(std::memcmp(a.data(), b.data(), a.size() * 4) == 0);
        }
      }
      REQUIRE(f.Find("missing.weight") == nullptr);
    }
  }
}

TEST_CASE("Metadata of every type round trips, including NaN bits and an empty section", "[vqf]") {
  Metadata m = AllTypesMetadata();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  m.Set("nan", nan);
  const std::string path = testing::TempPath("meta.vqf");
  REQUIRE(WriteWithWriter(path, m, {MakeTensor("w", DType::kF32, Layout::kPlain, {3}, 1)}).ok());
  auto file = VqfFile::Open(path);
  REQUIRE(file.ok());
  const Metadata& got = (*file)->metadata();
  REQUIRE(got.entries().size() == m.entries().size());
  for (const auto& [key, value] : m.entries()) {
    INFO(key);
    const MetaValue* v = got.Find(key);
    REQUIRE(v != nullptr);
    REQUIRE(v->index() == value.index());
    if (key == "nan") {
      const float x = std::get<float>(*v);
      REQUIRE(std::memcmp(&x, &nan, 4) == 0);
    } else {
      REQUIRE(*v == value);
    }
  }
  REQUIRE(*got.GetU32("a.u32") == 7);
  REQUIRE(*got.GetI32("b.i32") == -5);
  REQUIRE(*got.GetString("f.string") == StringWithNul());
  REQUIRE((*got.GetStringArray("g.strings"))->at(3) == std::string(300, 'x'));
  REQUIRE(got.GetU32("b.i32").status().code() == absl::StatusCode::kInvalidArgument);
  REQUIRE(got.GetU32("nope").status().code() == absl::StatusCode::kNotFound);

  // No metadata and no tensors at all is a valid (if useless) file.
  const std::string empty_path = testing::TempPath("empty_model.vqf");
  REQUIRE(WriteWithWriter(empty_path, Metadata(), {}).ok());
  auto empty = VqfFile::Open(empty_path);
  REQUIRE(empty.ok());
  REQUIRE((*empty)->tensors().empty());
  REQUIRE((*empty)->metadata().entries().empty());
}

TEST_CASE("Layers are page-aligned and adjacent; tensors are 64-byte aligned", "[vqf]") {
  const std::string path = testing::TempPath("layers.vqf");
  std::vector<PlannedTensor> tensors = SmallModelTensors();
  REQUIRE(WriteWithWriter(path, AllTypesMetadata(), tensors).ok());
  auto file = VqfFile::Open(path);
  REQUIRE(file.ok());
  const VqfFile& f = **file;
  REQUIRE(f.file_bytes() == testing::ReadFileBytes(path).size());
  const auto& ts = f.tensors();
  REQUIRE(ts.size() == tensors.size());
  for (size_t i = 0; i < ts.size(); ++i) {
    INFO(ts[i].name);
    REQUIRE(ts[i].name == tensors[i].plan.name);  // directory order is plan order
    REQUIRE(ts[i].offset % vqf::kTensorAlignment == 0);
    REQUIRE(ts[i].layer == LayerFromTensorName(ts[i].name));
    if (i > 0) REQUIRE(ts[i].offset >= ts[i - 1].offset + ts[i - 1].bytes);
    const bool first_of_layer = ts[i].layer >= 0 && (i == 0 || ts[i - 1].layer != ts[i].layer);
    if (first_of_layer) REQUIRE(ts[i].offset % vqf::kLayerAlignment == 0);
    // Inside a layer, a tensor follows its predecessor at the next 64-byte boundary.
    if (i > 0 && ts[i].layer >= 0 && ts[i - 1].layer == ts[i].layer) {
      REQUIRE(ts[i].offset == AlignUp(ts[i - 1].offset + ts[i - 1].bytes, 64));
    }
  }
  REQUIRE(ts[0].layer == -1);
  REQUIRE(ts.back().layer == -1);
  REQUIRE(ts.back().offset % vqf::kLayerAlignment == 0);  // leaving a layer starts a new page
  for (int layer : {0, 1}) {
    const auto [begin, end] = f.LayerRange(layer);
    INFO("layer " << layer);
    REQUIRE(begin % vqf::kLayerAlignment == 0);
    uint64_t lo = UINT64_MAX, hi = 0;
    for (const auto& t : ts) {
      if (t.layer == layer) {
        lo = std::min(lo, t.offset);
        hi = std::max(hi, t.offset + t.bytes);
      } else {
        // No other tensor lies inside the layer's range.
        REQUIRE((t.offset + t.bytes <= begin || t.offset >= end));
      }
    }
    REQUIRE(begin == lo);
    REQUIRE(end == hi);
  }
  REQUIRE(f.LayerRange(2) == std::make_pair(uint64_t{0}, uint64_t{0}));
  REQUIRE(f.LayerRange(-1) != std::make_pair(uint64_t{0}, uint64_t{0}));  // the non-layer tensors

  REQUIRE(LayerFromTensorName("blk.12.attn_q.weight") == 12);
  REQUIRE(LayerFromTensorName("blk.0.ffn_up.weight") == 0);
  REQUIRE(LayerFromTensorName("blk.x.attn_q.weight") == -1);
  REQUIRE(LayerFromTensorName("blk.3") == -1);
  REQUIRE(LayerFromTensorName("blk.-1.a") == -1);
  REQUIRE(LayerFromTensorName("output.weight") == -1);
  REQUIRE(LayerFromTensorName("token_embd.weight") == -1);
}

// ---------------------------------------------------------------------------------------------
// Writer refusals.

TEST_CASE("The writer refuses bad plans", "[vqf][writer]") {
  const std::string path = testing::TempPath("refused.vqf");
  std::remove(path.c_str());
  const auto refuse = [&](std::vector<TensorPlan> plans, const std::string& needle, Metadata m = Metadata()) {
    auto w = VqfWriter::Create(path, m, std::move(plans));
    INFO("expecting: " << needle);
    REQUIRE_FALSE(w.ok());
    INFO("got: " << w.status().ToString());
    REQUIRE(Message(w.status()).find(needle) != std::string::npos);
  };
  refuse({{"blk.0.a", DType::kF32, Layout::kPlain, {4}},
          {"blk.1.a", DType::kF32, Layout::kPlain, {4}},
          {"blk.0.b", DType::kF32, Layout::kPlain, {4}}},
         "not adjacent");
  refuse({{"blk.0.a", DType::kF32, Layout::kPlain, {4}},
          {"output_norm.weight", DType::kF32, Layout::kPlain, {4}},
          {"blk.0.b", DType::kF32, Layout::kPlain, {4}}},
         "not adjacent");
  refuse({{"w", DType::kQ4_0, Layout::kQ4_0x4, {32, 6}}}, "multiple of 4");
  refuse({{"w", DType::kQ8_0, Layout::kQ8_0x8, {32, 4}}}, "multiple of 8");
  refuse({{"w", DType::kQ4_0, Layout::kQ8_0x8, {32, 8}}}, "cannot hold dtype q4_0");
  refuse({{"w", DType::kF16, Layout::kQ4_0x4, {32, 4}}}, "cannot hold dtype f16");
  refuse({{"w", DType::kQ8_0, Layout::kPlain, {33, 1}}}, "multiple of 32");
  refuse({{"w", DType::kF32, Layout::kPlain, {4}}, {"w", DType::kF32, Layout::kPlain, {4}}}, "duplicate tensor 'w'");
  refuse({{"", DType::kF32, Layout::kPlain, {4}}}, "empty or too long");
  refuse({{std::string(vqf::kMaxNameBytes + 1, 'n'), DType::kF32, Layout::kPlain, {4}}}, "empty or too long");
  refuse({{"w", DType::kF32, Layout::kPlain, {}}}, "0 dimensions");
  refuse({{"w", DType::kF32, Layout::kPlain, {1, 1, 1, 1, 1}}}, "5 dimensions");
  refuse({{"w", DType::kF32, Layout::kPlain, {0, 4}}}, "dimension");
  refuse({{"w", DType::kF32, Layout::kPlain, {32, -1, -1}}}, "dimension");
  refuse({{"w", DType::kF32, Layout::kPlain, {int64_t{1} << 40, int64_t{1} << 40}}}, "dimension");
  Metadata long_key;
  long_key.Set(std::string(vqf::kMaxNameBytes + 1, 'k'), uint32_t{1});
  refuse({}, "metadata key", long_key);
  Metadata empty_key;
  empty_key.Set("", uint32_t{1});
  refuse({}, "metadata key", empty_key);
  // Nothing was left behind.
  REQUIRE(testing::ReadFileBytes(path).empty());
  REQUIRE(testing::ReadFileBytes(path + ".tmp").empty());
}

TEST_CASE("The writer enforces order, sizes and completeness", "[vqf][writer]") {
  const std::string path = testing::TempPath("order.vqf");
  std::remove(path.c_str());
  std::vector<TensorPlan> plans = {{"a", DType::kF32, Layout::kPlain, {4}}, {"b", DType::kF16, Layout::kPlain, {4}}};
  const Bytes a(16, 1), b(8, 2);
  {
    auto w = VqfWriter::Create(path, Metadata(), plans);
    REQUIRE(w.ok());
    REQUIRE((*w)->tensor_bytes(0) == 16);
    REQUIRE((*w)->tensor_bytes(1) == 8);
    REQUIRE((*w)->WriteTensor(1, b.data(), b.size()).code() == absl::StatusCode::kFailedPrecondition);
    REQUIRE((*w)->WriteTensor(0, a.data(), 15).code() == absl::StatusCode::kInvalidArgument);
    REQUIRE((*w)->WriteTensor(0, a.data(), a.size()).ok());
    REQUIRE((*w)->WriteTensor(0, a.data(), a.size()).code() == absl::StatusCode::kFailedPrecondition);
    REQUIRE((*w)->Finish().code() == absl::StatusCode::kFailedPrecondition);
  }
  // An unfinished writer leaves no file behind, neither the target nor the temporary.
  REQUIRE(testing::ReadFileBytes(path).empty());
  REQUIRE(testing::ReadFileBytes(path + ".tmp").empty());
  {
    auto w = VqfWriter::Create(path, Metadata(), plans);
    REQUIRE(w.ok());
    REQUIRE((*w)->WriteTensor(0, a.data(), a.size()).ok());
    REQUIRE((*w)->WriteTensor(1, b.data(), b.size()).ok());
    REQUIRE((*w)->WriteTensor(2, b.data(), b.size()).code() == absl::StatusCode::kFailedPrecondition);
    REQUIRE((*w)->Finish().ok());
    REQUIRE((*w)->file_bytes() == testing::ReadFileBytes(path).size());
  }
  REQUIRE(VqfFile::Open(path).ok());
  auto bad_dir = VqfWriter::Create(testing::TempPath("no/such/dir/x.vqf"), Metadata(), plans);
  REQUIRE_FALSE(bad_dir.ok());
}

// ---------------------------------------------------------------------------------------------
// The corrupted-file corpus.

TEST_CASE("Corpus: the base file is valid, and a future minor version is accepted", "[vqf][corpus]") {
  Bytes image = Assemble(SmallModelRaw());
  ExpectAccepted(image);
  Put32(&image, vqf::kOffVersionMinor, 7);
  auto parsed = VqfFile::Parse(image.data(), image.size(), "minor.vqf");
  REQUIRE(parsed.ok());
  REQUIRE((*parsed)->version_minor() == 7);
}

TEST_CASE("Corpus: truncation at every offset of the header, metadata and directory", "[vqf][corpus]") {
  const Bytes image = Assemble(SmallModelRaw());
  const RawFile raw = SmallModelRaw();
  const uint64_t dir_end = Get64(image, vqf::kOffDirectoryOffset) + Get64(image, vqf::kOffDirectoryBytes);
  std::vector<uint64_t> cuts;
  for (uint64_t n = 0; n <= dir_end + 1; ++n) cuts.push_back(n);
  // Several cuts inside the data: at, just after and in the middle of each tensor, and 1 byte short.
  for (const auto& t : raw.tensors) {
    for (uint64_t n : {t.offset, t.offset + 1, t.offset + t.bytes / 2, t.offset + t.bytes - 1}) cuts.push_back(n);
  }
  cuts.push_back(image.size() - 1);
  for (uint64_t n : cuts) {
    INFO("cut at " << n << " of " << image.size());
    // Exact-size heap copies, so a sanitizer sees any read past the end.
    Bytes cut(image.begin(), image.begin() + static_cast<std::ptrdiff_t>(n));
    ExpectRejected(cut, n < vqf::kHeaderBytes ? "shorter than the 64-byte header" : "(truncated)", false);
    // The same cut with the header's file size patched to match, so parsing goes deeper.
    if (n >= vqf::kHeaderBytes) {
      Put64(&cut, vqf::kOffFileBytes, n);
      auto parsed = VqfFile::Parse(cut.data(), cut.size(), "cut.vqf");
      REQUIRE_FALSE(parsed.ok());
      REQUIRE(parsed.status().code() == absl::StatusCode::kDataLoss);
    }
  }
  // Open sees the same on disk, for a few of the cuts.
  for (uint64_t n : {uint64_t{0}, uint64_t{10}, uint64_t{63}, uint64_t{64}, dir_end - 1, uint64_t{image.size() - 1}}) {
    const std::string path = testing::TempPath("cut.vqf");
    testing::WriteFileBytes(path, image.data(), n);
    auto opened = VqfFile::Open(path);
    INFO("cut at " << n);
    REQUIRE_FALSE(opened.ok());
  }
}

TEST_CASE("Corpus: header corruption", "[vqf][corpus]") {
  const Bytes base = Assemble(SmallModelRaw());
  SECTION("empty file") {
    ExpectRejected(Bytes(), "shorter than the 64-byte header", false);
    const std::string path = testing::TempPath("empty.vqf");
    testing::WriteFileBytes(path, "", 0);
    auto opened = VqfFile::Open(path);
    REQUIRE_FALSE(opened.ok());
    REQUIRE(Message(opened.status()).find("empty") != std::string::npos);
  }
  SECTION("missing file") {
    auto opened = VqfFile::Open(testing::TempPath("does-not-exist.vqf"));
    REQUIRE(opened.status().code() == absl::StatusCode::kNotFound);
  }
  SECTION("bad magic") {
    for (size_t i = 0; i < 8; ++i) {
      Bytes b = base;
      b[i] ^= 0x20;
      ExpectRejected(b, "bad magic");
    }
    Bytes gguf = base;
    std::memcpy(gguf.data(), "GGUF", 4);
    ExpectRejected(gguf, "bad magic");
  }
  SECTION("future and past major versions") {
    Bytes b = base;
    Put32(&b, vqf::kOffVersionMajor, 2);
    ExpectRejected(b, "unsupported format version 2.0");
    Put32(&b, vqf::kOffVersionMajor, 0);
    ExpectRejected(b, "unsupported format version 0.0");
  }
  SECTION("header size") {
    Bytes b = base;
    Put32(&b, vqf::kOffHeaderBytes, 128);
    ExpectRejected(b, "header size: expected 64, found 128");
  }
  SECTION("unknown layout flag bits") {
    for (uint32_t bit = kLayoutCount; bit < 32; ++bit) {
      Bytes b = base;
      Put32(&b, vqf::kOffLayoutFlags, 7u | 1u << bit);
      ExpectRejected(b, "unknown layout flags", bit < kLayoutCount + 2);
    }
  }
  SECTION("file size mismatch") {
    Bytes b = base;
    Put64(&b, vqf::kOffFileBytes, base.size() + 1);
    ExpectRejected(b, "(truncated)");
    Put64(&b, vqf::kOffFileBytes, base.size() - 1);
    ExpectRejected(b, "(trailing bytes)");
    Bytes longer = base;
    longer.push_back(0);
    ExpectRejected(longer, "(trailing bytes)");
  }
  SECTION("section ranges outside the body") {
    Bytes b = base;
    Put64(&b, vqf::kOffMetadataOffset, 8);  // inside the header
    ExpectRejected(b, "metadata range");
    b = base;
    Put64(&b, vqf::kOffMetadataBytes, base.size());
    ExpectRejected(b, "metadata range");
    b = base;
    Put64(&b, vqf::kOffDirectoryOffset, base.size() + 64);
    ExpectRejected(b, "tensor directory range");
    b = base;
    Put64(&b, vqf::kOffDirectoryBytes, UINT64_MAX - 8);  // offset + size wraps
    ExpectRejected(b, "tensor directory range");
    b = base;
    Put64(&b, vqf::kOffMetadataOffset, UINT64_MAX - 63);
    ExpectRejected(b, "metadata range");
  }
  SECTION("metadata and directory overlap") {
    Bytes b = base;
    Put64(&b, vqf::kOffDirectoryOffset, Get64(base, vqf::kOffMetadataOffset) + 8);
    ExpectRejected(b, "overlap");
  }
}

// A file whose metadata section is `section` (a hand-made, possibly corrupt encoding).
Bytes WithMetadataSection(const std::string& section) {
  RawFile f = SmallModelRaw();
  f.metadata = section;
  PlaceTensors(&f);
  return Assemble(f);
}

std::string Section(uint64_t count, const std::string& entries) { return ByteBuilder().U64(count).s + entries; }

TEST_CASE("Corpus: metadata corruption", "[vqf][corpus]") {
  ExpectAccepted(WithMetadataSection(Section(0, "")));
  ExpectAccepted(WithMetadataSection(Section(1, ByteBuilder().Str32("k").U32(kTagU32).U32(5).s)));

  SECTION("string length past the section end (a string without terminator)") {
    const std::string entry = ByteBuilder().Str32("k").U32(kTagString).U64(1000).s + "abc";
    ExpectRejected(WithMetadataSection(Section(1, entry)), "string value needs 1000 bytes but only 3 remain");
    const std::string huge = ByteBuilder().Str32("k").U32(kTagString).U64(UINT64_MAX).s + "abc";
    ExpectRejected(WithMetadataSection(Section(1, huge)), "string value needs");
    const std::string in_array =
        ByteBuilder().Str32("k").U32(kTagArray).U32(kTagString).U64(2).Str64("ok").U64(99).s + "x";
    ExpectRejected(WithMetadataSection(Section(1, in_array)), "string array element needs 99 bytes");
  }
  SECTION("key length past the end and over the limit") {
    ExpectRejected(WithMetadataSection(Section(1, ByteBuilder().U32(50).s + "abc")), "key needs 50 bytes");
    ExpectRejected(WithMetadataSection(Section(1, ByteBuilder().U32(0xffffffffu).s + "abc")),
                   "key length 4294967295 exceeds the limit of 256");
    ExpectRejected(WithMetadataSection(Section(1, ByteBuilder().Str32("").U32(kTagU32).U32(1).s)), "empty key");
  }
  SECTION("duplicate key") {
    const std::string e = ByteBuilder().Str32("k").U32(kTagU32).U32(1).s;
    ExpectRejected(WithMetadataSection(Section(2, e + e)), "duplicate key 'k'");
  }
  SECTION("huge entry and array counts") {
    ExpectRejected(WithMetadataSection(Section(uint64_t{1} << 40, "")), "entry count 1099511627776 exceeds the limit");
    ExpectRejected(WithMetadataSection(Section(UINT64_MAX, "")), "entry count");
    ExpectRejected(WithMetadataSection(Section(2, ByteBuilder().Str32("k").U32(kTagU32).U32(1).s)),
                   "key needs 4 bytes but only 0 remain");
    for (uint32_t elem : {kTagU32, kTagI32, kTagF32, kTagU64, kTagString}) {
      for (uint64_t n : {uint64_t{1} << 40, UINT64_MAX, (UINT64_MAX / 4) + 1}) {
        INFO("element type " << elem << " count " << n);
        const std::string e = ByteBuilder().Str32("k").U32(kTagArray).U32(elem).U64(n).U32(1).s;
        ExpectRejected(WithMetadataSection(Section(1, e)), "array", false);
      }
    }
    const std::string e = ByteBuilder().Str32("k").U32(kTagArray).U32(kTagU64).U64(3).U64(1).s;
    ExpectRejected(WithMetadataSection(Section(1, e)), "u64 array needs 24 bytes but only 8 remain");
  }
  SECTION("bool that is not 0 or 1") {
    for (uint8_t v : {2, 0x80, 0xff}) {
      ExpectRejected(WithMetadataSection(Section(1, ByteBuilder().Str32("k").U32(kTagBool).U8(v).s)),
                     "bool value must be 0 or 1");
    }
  }
  SECTION("unknown value and element types") {
    for (uint32_t tag : {7u, 100u, 0xffffffffu}) {
      ExpectRejected(WithMetadataSection(Section(1, ByteBuilder().Str32("k").U32(tag).U32(0).s)),
                     "key 'k': unknown value type " + std::to_string(tag));
    }
    // Arrays hold u32, i32, f32, u64 or string: no bools, no nested arrays.
    for (uint32_t elem : {kTagBool, kTagArray, 9u}) {
      ExpectRejected(WithMetadataSection(Section(1, ByteBuilder().Str32("k").U32(kTagArray).U32(elem).U64(0).s)),
                     "key 'k': unknown array element type " + std::to_string(elem));
    }
  }
  SECTION("trailing bytes after the last entry") {
    const std::string e = ByteBuilder().Str32("k").U32(kTagU32).U32(1).s;
    ExpectRejected(WithMetadataSection(Section(1, e + "zz")), "section holds 2 bytes past its last entry");
    ExpectRejected(WithMetadataSection(Section(0, "z")), "section holds 1 bytes past its last entry");
  }
  SECTION("section shorter than its count") {
    ExpectRejected(WithMetadataSection("abc"), "entry count needs 8 bytes but only 3 remain");
    ExpectRejected(WithMetadataSection(""), "entry count needs 8 bytes");
  }
}

TEST_CASE("Corpus: tensor directory corruption", "[vqf][corpus]") {
  const RawFile base = SmallModelRaw();
  const uint64_t base_size = Assemble(base).size();
  // Mutates a copy of the (already placed) base file and assembles it, without re-placing and
  // keeping the file size.
  const auto mutate = [&](auto&& fn) {
    RawFile f = base;
    f.file_size = base_size;
    fn(f);
    return Assemble(f);
  };
  SECTION("unknown dtype and layout ids") {
    ExpectRejected(mutate([](RawFile& f) { f.tensors[2].dtype = kDTypeCount; }),
                   "tensor 'blk.0.attn_q.weight': unknown dtype 5");
    ExpectRejected(mutate([](RawFile& f) { f.tensors[0].dtype = 0xffffffffu; }), "unknown dtype 4294967295");
    ExpectRejected(mutate([](RawFile& f) { f.tensors[1].layout = kLayoutCount; }),
                   "tensor 'blk.0.attn_norm.weight': unknown layout 3");
    ExpectRejected(mutate([](RawFile& f) { f.tensors[1].layout = 31; }), "unknown layout 31");
  }
  SECTION("a tensor layout not declared in the header flags") {
    ExpectRejected(mutate([](RawFile& f) { f.layout_flags = LayoutFlag(Layout::kPlain) | LayoutFlag(Layout::kQ8_0x8); }),
                   "layout q4_0x4 is not declared in the header's layout flags");
    ExpectRejected(mutate([](RawFile& f) { f.layout_flags = LayoutFlag(Layout::kPlain) | LayoutFlag(Layout::kQ4_0x4); }),
                   "layout q8_0x8 is not declared");
    ExpectRejected(mutate([](RawFile& f) { f.layout_flags = 6; }), "layout plain is not declared");
  }
  SECTION("a dtype / layout / shape combination that does not fit") {
    ExpectRejected(mutate([](RawFile& f) { f.tensors[2].dtype = static_cast<uint32_t>(DType::kQ8_0); }),
                   "layout q4_0x4 cannot hold dtype q8_0");
    ExpectRejected(mutate([](RawFile& f) { f.tensors[2].dims = {64, 6}; }), "needs a row count that is a multiple of 4");
    ExpectRejected(mutate([](RawFile& f) { f.tensors[5].dims = {40, 3}; }), "needs a row length that is a multiple of 32");
  }
  SECTION("dimension counts and dimensions") {
    ExpectRejected(mutate([](RawFile& f) { f.tensors[0].dims = {32, 0}; }), "dimension 1 = 0 is zero");
    ExpectRejected(mutate([](RawFile& f) { f.tensors[0].dims = {0, 6}; }), "dimension 0 = 0 is zero");
    ExpectRejected(mutate([](RawFile& f) { f.tensors[0].dims = {}; }), "dimension count must be 1..4, found 0");
    ExpectRejected(mutate([](RawFile& f) { f.tensors[0].dims = {1, 1, 1, 1, 32}; }), "dimension count must be 1..4, found 5");
    ExpectRejected(mutate([](RawFile& f) { f.tensors[0].dims = {uint64_t{1} << 32, uint64_t{1} << 32}; }),
                   "makes the element count overflow");
    ExpectRejected(mutate([](RawFile& f) { f.tensors[0].dims = {uint64_t{1} << 63, 1}; }), "element count overflow");
    ExpectRejected(mutate([](RawFile& f) { f.tensors[0].dims = {UINT64_MAX}; }), "element count overflow");
    ExpectRejected(mutate([](RawFile& f) {
                     f.tensors[0].dims = {1 << 16, 1 << 16, 1 << 16, 1 << 16};
                   }),
                   "element count overflow");
  }
  SECTION("data size that does not match the dtype") {
    ExpectRejected(mutate([](RawFile& f) { f.tensors[0].bytes += 2; }),
                   "tensor 'token_embd.weight': data size: expected 384 bytes for f16 32x6, found 386");
    ExpectRejected(mutate([](RawFile& f) { f.tensors[5].bytes = 3 * 32; }), "data size: expected 102 bytes for q8_0");
    ExpectRejected(mutate([](RawFile& f) { f.tensors[4].dtype = static_cast<uint32_t>(DType::kF32); }),
                   "data size: expected 128 bytes for f32 32x1, found 64");
  }
  SECTION("offsets past the end, wrapping, or misaligned") {
    ExpectRejected(mutate([](RawFile& f) { f.tensors.back().offset += 4096; }), "extends past the end of the file");
    ExpectRejected(mutate([](RawFile& f) { f.tensors[1].offset = uint64_t{1} << 40; }), "extends past the end");
    // offset + size wraps around 2^64 to a small number.
    ExpectRejected(mutate([](RawFile& f) { f.tensors[1].offset = UINT64_MAX - 63; }), "extends past the end");
    ExpectRejected(mutate([](RawFile& f) { f.tensors[1].offset += 4; }),
                   "data offset " + std::to_string(base.tensors[1].offset + 4) + " is not aligned to 64");
    ExpectRejected(mutate([](RawFile& f) { f.tensors[1].offset += 1; }), "is not aligned to 64");
  }
  SECTION("overlapping tensors") {
    ExpectRejected(mutate([](RawFile& f) { f.tensors[3].offset = f.tensors[2].offset + 64; }),
                   "overlaps tensor 'blk.0.attn_q.weight'");
    ExpectRejected(mutate([](RawFile& f) { f.tensors[3].offset = f.tensors[2].offset; }), "overlaps tensor");
  }
  SECTION("a tensor overlapping the header, metadata or directory") {
    ExpectRejected(mutate([](RawFile& f) { f.tensors[0].offset = 64; }), "overlaps the header, metadata or directory");
    ExpectRejected(mutate([](RawFile& f) { f.tensors[0].offset = 0; }), "overlaps the header, metadata or directory");
    ExpectRejected(mutate([](RawFile& f) { f.tensors[0].offset -= 64; }), "overlaps the header, metadata or directory");
  }
  SECTION("layer placement") {
    // A layer's first tensor off its page.
    ExpectRejected(mutate([](RawFile& f) {
                     f.tensors[4].offset += 64;
                     f.tensors[5].offset += 64;
                     f.tensors[6].offset += 64;
                   }),
                   "layer 1 starts at byte");
    // A layer's tensors separated by tensors of other layers: layer 0's last tensor moved to the end.
    ExpectRejected(mutate([](RawFile& f) {
                     const RawTensor& last = f.tensors.back();
                     f.tensors[3].offset = AlignUp(last.offset + last.bytes, 64);
                     f.file_size = f.tensors[3].offset + f.tensors[3].bytes;
                   }),
                   "tensors of layer 0 are not adjacent");
    // Accepted: a non-layer tensor that follows a layer without a page break (writers add one, but
    // readers do not require it).
    Bytes b = mutate([](RawFile& f) {
      RawTensor& out = f.tensors.back();
      const RawTensor& prev = f.tensors[f.tensors.size() - 2];
      out.offset = AlignUp(prev.offset + prev.bytes, 64);
      f.file_size = out.offset + out.bytes;
    });
    ExpectAccepted(b);
  }
  SECTION("names") {
    ExpectRejected(mutate([](RawFile& f) { f.tensors[3].name = f.tensors[2].name; }),
                   "duplicate tensor name 'blk.0.attn_q.weight'");
    ExpectRejected(mutate([](RawFile& f) { f.tensors[3].name = ""; }), "tensor 3 has an empty name");
    ExpectRejected(mutate([](RawFile& f) { f.tensors[3].name = std::string(300, 'n'); }), "tensor name length 300 exceeds");
  }
}

TEST_CASE("Corpus: directory framing", "[vqf][corpus]") {
  const Bytes base = Assemble(SmallModelRaw());
  const uint64_t dir_off = Get64(base, vqf::kOffDirectoryOffset);
  const uint64_t dir_bytes = Get64(base, vqf::kOffDirectoryBytes);
  SECTION("huge tensor count") {
    Bytes b = base;
    Put64(&b, dir_off, uint64_t{1} << 40);
    ExpectRejected(b, "tensor count 1099511627776 exceeds the limit");
    Put64(&b, dir_off, vqf::kMaxTensors);  // within the limit, but the entries are not there
    ExpectRejected(b, "needs");
  }
  SECTION("fewer entries than the section holds") {
    Bytes b = base;
    Put64(&b, dir_off, Get64(base, dir_off) - 1);
    ExpectRejected(b, "bytes past its last entry");
  }
  SECTION("a directory section cut short") {
    Bytes b = base;
    Put64(&b, vqf::kOffDirectoryBytes, dir_bytes - 1);
    ExpectRejected(b, "data size needs 8 bytes but only 7 remain");
    Put64(&b, vqf::kOffDirectoryBytes, dir_bytes - 9);
    ExpectRejected(b, "data offset needs 8 bytes but only 7 remain");
  }
  SECTION("a name length that runs past the section") {
    Bytes b = base;
    const EntryFields e = LocateEntry(base, 7);
    Put32(&b, e.name_length, 200);
    ExpectRejected(b, "tensor name needs 200 bytes");
  }
  SECTION("entry fields located by the spec agree with the parser") {
    auto parsed = VqfFile::Parse(base.data(), base.size(), "base");
    REQUIRE(parsed.ok());
    for (size_t i = 0; i < (*parsed)->tensors().size(); ++i) {
      const EntryFields e = LocateEntry(base, i);
      REQUIRE(Get64(base, e.offset) == (*parsed)->tensors()[i].offset);
      REQUIRE(Get64(base, e.bytes) == (*parsed)->tensors()[i].bytes);
    }
  }
}

TEST_CASE("Corpus: random byte corruption never crashes the reader", "[vqf][corpus]") {
  // Whatever the outcome, Parse must return (a sanitizer build checks it reads nothing out of
  // bounds). Corruption is aimed at the header, metadata and directory, where parsing happens.
  const Bytes base = Assemble(SmallModelRaw());
  const uint64_t dir_end = Get64(base, vqf::kOffDirectoryOffset) + Get64(base, vqf::kOffDirectoryBytes);
  std::mt19937 rng(2024);
  int rejected = 0;
  for (int iter = 0; iter < 4000; ++iter) {
    Bytes b = base;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < flips; ++k) {
      const size_t at = rng() % dir_end;
      switch (rng() % 3) {
        case 0: b[at] ^= static_cast<uint8_t>(1u << (rng() % 8)); break;
        case 1: b[at] = static_cast<uint8_t>(rng()); break;
        default: b[at] = (rng() & 1) ? 0xff : 0x00; break;
      }
    }
    auto parsed = VqfFile::Parse(b.data(), b.size(), "fuzz");
    if (!parsed.ok()) {
      ++rejected;
      REQUIRE_FALSE(parsed.status().message().empty());
    } else {
      // Whatever was accepted must be self-consistent.
      for (const auto& t : (*parsed)->tensors()) {
        REQUIRE(t.offset % vqf::kTensorAlignment == 0);
        REQUIRE(t.offset + t.bytes <= b.size());
        REQUIRE(t.bytes == MatrixBytes(t.dtype, t.columns(), t.rows()));
      }
    }
  }
  REQUIRE(rejected > 1000);
}

// ---------------------------------------------------------------------------------------------
// ModelConfig and TokenizerData.

ModelConfig ValidConfig() {
  ModelConfig c;
  c.architecture = Architecture::kQwen3;
  c.name = "tiny";
  c.dim = 64;
  c.n_layers = 2;
  c.n_heads = 8;
  c.n_kv_heads = 2;
  c.head_dim = 16;
  c.ffn_dim = 128;
  c.vocab_size = 300;
  c.context_length = 512;
  c.rope_theta = 1e6f;
  c.rope_style = RopeStyle::kHalfSplit;
  c.norm_eps = 1e-6f;
  c.tied_embeddings = true;
  c.qk_norm = true;
  c.qkv_bias = false;
  return c;
}

TokenizerData ValidTokenizer() {
  TokenizerData t;
  t.type = "bpe";
  t.tokens = {"a", "b", "ab", "<|im_end|>", "<s>"};
  t.token_types = {0, 0, 0, 2, 2};
  t.merges = {"a b"};
  t.pre_tokenizer = "qwen2";
  t.bos_id = 4;
  t.eos_id = 3;
  t.unk_id = -1;
  t.pad_id = -1;
  t.add_bos = false;
  t.eos_ids = {3};
  t.chat_template = "{{ messages }}";
  return t;
}

bool SameConfig(const ModelConfig& a, const ModelConfig& b) {
  return a.architecture == b.architecture && a.name == b.name && a.dim == b.dim && a.n_layers == b.n_layers &&
         a.n_heads == b.n_heads && a.n_kv_heads == b.n_kv_heads && a.head_dim == b.head_dim && a.ffn_dim == b.ffn_dim &&
         a.vocab_size == b.vocab_size && a.context_length == b.context_length && a.rope_theta == b.rope_theta &&
         a.rope_style == b.rope_style && a.norm_eps == b.norm_eps && a.tied_embeddings == b.tied_embeddings &&
         a.qk_norm == b.qk_norm && a.qkv_bias == b.qkv_bias;
}

TEST_CASE("ModelConfig and TokenizerData round trip through a VQF file", "[vqf][config]") {
  Metadata m;
  ValidConfig().ToMetadata(&m);
  ValidTokenizer().ToMetadata(&m);
  const std::string path = testing::TempPath("config.vqf");
  REQUIRE(WriteWithWriter(path, m, {MakeTensor("output_norm.weight", DType::kF32, Layout::kPlain, {64}, 1)}).ok());
  auto file = VqfFile::Open(path);
  REQUIRE(file.ok());
  auto config = ModelConfig::FromMetadata((*file)->metadata());
  REQUIRE(config.ok());
  REQUIRE(SameConfig(*config, ValidConfig()));
  auto tok = TokenizerData::FromMetadata((*file)->metadata());
  REQUIRE(tok.ok());
  const TokenizerData want = ValidTokenizer();
  REQUIRE(tok->type == want.type);
  REQUIRE(tok->tokens == want.tokens);
  REQUIRE(tok->token_types == want.token_types);
  REQUIRE(tok->merges == want.merges);
  REQUIRE(tok->pre_tokenizer == want.pre_tokenizer);
  REQUIRE(tok->bos_id == want.bos_id);
  REQUIRE(tok->eos_id == want.eos_id);
  REQUIRE(tok->unk_id == want.unk_id);
  REQUIRE(tok->eos_ids == want.eos_ids);
  REQUIRE(tok->chat_template == want.chat_template);
  REQUIRE(tok->add_bos == want.add_bos);
}

TEST_CASE("ModelConfig::FromMetadata refuses missing keys, wrong types and bad values", "[vqf][config]") {
  Metadata valid;
  ValidConfig().ToMetadata(&valid);
  REQUIRE(ModelConfig::FromMetadata(valid).ok());
  const auto expect = [](const Metadata& m, const std::string& needle) {
    auto c = ModelConfig::FromMetadata(m);
    INFO("expecting: " << needle);
    REQUIRE_FALSE(c.ok());
    INFO("got: " << c.status().ToString());
    REQUIRE(Message(c.status()).find(needle) != std::string::npos);
  };
  for (const char* key : {"general.architecture", "model.dim", "model.n_layers", "model.n_heads", "model.n_kv_heads",
                          "model.head_dim", "model.ffn_dim", "model.vocab_size", "model.context_length",
                          "model.rope_theta", "model.rope_style", "model.norm_eps", "model.tied_embeddings",
                          "model.qk_norm", "model.qkv_bias"}) {
    Metadata m;
    for (const auto& [k, v] : valid.entries()) {
      if (k != key) m.Set(k, v);
    }
    expect(m, std::string("metadata key '") + key + "' is missing");
  }
  {
    Metadata m = valid;
    m.Set("model.dim", int32_t{64});
    expect(m, "metadata key 'model.dim' is not of type u32");
    m = valid;
    m.Set("model.rope_theta", uint32_t{10000});
    expect(m, "'model.rope_theta' is not of type f32");
    m = valid;
    m.Set("model.qk_norm", uint32_t{1});
    expect(m, "'model.qk_norm' is not of type bool");
    m = valid;
    m.Set("general.architecture", uint32_t{1});
    expect(m, "'general.architecture' is not of type string");
  }
  const auto with = [&](auto&& fn) {
    ModelConfig c = ValidConfig();
    fn(c);
    Metadata m;
    c.ToMetadata(&m);
    return m;
  };
  expect(with([](ModelConfig& c) { c.n_heads = 6; c.n_kv_heads = 4; }), "n_heads 6 is not a multiple of n_kv_heads 4");
  expect(with([](ModelConfig& c) { c.head_dim = 15; }), "head_dim 15 must be even");
  expect(with([](ModelConfig& c) { c.dim = 0; }), "every dimension must be positive");
  expect(with([](ModelConfig& c) { c.n_kv_heads = 0; }), "every dimension must be positive");
  expect(with([](ModelConfig& c) { c.norm_eps = 0.0f; }), "must be positive");
  expect(with([](ModelConfig& c) { c.rope_theta = std::numeric_limits<float>::quiet_NaN(); }), "must be positive");
  {
    Metadata m = valid;
    m.Set("model.vocab_size", uint32_t{0x80000000u});
    expect(m, "'model.vocab_size' = 2147483648 is out of range");
    m = valid;
    m.Set("model.rope_style", std::string("diagonal"));
    expect(m, "unknown rope style 'diagonal'");
    m = valid;
    m.Set("general.architecture", std::string("gpt2"));
    auto c = ModelConfig::FromMetadata(m);
    REQUIRE(c.status().code() == absl::StatusCode::kUnimplemented);
    REQUIRE(Message(c.status()).find("unsupported architecture 'gpt2'") != std::string::npos);
  }
}

TEST_CASE("TokenizerData::FromMetadata refuses missing keys, wrong types and bad values", "[vqf][config]") {
  Metadata valid;
  ValidTokenizer().ToMetadata(&valid);
  REQUIRE(TokenizerData::FromMetadata(valid).ok());
  const auto expect = [](const Metadata& m, const std::string& needle) {
    auto t = TokenizerData::FromMetadata(m);
    INFO("expecting: " << needle);
    REQUIRE_FALSE(t.ok());
    INFO("got: " << t.status().ToString());
    REQUIRE(Message(t.status()).find(needle) != std::string::npos);
  };
  for (const char* key : {"tokenizer.type", "tokenizer.tokens", "tokenizer.token_types", "tokenizer.bos_id",
                          "tokenizer.eos_id", "tokenizer.unk_id", "tokenizer.pad_id", "tokenizer.add_bos"}) {
    Metadata m;
    for (const auto& [k, v] : valid.entries()) {
      if (k != key) m.Set(k, v);
    }
    expect(m, std::string("metadata key '") + key + "' is missing");
  }
  Metadata m = valid;
  m.Set("tokenizer.tokens", std::vector<uint32_t>{1, 2});
  expect(m, "'tokenizer.tokens' is not of type string array");
  m = valid;
  m.Set("tokenizer.bos_id", uint32_t{1});
  expect(m, "'tokenizer.bos_id' is not of type i32");
  const auto with = [&](auto&& fn) {
    TokenizerData t = ValidTokenizer();
    fn(t);
    Metadata out;
    t.ToMetadata(&out);
    return out;
  };
  expect(with([](TokenizerData& t) { t.bos_id = 5; }), "special token id 5 is outside the vocabulary of 5");
  expect(with([](TokenizerData& t) { t.eos_id = -2; }), "special token id -2 is outside");
  expect(with([](TokenizerData& t) { t.eos_ids = {0, 99}; }), "end-of-generation id 99 is outside the vocabulary");
  expect(with([](TokenizerData& t) { t.token_types.pop_back(); }), "token_types and tokens differ in length");
  expect(with([](TokenizerData& t) { t.type = "wordpiece"; }), "unknown tokenizer type 'wordpiece'");
  expect(with([](TokenizerData& t) { t.type = "llama2c"; }), "scores and tokens differ in length");
  expect(with([](TokenizerData& t) {
           t.tokens.clear();
           t.token_types.clear();
           t.bos_id = t.eos_id = -1;
           t.eos_ids.clear();
         }),
         "empty vocabulary");
}

// Whether this environment backs advised anonymous memory with huge pages at all, probed with a
// plain mmap + madvise of our own (not the code under test): the kernel may have them disabled or
// no free 2 MiB page, and user-mode emulators (qemu) ignore the advice. Where it does, the code
// under test must get them too; where not, that is reported, not assumed.
bool EnvironmentGivesHugePages() {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  constexpr size_t kPage = size_t{2} << 20, kSpan = 3 * kPage;
  void* region = ::mmap(nullptr, kSpan, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (region == MAP_FAILED) return false;
  auto* aligned = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(region) + kPage - 1) & ~(kPage - 1));
  bool huge = false;
  if (::madvise(aligned, kPage, MADV_HUGEPAGE) == 0) {
    std::memset(aligned, 1, kPage);
    huge = HugePageBytesIn(aligned, kPage) >= kPage;
  }
  ::munmap(region, kSpan);
  return huge;
#else
  return false;
#endif
}

TEST_CASE("HugePageBuffer: aligned, zeroed, writable, movable", "[vqf][residence]") {
  for (bool advise : {true, false}) {
    INFO("advise " << advise);
    auto buffer = HugePageBuffer::Allocate((size_t{4} << 20) + 100, advise);
    REQUIRE(buffer.ok());
    REQUIRE(buffer->size() == (size_t{4} << 20) + 100);
    CHECK(reinterpret_cast<uintptr_t>(buffer->data()) % (size_t{2} << 20) == 0);
    uint8_t* data = buffer->data();
    CHECK(std::all_of(data, data + buffer->size(), [](uint8_t b) { return b == 0; }));
    data[0] = 1;
    data[buffer->size() - 1] = 2;
    HugePageBuffer moved = std::move(*buffer);
    CHECK(buffer->data() == nullptr);
    CHECK(buffer->size() == 0);
    REQUIRE(moved.data() == data);
    CHECK((moved.data()[0] == 1 && moved.data()[moved.size() - 1] == 2));
    HugePageBuffer assigned;
    assigned = std::move(moved);
    CHECK(assigned.data() == data);
    std::memset(assigned.data(), 3, assigned.size());
    CHECK(HugePageBytesIn(assigned.data(), assigned.size()) <= (size_t{6} << 20));
    if (advise && EnvironmentGivesHugePages()) {
      CHECK(HugePageBytesIn(assigned.data(), assigned.size()) >= (size_t{4} << 20));
    }
  }
  auto empty = HugePageBuffer::Allocate(0);
  REQUIRE(empty.ok());
  CHECK(empty->data() == nullptr);
}

// The bandwidth probe's loop: it must read every word it counts, once, and count what it reads.
TEST_CASE("ReadStreams: sums exactly the words it counts as read", "[vqf][residence]") {
  // Odd lengths leave remainders under 8 words per stream, which the loop leaves unread.
  for (size_t words : {size_t{0}, size_t{7}, size_t{64}, size_t{1000}, size_t{12345}}) {
    std::vector<uint64_t> data(words);
    for (size_t i = 0; i < words; ++i) data[i] = (i * 2654435761u) ^ (i << 40);
    for (int streams : {1, 2, 4}) {
      for (bool prefetch : {false, true}) {
        INFO(words << " words, " << streams << " streams, prefetch " << prefetch);
        const size_t part = words / streams / 8 * 8;
        uint64_t expected = 0;
        for (int s = 0; s < streams; ++s) {
          for (size_t i = 0; i < part; ++i) expected += data[s * part + i];
        }
        size_t read = 12345;
        CHECK(ReadStreams(data.data(), words, streams, prefetch, &read) == expected);
        CHECK(read == part * streams * sizeof(uint64_t));
        CHECK(words - read / 8 < size_t{8} * streams);
      }
    }
  }
}

TEST_CASE("ScratchArena: arrays aligned, zeroed, apart, on huge pages when large", "[vqf][residence]") {
  for (size_t big : {size_t{1000}, size_t{3} << 20}) {
    INFO("big array of " << big << " floats");
    ScratchArena arena;
    ScratchArray<float> a, c;
    ScratchArray<int32_t> b;
    ScratchArray<BlockQ8_0> q;
    arena.Add(&a, 3);
    arena.Add(&b, 17);
    arena.Add(&q, 5);
    arena.Add(&c, big);
    CHECK(a.data() == nullptr);
    REQUIRE(arena.Allocate(true).ok());
    CHECK((a.size() == 3 && b.size() == 17 && q.size() == 5 && c.size() == big));
    const auto start = [](const void* p) { return reinterpret_cast<uintptr_t>(p); };
    for (uintptr_t p : {start(a.data()), start(b.data()), start(q.data()), start(c.data())}) CHECK(p % 64 == 0);
    // In the order added, each past the one before.
    CHECK(start(b.data()) >= start(a.data() + a.size()));
    CHECK(start(q.data()) >= start(b.data() + b.size()));
    CHECK(start(c.data()) >= start(q.data() + q.size()));
    CHECK(start(c.data() + c.size()) <= start(arena.buffer().data()) + arena.buffer().size());
    CHECK(std::all_of(c.data(), c.data() + c.size(), [](float v) { return v == 0.0f; }));
    for (size_t i = 0; i < b.size(); ++i) CHECK(b[i] == 0);
    std::fill(a.data(), a.data() + a.size(), 1.0f);
    std::fill(c.data(), c.data() + c.size(), 2.0f);
    std::fill(b.data(), b.data() + b.size(), 7);
    CHECK(std::all_of(a.data(), a.data() + a.size(), [](float v) { return v == 1.0f; }));
    CHECK(std::all_of(b.data(), b.data() + b.size(), [](int32_t v) { return v == 7; }));
    CHECK(q.data()[0].qs[0] == 0);
    if (big * sizeof(float) >= (size_t{2} << 20) && EnvironmentGivesHugePages()) {
      CHECK(HugePageBytesIn(arena.buffer().data(), arena.buffer().size()) >= (size_t{2} << 20));
    }
  }
  ScratchArena empty;
  CHECK(empty.Allocate(true).ok());
}

TEST_CASE("MappedFile holds the same bytes mapped and copied onto huge pages", "[vqf][residence]") {
  // 6 MiB and a bit: two whole 2 MiB pages at least, and a tail that ends mid-page.
  std::vector<uint8_t> bytes((size_t{6} << 20) + 12345);
  uint64_t state = 99;
  for (auto& b : bytes) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    b = static_cast<uint8_t>(state >> 56);
  }
  const std::string path = testing::TempPath("residence.bin");
  testing::WriteFileBytes(path, bytes.data(), bytes.size());

  auto mapped = MappedFile::Open(path, FileResidence::kMapped);
  auto copied = MappedFile::Open(path, FileResidence::kHugePageCopy);
  auto chosen = MappedFile::Open(path, FileResidence::kAuto);
  auto small = MappedFile::Open(path, FileResidence::kSmallPageCopy);
  REQUIRE(mapped.ok());
  REQUIRE(copied.ok());
  REQUIRE(chosen.ok());
  REQUIRE(small.ok());
  CHECK((*mapped)->residence() == FileResidence::kMapped);
  CHECK((*copied)->residence() == FileResidence::kHugePageCopy);
  CHECK((*small)->residence() == FileResidence::kSmallPageCopy);
  CHECK(std::string(FileResidenceName((*small)->residence())) == "small-pages");
  CHECK((*chosen)->residence() ==
        (MappedFile::HugePageCopyFits(bytes.size()) ? FileResidence::kHugePageCopy : FileResidence::kMapped));
  for (const auto* f : {mapped->get(), copied->get(), chosen->get(), small->get()}) {
    REQUIRE(f->size() == bytes.size());
    CHECK(std::memcmp(f->data(), bytes.data(), bytes.size()) == 0);
  }
  // The copy starts on a 2 MiB boundary, where a huge page can back it.
  CHECK(reinterpret_cast<uintptr_t>((*copied)->data()) % (size_t{2} << 20) == 0);
  // At most the span's own bytes: a huge page past the file's end (the copy's last one) is not the
  // file's (kestrel-bench once printed 196% for a 1 MB model).
  for (const auto* f : {mapped->get(), copied->get(), chosen->get(), small->get()})
    CHECK(f->HugePageBytes() <= f->size());

  // Whether the OS gives huge pages is its choice: the copy must get them wherever a plain
  // advised mapping does.
  if (EnvironmentGivesHugePages()) {
    CHECK((*copied)->HugePageBytes() >= (size_t{2} << 20));
    // Advised against them, the small-page copy gets none, even where THP is "always".
    CHECK((*small)->HugePageBytes() == 0);
  } else {
    WARN("this environment gives advised memory no huge pages: the copy's share is not checked");
  }
}

TEST_CASE("MappedFile reports missing and empty files in every residence", "[vqf][residence]") {
  const std::string empty = testing::TempPath("residence-empty.bin");
  testing::WriteFileBytes(empty, "", 0);
  for (FileResidence r :
       {FileResidence::kMapped, FileResidence::kHugePageCopy, FileResidence::kSmallPageCopy, FileResidence::kAuto}) {
    INFO(FileResidenceName(r));
    auto missing = MappedFile::Open(testing::TempPath("residence-missing.bin"), r);
    CHECK(missing.status().code() == absl::StatusCode::kNotFound);
    auto none = MappedFile::Open(empty, r);
    CHECK(none.status().code() == absl::StatusCode::kDataLoss);
  }
}

}  // namespace
}  // namespace kestrel
