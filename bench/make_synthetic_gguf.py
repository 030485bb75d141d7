#!/usr/bin/env python3
"""Writes a synthetic Qwen3-shaped GGUF file (random Q4_0, Q8_0, F16 or BF16 weights, a real tokenizer).

Its purpose is a side-by-side speed comparison: the same file is read by llama.cpp and imported by
`kestrel-convert`, so both engines stream identical bytes. Speed does not depend on weight values,
so the weights are random blocks with small fixed scales, or for F16 and BF16 random values of
magnitude 2^-7 to 2^-6 (finite activations, no denormals).

    bench/make_synthetic_gguf.py --type q4_0|q8_0|f16|bf16 -o qwen3-1.7b-q4_0.gguf \
        [--tokenizer ../shared/tokenizers/qwen3/tokenizer.json] [--shape qwen3-1.7b|qwen3-0.6b]

Only the Python standard library is needed.
"""
import argparse
import array
import json
import os
import random
import struct
import sys

SHAPES = {
    # hidden, layers, heads, kv heads, head dim, ffn, vocab (tied embeddings)
    "qwen3-0.6b": (1024, 28, 16, 8, 128, 3072, 151936),
    "qwen3-1.7b": (2048, 28, 16, 8, 128, 6144, 151936),
    "tiny": (64, 2, 4, 2, 32, 128, 151936),  # a few MB, for tests of this script
}

GGML_F32, GGML_F16, GGML_Q4_0, GGML_Q8_0, GGML_BF16 = 0, 1, 2, 8, 30
GGML_TYPES = {"q4_0": GGML_Q4_0, "q8_0": GGML_Q8_0, "f16": GGML_F16, "bf16": GGML_BF16}
# Elements and bytes per block (a float element is its own block).
BLOCKS = {GGML_Q4_0: (32, 18), GGML_Q8_0: (32, 34), GGML_F16: (1, 2), GGML_BF16: (1, 2), GGML_F32: (1, 4)}
ALIGN = 32

# GGUF metadata value types.
U32, I32, F32, BOOL, STRING, ARRAY, U64 = 4, 5, 6, 7, 8, 9, 10


def pack_string(s):
    b = s.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


class Metadata:
    def __init__(self):
        self.parts = []
        self.count = 0

    def _key(self, key, vtype):
        self.parts.append(pack_string(key) + struct.pack("<I", vtype))
        self.count += 1

    def string(self, key, v):
        self._key(key, STRING)
        self.parts.append(pack_string(v))

    def u32(self, key, v):
        self._key(key, U32)
        self.parts.append(struct.pack("<I", v))

    def f32(self, key, v):
        self._key(key, F32)
        self.parts.append(struct.pack("<f", v))

    def boolean(self, key, v):
        self._key(key, BOOL)
        self.parts.append(struct.pack("<B", 1 if v else 0))

    def strings(self, key, values):
        self._key(key, ARRAY)
        self.parts.append(struct.pack("<IQ", STRING, len(values)))
        self.parts.append(b"".join(pack_string(v) for v in values))

    def i32s(self, key, values):
        self._key(key, ARRAY)
        self.parts.append(struct.pack("<IQ", I32, len(values)))
        self.parts.append(struct.pack("<%di" % len(values), *values))


def load_tokenizer(path, vocab_rows):
    with open(path, encoding="utf-8") as f:
        tj = json.load(f)
    vocab = dict(tj["model"]["vocab"])
    specials = set()
    for t in tj.get("added_tokens", []):
        vocab[t["content"]] = t["id"]
        if t.get("special"):
            specials.add(t["id"])
    n = max(vocab.values()) + 1
    if n > vocab_rows:
        sys.exit(f"the tokenizer has {n} tokens, more than the model's {vocab_rows} embedding rows")
    tokens = [None] * vocab_rows
    for text, i in vocab.items():
        tokens[i] = text
    types = []
    for i in range(vocab_rows):
        if tokens[i] is None:  # ids the tokenizer does not use (the embedding is padded), as real files do
            tokens[i] = f"[PAD{i}]"
            types.append(5)  # unused
        else:
            types.append(3 if i in specials else 1)  # control / normal
    merges = [m if isinstance(m, str) else " ".join(m) for m in tj["model"]["merges"]]

    def special_id(text):
        return vocab.get(text, -1)

    return tokens, types, merges, special_id


