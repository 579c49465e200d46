// The official OpenAI client library against `causalqwen serve`: models, a completion, a
// streamed completion (its pieces joined = the whole answer, numbers included), a chat
// completion (streamed and whole), errors as the client reads them (400 with the field, 401
// without the key), the extension fields read back (each number's text at its offset, its
// intervals around loc), a model without a recognised chat template refused naming the file,
// /v1/score and /metrics; logprobs with top lists (completions' logprobs = N, chat's
// top_logprobs = N), whole and streamed, the streamed entries joined = the whole answer's.
import OpenAI from "openai";
import { check, post, run, WORK } from "./harness.mjs";

await run(async (start) => {
  const s = await start(["--parallel", "4", "--api-key", "sekrit"]);
  const client = new OpenAI({ baseURL: s.base + "/v1", apiKey: "sekrit", maxRetries: 0 });
  const models = await client.models.list();
  check(models.data.length === 1 && models.data[0].id === "tiny", "models.list names the served model");

  // a completion holding at least one number (a few seeds of the sampling mode tried)
  let c = null, req = null;
  for (let seed = 0; seed < 40 && !(c && c.choices[0].numbers.length); ++seed) {
    req = { model: "tiny", prompt: "The total is 12 and the price is", max_tokens: 24, seed, mode: "sampling" };
    c = await client.completions.create(req);
  }
  const choice = c.choices[0];
  check(c.object === "text_completion" && typeof choice.text === "string" && choice.text.length > 0, "a completion");
  check(["stop", "length"].includes(choice.finish_reason), "finish_reason is stop or length");
  check(c.usage.completion_tokens > 0 && c.usage.total_tokens === c.usage.prompt_tokens + c.usage.completion_tokens, "usage");
  check(choice.numbers.length > 0, `the completion holds numbers (seed ${req.seed})`, choice.text);
  const bytes = Buffer.from(choice.text, "utf8");
  for (const n of choice.numbers) {
    check(bytes.subarray(n.text_offset, n.text_offset + Buffer.byteLength(n.text)).toString() === n.text,
          `number "${n.text}" sits at its text_offset ${n.text_offset}`);
    check(n.value === n.loc && n.scale > 0 && n.p_num >= 0 && n.p_num <= 1, "value, loc, scale, p_num");
    const [lo5, hi5] = n.intervals["0.5"], [lo9, hi9] = n.intervals["0.9"];
    check(lo9 < lo5 && lo5 < n.loc && n.loc < hi5 && hi5 < hi9, "the 0.5 interval inside the 0.9 one, around loc");
    check(Math.abs((hi5 - lo5) / 2 - n.scale) <= 1e-9 * Math.max(1, n.scale), "the 0.5 interval is loc ± scale");
  }

  // the same request streamed: the pieces put together are the answer
  const stream = await client.completions.create({ ...req, stream: true });
  let joined = "", numbers = [], finish = null;
  for await (const chunk of stream) {
    joined += chunk.choices[0].text;
    if (chunk.choices[0].numbers) numbers.push(...chunk.choices[0].numbers);
    if (chunk.choices[0].finish_reason) finish = chunk.choices[0].finish_reason;
  }
  check(joined === choice.text, "streamed text joined = the whole answer", JSON.stringify([joined, choice.text]));
  check(JSON.stringify(numbers) === JSON.stringify(choice.numbers), "streamed numbers = the whole answer's");
  check(finish === choice.finish_reason, "the last chunk carries the finish_reason");

  // custom interval levels
  const levels = await client.completions.create({ ...req, interval_levels: [0.8] });
  check(Object.keys(levels.choices[0].numbers[0].intervals).join() === "0.8", "interval_levels chooses the intervals");

  // logprobs: the renormalised OvR probabilities; in the deterministic mode the emitted token is
  // the likeliest class, so its logprob heads its top list
  const lpReq = { model: "tiny", prompt: "The total is 12 and the price is", max_tokens: 12, seed: 1, logprobs: 3 };
  const lpWhole = (await client.completions.create(lpReq)).choices[0];
  const L = lpWhole.logprobs;
  check(L.tokens.join("") === lpWhole.text && L.tokens.length === L.token_logprobs.length &&
        L.top_logprobs.length === L.tokens.length && L.text_offset.length === L.tokens.length, "logprobs: one entry per token");
  L.token_logprobs.forEach((lp, i) => {
    const top = Object.values(L.top_logprobs[i]);
    const mass = top.reduce((a, x) => a + Math.exp(x), 0);
    check(lp <= 0 && top.length >= 1 && top.length <= 3 && Math.max(...top) === lp && mass <= 1 + 1e-12,
          `logprobs, token ${i}: log P ≤ 0 heads its top list of ≤ 3, the list's mass ≤ 1`, JSON.stringify([lp, L.top_logprobs[i]]));
  });
  check(L.text_offset.every((o, i) => o === Buffer.byteLength(L.tokens.slice(0, i).join(""))),
        "logprobs: each text_offset is the bytes of the pieces before it", JSON.stringify(L.text_offset));
  const lpStream = await client.completions.create({ ...lpReq, stream: true });
  const joinedLp = { tokens: [], token_logprobs: [], top_logprobs: [], text_offset: [] };
  for await (const chunk of lpStream) {
    const l = chunk.choices[0].logprobs;
    if (l) for (const k of Object.keys(joinedLp)) joinedLp[k].push(...l[k]);
  }
  check(Object.keys(joinedLp).every((k) => JSON.stringify(joinedLp[k]) === JSON.stringify(L[k])),
        "streamed logprobs joined = the whole answer's", JSON.stringify([joinedLp, L]));

  // chat
  const messages = [{ role: "system", content: "answer with a number" }, { role: "user", content: "the count is" }];
  const chat = await client.chat.completions.create({ model: "tiny", messages, max_tokens: 16, seed: 5 });
  check(chat.object === "chat.completion" && chat.choices[0].message.role === "assistant" &&
        typeof chat.choices[0].message.content === "string", "a chat completion");
  const chatStream = await client.chat.completions.create({ model: "tiny", messages, max_tokens: 16, seed: 5, stream: true });
  let chatJoined = "", role = null;
  for await (const chunk of chatStream) {
    chatJoined += chunk.choices[0].delta.content ?? "";
    role ??= chunk.choices[0].delta.role;
  }
  check(role === "assistant" && chatJoined === chat.choices[0].message.content, "streamed chat joined = the whole chat answer");
  const chatLpReq = { model: "tiny", messages, max_tokens: 10, seed: 5, logprobs: true, top_logprobs: 2 };
  const chatLp = (await client.chat.completions.create(chatLpReq)).choices[0];
  const content = chatLp.logprobs.content;
  check(content.map((e) => e.token).join("") === chatLp.message.content, "chat logprobs: the tokens make the answer");
  check(content.every((e) => e.top_logprobs.length === 2 && e.top_logprobs[0].logprob === e.logprob &&
                             e.top_logprobs[0].logprob >= e.top_logprobs[1].logprob && e.logprob <= 0 &&
                             Buffer.from(e.bytes).toString() === e.token),
        "chat logprobs: top_logprobs 2, the emitted token first, bytes = its text", JSON.stringify(content[0]));
  const chatLpStream = await client.chat.completions.create({ ...chatLpReq, stream: true });
  const chatJoinedLp = [];
  for await (const chunk of chatLpStream) if (chunk.choices[0].logprobs) chatJoinedLp.push(...chunk.choices[0].logprobs.content);
  check(JSON.stringify(chatJoinedLp) === JSON.stringify(content), "streamed chat logprobs joined = the whole answer's");
  const causal = (await client.completions.create({ ...lpReq, mode: "causal" })).choices[0].logprobs;
  check(causal.token_logprobs.every((x) => x === null), "causal mode: no logprob (an individual's scores)");

  // errors as the client sees them
  try {
    await client.completions.create({ model: "tiny", prompt: "x", max_tokens: 0 });
    check(false, "max_tokens 0 is refused");
  } catch (e) {
    check(e instanceof OpenAI.APIError && e.status === 400 && e.param === "max_tokens" && /max_tokens/.test(e.message),
          "max_tokens 0: 400 naming max_tokens", String(e));
  }
  try {
    await client.completions.create({ model: "gpt-4", prompt: "x" });
    check(false, "an unknown model is refused");
  } catch (e) {
    check(e.status === 400 && e.param === "model", "an unknown model: 400 naming model", String(e));
  }
  try {
    await new OpenAI({ baseURL: s.base + "/v1", apiKey: "wrong", maxRetries: 0 }).models.list();
    check(false, "a wrong key is refused");
  } catch (e) {
    check(e.status === 401, "a wrong API key: 401", String(e));
  }
  check((await post(s.base, "/v1/completions", { prompt: "x" })).status === 401, "no API key: 401");

  // /v1/score
  const auth = { Authorization: "Bearer sekrit" };
  const sc = await post(s.base, "/v1/score", { text: "The total is 12 and the price is 40 dollars.", interval_levels: [0.9] }, auth);
  check(sc.status === 200 && sc.json.numbers.length === 2, "score: both numbers scored", sc.text);
  for (const n of sc.json.numbers)
    check(n.pit > 0 && n.pit < 1 && Number.isFinite(n.nll) && n.scale > 0 && n.intervals["0.9"].length === 2,
          `score of "${n.text}": PIT in (0, 1), a finite NLL, an interval`);
  check(sc.json.numbers[1].text === "40" && sc.json.numbers[1].text_offset === 33, "score: text and offset of a number");

  // /metrics
  const m = await (await fetch(s.base + "/metrics", { headers: auth })).text();
  for (const name of ["causalqwen_requests_total{endpoint=\"/v1/completions\",status=\"200\"}", "causalqwen_generated_tokens_total",
                      "causalqwen_queue_length", "causalqwen_time_to_first_token_seconds_bucket", "causalqwen_inter_token_seconds_count"])
    check(m.includes(name), `/metrics has ${name}`);

  // a model without a recognised chat template
  const plain = await start(["--parallel", "1"], `${WORK}/model_nochat`);
  const r = await post(plain.base, "/v1/chat/completions", { messages });
  check(r.status === 400 && /tokenizer_config\.json/.test(r.json.error.message), "no chat template: 400 naming tokenizer_config.json",
        r.text);
  check((await post(plain.base, "/v1/completions", { prompt: "the count is", max_tokens: 4 })).status === 200,
        "that model still completes");
});
