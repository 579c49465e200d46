// Hostile requests: each malformed request gets one clear error (its status, an OpenAI error
// object naming the field), nothing crashes or hangs, and the server answers normally after
// them all: bad JSON, wrong types and ranges of every field, unknown models and roles, a prompt
// longer than the context, a body over --max-body (413), deep nesting, invalid UTF-8, unknown
// paths and methods, garbage on the socket, a client that sends half a request and waits
// (closed after --timeout).
import net from "node:net";
import { check, post, run, sleep } from "./harness.mjs";

const C = "/v1/completions", CH = "/v1/chat/completions";
const msgs = [{ role: "user", content: "hi" }];
const cases = [
  [C, "{", 400, null], [C, "[]", 400, null], [C, "null", 400, null], [C, "\"prompt\"", 400, null], [C, "", 400, null],
  [C, "{\"prompt\": NaN}", 400, null], [C, {}, 400, "prompt"], [C, { prompt: 5 }, 400, "prompt"], [C, { prompt: [1, 2] }, 400, "prompt"],
  [C, { prompt: [] }, 400, "prompt"], [C, { prompt: { a: 1 } }, 400, "prompt"], [C, { prompt: "" }, 400, "prompt"],
  [C, { prompt: "x", max_tokens: 0 }, 400, "max_tokens"], [C, { prompt: "x", max_tokens: -1 }, 400, "max_tokens"],
  [C, { prompt: "x", max_tokens: "5" }, 400, "max_tokens"], [C, { prompt: "x", max_tokens: 1.5 }, 400, "max_tokens"],
  [C, { prompt: "x", max_tokens: 1e12 }, 400, "max_tokens"], [C, "{\"prompt\": \"x\", \"max_tokens\": 18446744073709551615}", 400, "max_tokens"],
  [C, { prompt: "x", max_tokens: 5000 }, 400, "max_tokens"], [C, { prompt: "x ".repeat(6000), max_tokens: 16 }, 400, "prompt"],
  [C, { prompt: "x", temperature: -1 }, 400, "temperature"], [C, { prompt: "x", temperature: "hot" }, 400, "temperature"],
  [C, "{\"prompt\": \"x\", \"temperature\": 1e400}", 400, null], [C, { prompt: "x", top_p: 0 }, 400, "top_p"],
  [C, { prompt: "x", top_p: 1.5 }, 400, "top_p"], [C, { prompt: "x", top_k: -2 }, 400, "top_k"], [C, { prompt: "x", top_k: 0.5 }, 400, "top_k"],
  [C, { prompt: "x", n: 0 }, 400, "n"], [C, { prompt: "x", n: 1000 }, 400, "n"], [C, { prompt: "x", seed: "s" }, 400, "seed"],
  [C, { prompt: "x", seed: 1.5 }, 400, "seed"], [C, { prompt: "x", stop: 5 }, 400, "stop"], [C, { prompt: "x", stop: ["a", "b", "c", "d", "e"] }, 400, "stop"],
  [C, { prompt: "x", stop: [""] }, 400, "stop"], [C, { prompt: "x", stop: [1] }, 400, "stop"], [C, { prompt: "x", stream: "yes" }, 400, "stream"],
  [C, { prompt: "x", logprobs: 9 }, 400, "logprobs"], [C, { prompt: "x", logprobs: true }, 400, "logprobs"], [C, { prompt: "x", echo: 1 }, 400, "echo"],
  [C, { prompt: "x", mode: "magic" }, 400, "mode"], [C, { prompt: "x", mode: 3 }, 400, "mode"], [C, { prompt: "x", shared_noise: "no" }, 400, "shared_noise"],
  [C, { prompt: "x", interval_levels: [1.5] }, 400, "interval_levels"], [C, { prompt: "x", interval_levels: [] }, 400, "interval_levels"],
  [C, { prompt: "x", interval_levels: "0.5" }, 400, "interval_levels"], [C, { prompt: "x", interval_levels: [0, 0.5] }, 400, "interval_levels"],
  [C, { prompt: "x", model: "gpt-4" }, 400, "model"], [C, { prompt: "x", model: 7 }, 400, "model"],
  [C, { prompt: Array(100).fill("x") }, 400, "prompt"], [C, { prompt: Array(10).fill("x"), n: 10 }, 400, "n"],
  [CH, {}, 400, "messages"], [CH, { messages: [] }, 400, "messages"], [CH, { messages: "hi" }, 400, "messages"],
  [CH, { messages: [5] }, 400, "messages[0]"], [CH, { messages: [{ role: "wizard", content: "hi" }] }, 400, "messages[0].role"],
  [CH, { messages: [{ role: "user" }] }, 400, "messages[0].content"], [CH, { messages: [{ role: "user", content: 5 }] }, 400, "messages[0].content"],
  [CH, { messages: [{ role: "user", content: [{ type: "image_url" }] }] }, 400, "messages[0].content"],
  [CH, { messages: msgs, logprobs: 3 }, 400, "logprobs"], [CH, { messages: msgs, logprobs: true, top_logprobs: 21 }, 400, "top_logprobs"], [CH, { messages: msgs, top_logprobs: 2 }, 400, "top_logprobs"],
  [CH, { messages: msgs, max_completion_tokens: 0 }, 400, "max_completion_tokens"],
  ["/v1/score", {}, 400, "text"], ["/v1/score", { text: 5 }, 400, "text"], ["/v1/score", { text: "x", interval_levels: [2] }, 400, "interval_levels"],
  ["/v1/score", { text: "x 1 ".repeat(3000) }, 400, "text"],
  [C, "[".repeat(60000), 400, null], [C, Buffer.from([0x7b, 0x22, 0x70, 0x72, 0x6f, 0x6d, 0x70, 0x74, 0x22, 0x3a, 0x22, 0xff, 0xfe, 0x22, 0x7d]), 400, null],
  [C, "x".repeat(70000), 413, null], ["/v1/nothing", { prompt: "x" }, 404, null],
];

