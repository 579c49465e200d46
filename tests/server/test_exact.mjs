// Byte for byte: the server's completion equals `causalqwen generate --json`'s text for the same
// prompt, mode, settings and seed (every mode; a list of prompts = generate's --prompts, prompt
// i on stream i); the streamed pieces joined equal the whole answer; n choices of one prompt are
// streams 0 … n−1, so choice 0 of n = 3 is the n = 1 answer. The prompts are sent once first,
// so that every answer compared starts from the kept prompts (the prefix cache, counted in
// /metrics) and still equals generate's.
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import { CLI, WORK, check, joinChunks, post, postStream, run } from "./harness.mjs";

const prompts = ["The total is 12 and the price is", "user asks, assistant answers: the count is"];
const cases = [
  { mode: "deterministic", args: [], body: {} },
  { mode: "sampling", args: ["--temperature", "0.8"], body: { temperature: 0.8 } },
  { mode: "causal", args: [], body: {} },
  { mode: "compatible", args: ["--temperature", "0.7", "--top-k", "8"], body: { temperature: 0.7, top_k: 8 } },
];
const maxTokens = 20, seed = 9;

function generate(mode, args, file) {
  const out = execFileSync(CLI, ["generate", "--model", `${WORK}/model`, "--prompts", file, "--mode", mode, "--max-new-tokens",
                                 String(maxTokens), "--seed", String(seed), "--json", ...args], { encoding: "utf8" });
  return out.trim().split("\n").map((l) => JSON.parse(l));
}

await run(async (start) => {
  const s = await start(["--parallel", "3"]);
  const file = `${WORK}/exact_prompts.jsonl`;
  fs.writeFileSync(file, prompts.map((p) => JSON.stringify(p)).join("\n") + "\n");
  const reused = async () => {
    const m = await (await fetch(s.base + "/metrics")).text();
    return Number(m.split("\n").find((l) => l.startsWith("causalqwen_prompt_tokens_reused_total ")).split(" ")[1]);
  };
  check((await post(s.base, "/v1/completions", { prompt: prompts, max_tokens: 1 })).status === 200, "the prompts sent once");
  check(await reused() === 0, "nothing reused yet");
  let numbers = 0;
  for (const c of cases) {
    const expected = generate(c.mode, c.args, file);
    const body = { prompt: prompts, max_tokens: maxTokens, seed, mode: c.mode, ...c.body };
    const whole = await post(s.base, "/v1/completions", body);
    check(whole.status === 200, `${c.mode}: 200`, whole.text);
    for (let i = 0; i < prompts.length; ++i) {
      const got = whole.json.choices[i];
      check(got.text === expected[i].text, `${c.mode}, prompt ${i}: the server's text = generate's, byte for byte`,
            JSON.stringify([got.text, expected[i].text]));
      check(got.numbers.length === expected[i].numbers.length, `${c.mode}, prompt ${i}: as many numbers as generate's`);
      got.numbers.forEach((n, k) => check(n.value === expected[i].numbers[k].value && n.scale === expected[i].numbers[k].scale,
                                          `${c.mode}, prompt ${i}, number ${k}: value and scale = generate's`));
      numbers += got.numbers.length;
    }
    const streamed = await postStream(s.base, "/v1/completions", body);
    check(streamed.done, `${c.mode}: the stream ends with [DONE]`);
    const joined = joinChunks(streamed.chunks);
    for (let i = 0; i < prompts.length; ++i) {
      const w = whole.json.choices[i];
      check(joined[i].text === w.text && JSON.stringify(joined[i].numbers) === JSON.stringify(w.numbers) &&
            joined[i].finish_reason === w.finish_reason, `${c.mode}, prompt ${i}: streamed = not streamed`);
    }
  }
  check(numbers > 0, `numbers were compared (${numbers})`);
  const r = await reused();
  check(r > 0, `the answers compared reused kept prompts (${r} tokens)`);
  const three = await post(s.base, "/v1/completions", { prompt: prompts[0], max_tokens: maxTokens, seed, mode: "sampling", n: 3 });
  const one = await post(s.base, "/v1/completions", { prompt: prompts[0], max_tokens: maxTokens, seed, mode: "sampling" });
  check(three.json.choices.length === 3 && three.json.choices[0].text === one.json.choices[0].text, "n = 3: choice 0 is the n = 1 answer");
  check(new Set(three.json.choices.map((c) => c.text)).size > 1, "n = 3: the choices differ (streams of their own)");
  const echo = await post(s.base, "/v1/completions", { prompt: prompts[0], max_tokens: maxTokens, seed, echo: true });
  const plain = await post(s.base, "/v1/completions", { prompt: prompts[0], max_tokens: maxTokens, seed });
  check(echo.json.choices[0].text === prompts[0] + plain.json.choices[0].text, "echo puts the prompt first");
  const lp = await post(s.base, "/v1/completions", { prompt: prompts[0], max_tokens: maxTokens, seed, logprobs: 0 });
  const l = lp.json.choices[0].logprobs;
  check(l.tokens.join("") === lp.json.choices[0].text && l.token_logprobs.every((x) => x < 0) && l.top_logprobs === null,
        "logprobs: the tokens and their log P");
  const full = plain.json.choices[0].text, stopString = full.slice(2, 4), cut = full.indexOf(stopString) + stopString.length;
  const stop = await post(s.base, "/v1/completions", { prompt: prompts[0], max_tokens: maxTokens, seed, stop: [stopString] });
  check(stop.json.choices[0].text === full.slice(0, cut) && stop.json.choices[0].finish_reason === "stop",
        "stop: the text is cut after the stop string", JSON.stringify([stop.json.choices[0].text, plain.json.choices[0].text]));
});
