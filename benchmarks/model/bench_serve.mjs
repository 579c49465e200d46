// Load generator for `causalqwen serve` (plain Node, no package): for each N, N concurrent
// streamed completions of the same prompt (seeds 0 … N−1, deterministic mode, max_tokens T).
// It prints, per N: aggregate generated tokens per second (all streams' tokens over the wall
// time from the first request to the last [DONE]), its ratio to N = 1's, the time to first
// token and the gaps between pieces (p50, p99 over all streams). The token counts are the
// usage of the same requests sent whole (a choice's streamed pieces are its whole answer), so
// they are exact; a gap is between two pieces of text, one per token except where a token
// renders no text of its own. The whole requests go out all at once (they also warm the server
// up, and leave the prompt in the slots for servers with a prefix cache); the prompt tokens the
// server reports in their usage are printed too.
//
//   node benchmarks/model/bench_serve.mjs --base http://127.0.0.1:8080 [--n 1,4,8,16] [--tokens 64]
//                                   [--prompt TEXT] [--extra JSON] [--json FILE]
//   --extra JSON: fields added to every request (e.g. '{"ignore_eos": true}' for llama.cpp's
//   llama-server, which then writes max_tokens tokens per stream; causalqwen serve ignores it;
//   '{"prompt": [1, 2, 3]}' sends token ids instead of the text to a server that takes them)
//   --json FILE: the rows also written there as JSON (with every TTFT and gap, in ms)
//   node benchmarks/model/bench_serve.mjs --cli build/bin/causalqwen --model DIR [--serve-args "..."] …
//     (starts the server on a free port with --parallel max(N), and stops it at the end)
import { spawn } from "node:child_process";
import net from "node:net";

const args = Object.fromEntries(process.argv.slice(2).reduce((acc, a, i, all) => {
  if (a.startsWith("--")) acc.push([a.slice(2), all[i + 1]]);
  return acc;
}, []));
const counts = (args.n ?? "1,4,8,16").split(",").map(Number);
const tokens = Number(args.tokens ?? 64);
const prompt = args.prompt ?? "The total is 12 and the price is";
const extra = JSON.parse(args.extra ?? "{}");
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const quantile = (xs, q) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? s[Math.min(s.length - 1, Math.floor(q * s.length))] : NaN;
};

async function freePort() {
  return new Promise((resolve) => {
    const s = net.createServer();
    s.listen(0, "127.0.0.1", () => { const p = s.address().port; s.close(() => resolve(p)); });
  });
}

let base = args.base, server = null;
if (!base) {
  const port = await freePort();
  const extra = (args["serve-args"] ?? "").split(" ").filter(Boolean);
  server = spawn(args.cli, ["serve", "--model", args.model, "--port", String(port), "--parallel", String(Math.max(...counts)),
                            ...extra], { stdio: ["ignore", "inherit", "inherit"] });
  base = `http://127.0.0.1:${port}`;
  for (let i = 0; i < 1200; ++i) {
    try { if ((await fetch(base + "/health")).ok) break; } catch {}
    await sleep(100);
  }
}

const body = (seed) => ({ prompt, max_tokens: tokens, seed, mode: "deterministic", ...extra });
async function one(seed, t0) {
  const res = await fetch(base + "/v1/completions", {
    method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ ...body(seed), stream: true }),
  });
  const reader = res.body.getReader(), dec = new TextDecoder();
  let buf = "", first = null, last = null;
  const gaps = [];
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buf += dec.decode(value, { stream: true });
    let cut;
    while ((cut = buf.indexOf("\n\n")) >= 0) {
      const line = buf.slice(0, cut);
      buf = buf.slice(cut + 2);
      if (line === "data: [DONE]") continue;
      const c = JSON.parse(line.slice(6)).choices[0];
      if (!c.text) continue;
      const now = performance.now();
      if (first === null) first = now - t0;
      else gaps.push(now - last);
      last = now;
    }
  }
  return { ttft: first, gaps, end: performance.now() };
}

// warm up, and the exact token counts of every seed
const used = {}, promptTokens = new Set();
await Promise.all(Array.from({ length: Math.max(...counts) }, async (_, seed) => {
  const res = await fetch(base + "/v1/completions", {
    method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body(seed)),
  });
  const r = await res.json();
  if (!res.ok || !r.usage) throw new Error(`bench_serve.mjs: ${base}/v1/completions answered ${res.status}: ${JSON.stringify(r)}`);
  used[seed] = r.usage.completion_tokens;
  promptTokens.add(r.usage.prompt_tokens);
}));
const shown = typeof body(0).prompt === "string" ? `"${body(0).prompt}"` : JSON.stringify(body(0).prompt);
console.log(`prompt ${shown} (${[...promptTokens].join(", ")} prompt tokens as the server counts them), ` +
            `max_tokens ${tokens}, completion tokens per stream ${Math.min(...Object.values(used))}…` +
            `${Math.max(...Object.values(used))}, deterministic mode, ${base}`);
console.log("   N   tokens/s   ×N=1   TTFT p50 ms   TTFT p99 ms   gap p50 ms   gap p99 ms");
let single = null;
const rows = [];
for (const n of counts) {
  const t0 = performance.now();
  const runs = await Promise.all(Array.from({ length: n }, (_, seed) => one(seed, t0)));
  const wall = (Math.max(...runs.map((r) => r.end)) - t0) / 1000;
  let total = 0;
  for (let seed = 0; seed < n; ++seed) total += used[seed];
  const rate = total / wall;
  single ??= rate;
  const ttft = runs.map((r) => r.ttft), gaps = runs.flatMap((r) => r.gaps);
  rows.push({ n, tokens: total, wall_s: wall, tokens_per_s: rate, ttft_ms: ttft, gap_ms: gaps });
  console.log(`${String(n).padStart(4)} ${rate.toFixed(1).padStart(10)} ${(rate / single).toFixed(2).padStart(6)} ` +
              `${quantile(ttft, 0.5).toFixed(1).padStart(13)} ${quantile(ttft, 0.99).toFixed(1).padStart(13)} ` +
              `${quantile(gaps, 0.5).toFixed(1).padStart(12)} ${quantile(gaps, 0.99).toFixed(1).padStart(12)}`);
}
if (args.json) {
  const { writeFileSync } = await import("node:fs");
  writeFileSync(args.json, JSON.stringify({ base, prompt: body(0).prompt, max_tokens: tokens, prompt_tokens: [...promptTokens],
                                            completion_tokens: used, rows }));
}
if (server) server.kill("SIGTERM");