await run(async (start) => {
  const s = await start(["--parallel", "2", "--max-body", "65536", "--timeout", "1"]);
  for (const [path, body, status, param] of cases) {
    const raw = Buffer.isBuffer(body) ? body.toString("latin1") : typeof body === "string" ? body : JSON.stringify(body);
    const what = `${path} ${raw.length > 60 ? raw.slice(0, 60) + "…" : raw}`;
    const r = await post(s.base, path, body);
    const e = r.json && r.json.error;
    check(r.status === status && e && typeof e.message === "string" && e.message.length > 0 && e.param === param &&
          typeof e.type === "string", `${what} → ${status}${param ? " naming " + param : ""}: ${e ? e.message : ""}`, r.text.slice(0, 300));
  }
  const get = await fetch(s.base + C);
  check(get.status === 404 || get.status === 405, `GET ${C} → ${get.status}`);
  // garbage on the socket, and a client that sends half a request and waits
  const garbage = await new Promise((resolve) => {
    const sock = net.connect(s.port, "127.0.0.1", () => sock.write("HELLO THERE\r\n\r\n"));
    let data = "";
    sock.on("data", (d) => (data += d));
    sock.on("close", () => resolve(data));
    sock.on("error", () => resolve(data));
    setTimeout(() => sock.destroy(), 5000);
  });
  check(/^HTTP\/1\.1 4\d\d/.test(garbage), `garbage on the socket: ${garbage.split("\r\n")[0]}`);
  const t0 = Date.now();
  let answer = "";
  const slow = await new Promise((resolve) => {
    const sock = net.connect(s.port, "127.0.0.1", () => sock.write("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"pro"));
    sock.on("data", (d) => (answer += d));
    sock.on("close", () => resolve(Date.now() - t0));
    sock.on("error", () => resolve(Date.now() - t0));
    setTimeout(() => { sock.destroy(); resolve(-1); }, 8000);
  });
  check(slow > 0 && slow < 6000 && /^HTTP\/1\.1 400/.test(answer) && answer.includes("--timeout"),
        `a client that stops half-way gets 400 after --timeout and is dropped (${slow} ms)`, answer);
  check((await fetch(s.base + "/health")).ok, "the server is healthy after them all");
  const ok = await post(s.base, C, { prompt: "the count is", max_tokens: 4 });
  check(ok.status === 200 && ok.json.choices[0].text.length > 0, "and still completes");
});
