// Shared by the server tests: a free loopback port, a `causalqwen serve` started on it (and
// stopped with SIGTERM, which must end it with status 0 within 5 s), checks that print one line
// each, and server-sent events read back.
import { spawn } from "node:child_process";
import net from "node:net";

export const CLI = process.env.CQ_CLI;
export const WORK = process.env.CQ_WORK;
export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

export function check(cond, what, detail = "") {
  if (!cond) throw new Error(`FAILED: ${what}${detail ? "\n  " + detail : ""}`);
  console.log(`ok - ${what}`);
}

export function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.on("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const port = s.address().port;
      s.close(() => resolve(port));
    });
  });
}

/// Starts the server on a free port and waits (at most 20 s) until /health answers.
export async function startServer(args = [], model = `${WORK}/model`) {
  const port = await freePort();
  const proc = spawn(CLI, ["serve", "--model", model, "--port", String(port), "--name", "tiny", ...args],
                     { stdio: ["ignore", "pipe", "pipe"] });
  let log = "";
  proc.stdout.on("data", (d) => (log += d));
  proc.stderr.on("data", (d) => (log += d));
  const exited = new Promise((r) => proc.on("exit", (code, signal) => r({ code, signal })));
  const base = `http://127.0.0.1:${port}`;
  let up = false;
  for (let i = 0; i < 400 && !up; ++i) {
    if (proc.exitCode !== null) throw new Error(`the server exited at start:\n${log}`);
    try {
      up = (await fetch(base + "/health")).ok;
    } catch {
      await sleep(50);
    }
  }
  if (!up) {
    proc.kill("SIGKILL");
    throw new Error(`the server did not answer /health within 20 s:\n${log}`);
  }
  return {
    port, base, proc, exited,
    log: () => log,
    /// SIGTERM; resolves to {code, signal, ms}; kills it and throws when it takes more than 5 s.
    async stop() {
      if (proc.exitCode !== null) return { code: proc.exitCode, signal: null, ms: 0 };
      const t0 = Date.now();
      proc.kill("SIGTERM");
      const r = await Promise.race([exited, sleep(5000).then(() => null)]);
      if (!r) {
        proc.kill("SIGKILL");
        throw new Error(`the server did not exit within 5 s of SIGTERM:\n${log}`);
      }
      return { ...r, ms: Date.now() - t0 };
    },
  };
}

/// POST `body` (an object, or a string sent as is) as JSON.
export async function post(base, path, body, headers = {}) {
  const res = await fetch(base + path, {
    method: "POST",
    headers: { "Content-Type": "application/json", ...headers },
    body: typeof body === "string" || Buffer.isBuffer(body) ? body : JSON.stringify(body),
  });
  const text = await res.text();
  let json = null;
  try { json = JSON.parse(text); } catch {}
  return { status: res.status, headers: res.headers, text, json };
}

/// A streamed request's events: the parsed chunks, and whether [DONE] ended them.
export async function postStream(base, path, body, { signal, onChunk } = {}) {
  const res = await fetch(base + path, {
    method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ ...body, stream: true }), signal,
  });
  if (!res.ok) return { status: res.status, chunks: [], done: false, json: await res.json().catch(() => null), headers: res.headers };
  const reader = res.body.getReader(), dec = new TextDecoder();
  let buf = "", done = false;
  const chunks = [];
  for (;;) {
    const { value, done: end } = await reader.read();
    if (end) break;
    buf += dec.decode(value, { stream: true });
    let cut;
    while ((cut = buf.indexOf("\n\n")) >= 0) {
      const line = buf.slice(0, cut);
      buf = buf.slice(cut + 2);
      if (!line.startsWith("data: ")) throw new Error(`not an SSE data line: ${line}`);
      if (line === "data: [DONE]") { done = true; continue; }
      const chunk = JSON.parse(line.slice(6));
      chunks.push(chunk);
      if (onChunk) onChunk(chunk);
    }
  }
  return { status: res.status, chunks, done, headers: res.headers };
}

/// The streamed pieces of each choice put together: {text, numbers, finish_reason} by index.
export function joinChunks(chunks, chat = false) {
  const out = {};
  for (const c of chunks)
    for (const ch of c.choices) {
      const o = (out[ch.index] ??= { text: "", numbers: [], finish_reason: null });
      o.text += chat ? (ch.delta.content ?? "") : ch.text;
      if (ch.numbers) o.numbers.push(...ch.numbers);
      if (ch.finish_reason) o.finish_reason = ch.finish_reason;
    }
  return out;
}

/// Runs `body` and stops the servers it started, printing the error and exiting 1 on failure.
export async function run(body) {
  const servers = [];
  const start = async (...a) => { const s = await startServer(...a); servers.push(s); return s; };
  try {
    await body(start);
    for (const s of servers) {
      const r = await s.stop();
      check(r.code === 0, `the server exits with status 0 on SIGTERM (${r.ms} ms)`, JSON.stringify(r));
    }
  } catch (e) {
    console.error(e.stack || String(e));
    for (const s of servers) {
      try { await s.stop(); } catch {}
      console.error("--- server log ---\n" + s.log());
    }
    process.exit(1);
  }
}
