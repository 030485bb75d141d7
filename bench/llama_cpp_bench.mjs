// llama.cpp timed like llama-bench, for bench/compare_llama_cpp.sh: through node-llama-cpp (npm), whose
// prebuilt llama.cpp libraries pick the best CPU variant at run time (AVX2 here, AVX-512 where present)
// and repack Q4_0 for it, as a llama.cpp build does. pp: one batch of P random tokens into an empty
// cache; tg: N single-token greedy decodes from an empty cache (llama-bench's pp/tg tests).
//   node llama_cpp_bench.mjs --model FILE.gguf [--p 64] [--n 32] [--t 1,2] [--r 3]
// Prints one JSON array in kestrel-bench's shape (test, threads, backend, tokens_per_second, stddev).
import {getLlama, LlamaLogLevel} from "node-llama-cpp";

const argv = process.argv.slice(2);
const opt = {};
for (let i = 0; i + 1 < argv.length; i += 2) {
  if (!argv[i].startsWith("--")) throw new Error(`unexpected argument '${argv[i]}'`);
  opt[argv[i].slice(2)] = argv[i + 1];
}
if (!opt.model) throw new Error("usage: node llama_cpp_bench.mjs --model FILE.gguf [--p 64] [--n 32] [--t 1,2] [--r 3]");
const P = Number(opt.p ?? 64), N = Number(opt.n ?? 32), R = Number(opt.r ?? 3);
const threadsList = (opt.t ?? "1,2").split(",").map(Number);

const llama = await getLlama({gpu: false, logLevel: LlamaLogLevel.error, maxThreads: Math.max(...threadsList)});
console.error(`llama.cpp ${llama.llamaCppRelease.release}: ${llama.systemInfo.trim()}`);
const model = await llama.loadModel({modelPath: opt.model});
const mean = x => x.reduce((s, v) => s + v, 0) / x.length;
const stddev = x => {
  const m = mean(x);
  return x.length > 1 ? Math.sqrt(x.reduce((s, v) => s + (v - m) ** 2, 0) / (x.length - 1)) : 0;
};
let seed = 12345;
const randomToken = () => (seed = (seed * 1103515245 + 12345) % 2147483648) % 100000 + 1000;

const results = [];
for (const threads of threadsList) {
  const context = await model.createContext({contextSize: 512, batchSize: 512, threads: {ideal: threads, min: threads}});
  const sequence = context.getSequence();
  const tests = [];
  if (P > 0) {
    tests.push(["pp" + P, async () => {
      await sequence.evaluateWithoutGeneratingNewTokens(Array.from({length: P}, randomToken));
      return P;
    }]);
  }
  if (N > 0) {
    tests.push(["tg" + N, async () => {
      let generated = 0;
      for await (const token of sequence.evaluate([randomToken()], {temperature: 0})) {
        if (++generated >= N) break;
      }
      return generated;
    }]);
  }
  for (const [test, run] of tests) {
    await sequence.clearHistory();
    await run();  // warm-up, as llama-bench does
    const rates = [];
    for (let r = 0; r < R; ++r) {
      await sequence.clearHistory();
      const start = process.hrtime.bigint();
      const tokens = await run();
      rates.push(tokens / (Number(process.hrtime.bigint() - start) / 1e9));
    }
    results.push({test, threads, backend: "llama.cpp", tokens_per_second: mean(rates), stddev: stddev(rates)});
  }
  await context.dispose();
}
console.log(JSON.stringify(results));
process.exit(0);
