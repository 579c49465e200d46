// Continuous batching seen from outside: 32 requests from 8 clients at once (streamed and not,
// every mode, several seeds) get the answers they get alone; a client killed mid-stream frees
// its slot (the server cancels it and goes on answering), and so does a client of a whole answer
// that closes its connection before the answer; a full queue answers 503 with
// Retry-After; SIGTERM during a stream ends the server with status 0 within 5 s.
import { spawn } from "node:child_process";
import { check, joinChunks, post, postStream, run, sleep } from "./harness.mjs";

const modes = ["deterministic", "sampling", "causal", "compatible"];
const request = (i) => ({
  prompt: i % 2 ? "The total is 12 and the price is" : "user asks, assistant answers: the count is " + (i % 5),
  max_tokens: 8 + (i * 5) % 17, seed: i % 7, mode: modes[i % 4], temperature: i % 4 === 3 ? 0.7 : 1,
});
const metric = async (base, name) => {
  const m = await (await fetch(base + "/metrics")).text();
  const line = m.split("\n").find((l) => l.startsWith(name + " "));
  return line ? Number(line.split(" ")[1]) : NaN;
};

await run(async (start) => {
  const s = await start(["--parallel", "10", "--max-queue", "64"]);
  const alone = [];
  for (let i = 0; i < 32; ++i) alone.push((await post(s.base, "/v1/completions", request(i))).json.choices[0]);
  const together = new Array(32);
  await Promise.all(Array.from({ length: 8 }, async (_, client) => {
    for (let k = 0; k < 4; ++k) {
      const i = client * 4 + k;
      if (k % 2) together[i] = joinChunks((await postStream(s.base, "/v1/completions", request(i))).chunks)[0];
      else together[i] = (await post(s.base, "/v1/completions", request(i))).json.choices[0];
    }
  }));
  for (let i = 0; i < 32; ++i)
    check(together[i].text === alone[i].text && JSON.stringify(together[i].numbers) === JSON.stringify(alone[i].numbers),
          `request ${i} (${request(i).mode}) answered together = alone`, JSON.stringify([together[i].text, alone[i].text]));

  // a client killed mid-stream: a process of its own, SIGKILLed after its first chunk
  const before = await metric(s.base, "causalqwen_cancelled_total");
  const script = `const r = await fetch(${JSON.stringify(s.base + "/v1/completions")}, {method: "POST",
    headers: {"Content-Type": "application/json"}, body: JSON.stringify({prompt: "the count is", max_tokens: 3000, stream: true})});
    const rd = r.body.getReader(); await rd.read(); console.log("first"); setInterval(() => {}, 1000);`;
  const child = spawn(process.execPath, ["--input-type=module", "-e", script], { stdio: ["ignore", "pipe", "inherit"] });
  await new Promise((r) => child.stdout.once("data", r));
  child.kill("SIGKILL");
  let cancelled = before;
  for (let i = 0; i < 100 && cancelled === before; ++i) {
    await sleep(50);
    cancelled = await metric(s.base, "causalqwen_cancelled_total");
  }
  check(cancelled === before + 1, "a client killed mid-stream: its choice is cancelled");
  let busy = 1;
  for (let i = 0; i < 100 && busy !== 0; ++i) {
    await sleep(20);
    busy = await metric(s.base, "causalqwen_slots_busy");
  }
  check(busy === 0, "…and its slot is free");
  check((await post(s.base, "/v1/completions", request(3))).json.choices[0].text === alone[3].text, "…and the server answers as before");

  // a client of a whole (not streamed) answer killed while its choice decodes
  const before2 = await metric(s.base, "causalqwen_cancelled_total");
  const whole = `await fetch(${JSON.stringify(s.base + "/v1/completions")}, {method: "POST",
    headers: {"Content-Type": "application/json"}, body: JSON.stringify({prompt: "the count is", max_tokens: 3000})});`;
  const waiter = spawn(process.execPath, ["--input-type=module", "-e", whole], { stdio: ["ignore", "ignore", "inherit"] });
  let running = 0;
  for (let i = 0; i < 200 && running === 0; ++i) {
    await sleep(20);
    running = await metric(s.base, "causalqwen_slots_busy");
  }
  check(running === 1, "a whole answer of 3000 tokens decodes");
  waiter.kill("SIGKILL");
  let cancelled2 = before2;
  for (let i = 0; i < 100 && cancelled2 === before2; ++i) {
    await sleep(50);
    cancelled2 = await metric(s.base, "causalqwen_cancelled_total");
  }
  check(cancelled2 === before2 + 1, "its client killed: the choice is cancelled");
  busy = 1;
  for (let i = 0; i < 100 && busy !== 0; ++i) {
    await sleep(20);
    busy = await metric(s.base, "causalqwen_slots_busy");
  }
  check(busy === 0, "…and its slot is free");

  // a full queue: 1 slot, 1 place in the queue
  const q = await start(["--parallel", "1", "--max-queue", "1"]);
  const over = await post(q.base, "/v1/completions", { prompt: "the count is", max_tokens: 4, n: 3 });
  check(over.status === 503 && over.headers.get("retry-after") === "1" && over.json.error.type === "server_error",
        "3 choices for 1 slot + 1 queued: 503 with Retry-After", over.text);
  const controllers = Array.from({ length: 6 }, () => new AbortController());
  const results = await Promise.all(controllers.map((c, i) =>
    postStream(q.base, "/v1/completions", { prompt: "the count is", max_tokens: 3000, seed: i },
               { signal: c.signal, onChunk: () => c.abort() }).catch((e) => ({ status: e.name === "AbortError" ? "aborted" : String(e) }))));
  const refused = results.filter((r) => r.status === 503);
  check(refused.length >= 1 && refused.every((r) => r.headers.get("retry-after") === "1"),
        `6 long streams at once on 1 slot + 1 queued: ${refused.length} refused with 503 and Retry-After`,
        JSON.stringify(results.map((r) => r.status)));
  check(results.every((r) => r.status === 503 || r.status === "aborted"), "the others stream (then their clients leave)");

  // SIGTERM during a stream
  const t = await start(["--parallel", "2"]);
  let first;
  const got = new Promise((r) => (first = r));
  const streaming = postStream(t.base, "/v1/completions", { prompt: "the count is", max_tokens: 3000 }, { onChunk: () => first() })
    .then(() => "ended").catch(() => "broken");
  await got;
  const stopped = await t.stop();
  check(stopped.code === 0 && stopped.ms < 5000, `SIGTERM during a stream: exit 0 in ${stopped.ms} ms`, JSON.stringify(stopped));
  const end = await Promise.race([streaming, sleep(5000).then(() => "hung")]);
  check(end !== "hung", `the client's stream ended (${end})`);
});
