// The page `causalqwen serve` answers at /: a prompt box, the decoding mode and temperature, the
// continuation streamed in from /v1/completions; every generated number highlighted, and on
// hover or click its Cauchy density drawn on a canvas with the central 50 % and 90 % intervals
// shaded and P(<NUM>) shown. Plain HTML, CSS and JavaScript, nothing fetched from elsewhere.
#pragma once

namespace cqcli {

inline constexpr const char* serve_page_html = R"HTML(<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>causalqwen</title>
<style>
  body { font: 15px/1.5 system-ui, sans-serif; max-width: 60rem; margin: 2rem auto; padding: 0 1rem; color: #222; }
  textarea { width: 100%; height: 6rem; font: inherit; }
  .row { display: flex; gap: 1rem; align-items: center; flex-wrap: wrap; margin: .5rem 0; }
  #output { white-space: pre-wrap; border: 1px solid #ccc; border-radius: 4px; padding: .75rem; min-height: 4rem; }
  #output .prompt { color: #777; }
  mark.num { background: #ffe08a; border-radius: 3px; padding: 0 2px; cursor: pointer; }
  mark.num.active { background: #ffb347; }
  #plot { margin-top: 1rem; }
  #info { font-family: ui-monospace, monospace; font-size: 13px; }
  #error { color: #b00020; }
</style>
</head>
<body>
<h1>causalqwen</h1>
<p>Every number the model writes comes with its Cauchy predictive distribution: hover or click one.</p>
<textarea id="prompt">The total is 12 and the price is</textarea>
<div class="row">
  <label>mode <select id="mode">
    <option>deterministic</option><option>sampling</option><option>causal</option><option>compatible</option>
  </select></label>
  <label>temperature <input id="temperature" type="number" min="0" step="0.1" value="1" style="width:5rem"></label>
  <label>max tokens <input id="max_tokens" type="number" min="1" value="64" style="width:5rem"></label>
  <label>seed <input id="seed" type="number" value="0" style="width:6rem"></label>
  <label>API key <input id="key" type="password" style="width:8rem"></label>
  <button id="go">Generate</button>
</div>
<div id="error"></div>
<div id="output"></div>
<div id="plot">
  <canvas id="density" width="720" height="240"></canvas>
  <div id="info">No number selected.</div>
</div>
<script>
"use strict";
const $ = (id) => document.getElementById(id);
let text = "", prompt = "", numbers = [], selected = -1;

// The continuation with its numbers highlighted (offsets are UTF-8 bytes of the continuation).
function render() {
  const out = $("output");
  out.replaceChildren();
  const p = document.createElement("span");
  p.className = "prompt";
  p.textContent = prompt;
  out.append(p);
  const bytes = new TextEncoder().encode(text), dec = new TextDecoder();
  let at = 0;
  numbers.forEach((n, i) => {
    const end = n.text_offset + new TextEncoder().encode(n.text).length;
    if (n.text_offset < at || end > bytes.length) return;
    out.append(dec.decode(bytes.slice(at, n.text_offset)));
    const m = document.createElement("mark");
    m.className = "num" + (i === selected ? " active" : "");
    m.textContent = n.text;
    m.onmouseenter = m.onclick = () => { selected = i; draw(n); render(); };
    out.append(m);
    at = end;
  });
  out.append(dec.decode(bytes.slice(at)));
}

// The density 1/(π·s·(1 + ((x − loc)/s)²)) with the intervals shaded.
function draw(n) {
  const c = $("density"), g = c.getContext("2d"), W = c.width, H = c.height, pad = 30;
  const levels = Object.keys(n.intervals).sort((a, b) => b - a);
  const widest = levels.length ? n.intervals[levels[0]] : [n.loc - 5 * n.scale, n.loc + 5 * n.scale];
  const half = Math.max(1.15 * (widest[1] - widest[0]) / 2, 4 * n.scale, 1e-9);
  const x0 = n.loc - half, x1 = n.loc + half;
  const px = (x) => pad + (x - x0) / (x1 - x0) * (W - 2 * pad);
  const peak = 1 / (Math.PI * n.scale);
  const py = (y) => H - pad - y / peak * (H - 2 * pad);
  const f = (x) => { const z = (x - n.loc) / n.scale; return 1 / (Math.PI * n.scale * (1 + z * z)); };
  g.clearRect(0, 0, W, H);
  const shades = ["rgba(70,130,180,0.18)", "rgba(70,130,180,0.35)", "rgba(70,130,180,0.5)"];
  levels.forEach((lv, k) => {
    const [lo, hi] = n.intervals[lv];
    g.fillStyle = shades[Math.min(k, shades.length - 1)];
    g.beginPath();
    g.moveTo(px(lo), py(0));
    for (let i = 0; i <= 200; ++i) { const x = lo + (hi - lo) * i / 200; g.lineTo(px(x), py(f(x))); }
    g.lineTo(px(hi), py(0));
    g.fill();
  });
  g.strokeStyle = "#234"; g.lineWidth = 2; g.beginPath();
  for (let i = 0; i <= 400; ++i) { const x = x0 + (x1 - x0) * i / 400; i ? g.lineTo(px(x), py(f(x))) : g.moveTo(px(x), py(f(x))); }
  g.stroke();
  g.strokeStyle = "#999"; g.lineWidth = 1; g.beginPath(); g.moveTo(pad, py(0)); g.lineTo(W - pad, py(0)); g.stroke();
  g.strokeStyle = "#c33"; g.beginPath(); g.moveTo(px(n.loc), py(0)); g.lineTo(px(n.loc), py(peak)); g.stroke();
  g.fillStyle = "#222"; g.font = "12px sans-serif";
  g.fillText(x0.toPrecision(4), pad, H - 10); g.fillText(x1.toPrecision(4), W - pad - 50, H - 10);
  g.fillText("P(<NUM>) = " + n.p_num.toFixed(3), W - 160, 18);
  c.dataset.drawn = "1";
  $("info").textContent = `"${n.text}": loc ${n.loc.toPrecision(6)}, scale ${n.scale.toPrecision(4)}, P(<NUM>) ${n.p_num.toFixed(3)}; ` +
    levels.map((lv) => `${Math.round(lv * 100)} %: [${n.intervals[lv][0].toPrecision(5)}, ${n.intervals[lv][1].toPrecision(5)}]`).join(", ");
}

async function generate() {
  $("error").textContent = "";
  prompt = $("prompt").value; text = ""; numbers = []; selected = -1;
  $("density").dataset.drawn = "";
  render();
  const body = { prompt, stream: true, mode: $("mode").value, temperature: Number($("temperature").value),
                 max_tokens: Number($("max_tokens").value), seed: Number($("seed").value), interval_levels: [0.5, 0.9] };
  const headers = { "Content-Type": "application/json" };
  if ($("key").value) headers.Authorization = "Bearer " + $("key").value;
  $("go").disabled = true;
  try {
    const res = await fetch("/v1/completions", { method: "POST", headers, body: JSON.stringify(body) });
    if (!res.ok) { const e = await res.json(); throw new Error(e.error ? e.error.message : res.statusText); }
    const reader = res.body.getReader(), dec = new TextDecoder();
    let buf = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buf += dec.decode(value, { stream: true });
      let cut;
      while ((cut = buf.indexOf("\n\n")) >= 0) {
        const line = buf.slice(0, cut).trim(); buf = buf.slice(cut + 2);
        if (!line.startsWith("data: ") || line === "data: [DONE]") continue;
        const choice = JSON.parse(line.slice(6)).choices[0];
        text += choice.text;
        if (choice.numbers) numbers.push(...choice.numbers);
        render();
      }
    }
    $("output").dataset.done = "1";
  } catch (e) {
    $("error").textContent = String(e.message || e);
  } finally {
    $("go").disabled = false;
  }
}
$("go").onclick = generate;
</script>
</body>
</html>
)HTML";

}  // namespace cqcli