def random_pool(ggml_type, blocks):
    """Random blocks: quantized ones with small fixed fp16 scales (0.0078 ~ 2^-7); F16 and BF16
    values with a random sign and mantissa and the exponent of 2^-7."""
    if ggml_type in (GGML_F16, GGML_BF16):
        values = array.array("H", os.urandom(2 * blocks))
        # sign and mantissa kept; exponent field set to 2^-7 (f16 bias 15, bf16 bias 127).
        keep, exponent = (0x83FF, 8 << 10) if ggml_type == GGML_F16 else (0x807F, 120 << 7)
        values = array.array("H", ((v & keep) | exponent for v in values))
        if sys.byteorder != "little":
            values.byteswap()
        return values.tobytes()
    size = BLOCKS[ggml_type][1]
    pool = bytearray(os.urandom(size * blocks))
    scale = struct.pack("<e", 0.0078125 if ggml_type == GGML_Q4_0 else 0.0009765625)
    pool[0::size] = scale[0:1] * blocks
    pool[1::size] = scale[1:2] * blocks
    return bytes(pool)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--type", choices=sorted(GGML_TYPES), default="q4_0")
    ap.add_argument("--shape", choices=sorted(SHAPES), default="qwen3-1.7b")
    ap.add_argument("--tokenizer", default=os.path.join("..", "shared", "tokenizers", "qwen3", "tokenizer.json"),
                    help="a Hugging Face tokenizer.json for the vocabulary (default: the shared Qwen3 one)")
    ap.add_argument("-o", "--output", required=True)
    args = ap.parse_args()

    if not os.path.exists(args.tokenizer):
        sys.exit(f"{args.tokenizer}: no such tokenizer.json (pass --tokenizer)")
    hidden, layers, heads, kv_heads, head_dim, ffn, vocab = SHAPES[args.shape]
    qtype = GGML_TYPES[args.type]
    tokens, types, merges, special_id = load_tokenizer(args.tokenizer, vocab)

    tensors = []  # (name, dims [columns, rows], ggml type)
    tensors.append(("token_embd.weight", [hidden, vocab], qtype))
    for l in range(layers):
        b = f"blk.{l}."
        tensors += [
            (b + "attn_norm.weight", [hidden], GGML_F32),
            (b + "attn_q.weight", [hidden, heads * head_dim], qtype),
            (b + "attn_k.weight", [hidden, kv_heads * head_dim], qtype),
            (b + "attn_v.weight", [hidden, kv_heads * head_dim], qtype),
            (b + "attn_q_norm.weight", [head_dim], GGML_F32),
            (b + "attn_k_norm.weight", [head_dim], GGML_F32),
            (b + "attn_output.weight", [heads * head_dim, hidden], qtype),
            (b + "ffn_norm.weight", [hidden], GGML_F32),
            (b + "ffn_gate.weight", [hidden, ffn], qtype),
            (b + "ffn_up.weight", [hidden, ffn], qtype),
            (b + "ffn_down.weight", [ffn, hidden], qtype),
        ]
    tensors.append(("output_norm.weight", [hidden], GGML_F32))

    arch = "qwen3"
    md = Metadata()
    md.string("general.architecture", arch)
    md.string("general.name", f"synthetic {args.shape} {args.type}")
    md.u32("general.alignment", ALIGN)
    md.u32(f"{arch}.context_length", 40960)
    md.u32(f"{arch}.embedding_length", hidden)
    md.u32(f"{arch}.block_count", layers)
    md.u32(f"{arch}.feed_forward_length", ffn)
    md.u32(f"{arch}.attention.head_count", heads)
    md.u32(f"{arch}.attention.head_count_kv", kv_heads)
    md.u32(f"{arch}.attention.key_length", head_dim)
    md.u32(f"{arch}.attention.value_length", head_dim)
    md.f32(f"{arch}.rope.freq_base", 1000000.0)
    md.f32(f"{arch}.attention.layer_norm_rms_epsilon", 1e-6)
    md.string("tokenizer.ggml.model", "gpt2")
    md.string("tokenizer.ggml.pre", "qwen2")
    md.strings("tokenizer.ggml.tokens", tokens)
    md.i32s("tokenizer.ggml.token_type", types)
    md.strings("tokenizer.ggml.merges", merges)
    eos = special_id("<|im_end|>")
    pad = special_id("<|endoftext|>")
    if eos >= 0:
        md.u32("tokenizer.ggml.eos_token_id", eos)
    if pad >= 0:
        md.u32("tokenizer.ggml.padding_token_id", pad)
    md.boolean("tokenizer.ggml.add_bos_token", False)

    def nbytes(dims, t):
        n = 1
        for d in dims:
            n *= d
        elements, size = BLOCKS[t]
        return n // elements * size

    infos, offsets, offset = [], [], 0
    for name, dims, t in tensors:
        infos.append(pack_string(name) + struct.pack("<I", len(dims)) + struct.pack("<%dQ" % len(dims), *dims) +
                     struct.pack("<IQ", t, offset))
        offsets.append(offset)
        offset = (offset + nbytes(dims, t) + ALIGN - 1) // ALIGN * ALIGN

    pool_blocks = 1 << 20  # 18-34 MB of random blocks, read at a rotating offset per tensor
    pool = random_pool(qtype, pool_blocks)
    block = BLOCKS[qtype][1]
    rng = random.Random(1)
    with open(args.output, "wb") as out:
        header = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), md.count) + b"".join(md.parts) + b"".join(infos)
        out.write(header)
        out.write(b"\0" * ((-len(header)) % ALIGN))
        written = 0
        for (name, dims, t), off in zip(tensors, offsets):
            out.write(b"\0" * (off - written))
            written = off
            size = nbytes(dims, t)
            if t == GGML_F32:
                data = struct.pack("<f", 1.0) * (size // 4)
                out.write(data)
            else:
                remaining = size // block
                while remaining > 0:
                    start = rng.randrange(pool_blocks)
                    take = min(remaining, pool_blocks - start)
                    out.write(pool[start * block:(start + take) * block])
                    remaining -= take
            written += size
    print(f"wrote {args.output}: {args.shape} {args.type}, {len(tensors)} tensors, "
          f"{os.path.getsize(args.output) / 1e6:.0f} MB")


if __name__ == "__main__":
    main()
