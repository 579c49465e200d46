// The page at / in a real browser: Debian's chromium, headless, driven by puppeteer-core. It
// loads the page, submits a prompt (one the API answers with a number), waits for the streamed
// text, hovers the first highlighted number and checks that its density is drawn (the canvas
// holds the curve's colour) and P(<NUM>) is shown; the screenshot is kept as
// WORK/serve_page.png.
import fs from "node:fs";
import puppeteer from "puppeteer-core";
import { WORK, check, post, run } from "./harness.mjs";

await run(async (start) => {
  const s = await start(["--parallel", "2"]);
  const prompt = "The total is 12 and the price is";
  let seed = -1, expected = null;
  for (let k = 0; k < 40 && seed < 0; ++k) {
    const r = await post(s.base, "/v1/completions", { prompt, max_tokens: 64, seed: k, mode: "sampling", temperature: 1 });
    if (r.json.choices[0].numbers.length) [seed, expected] = [k, r.json.choices[0]];
  }
  check(seed >= 0, `a seed whose continuation holds a number (${seed})`);
  const profile = fs.mkdtempSync(`${WORK}/chromium-`);
  const browser = await puppeteer.launch({
    executablePath: process.env.CQ_CHROMIUM || "/usr/bin/chromium",
    headless: true,
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
           "--disable-component-update", "--disable-sync", `--user-data-dir=${profile}`],
  });
  try {
    const page = await browser.newPage();
    await page.setViewport({ width: 900, height: 800 });
    const external = [];
    page.on("request", (r) => { if (!r.url().startsWith(s.base)) external.push(r.url()); });
    await page.goto(s.base + "/", { waitUntil: "load", timeout: 15000 });
    check((await page.title()) === "causalqwen", "the page loads");
    await page.$eval("#prompt", (el, v) => (el.value = v), prompt);
    await page.select("#mode", "sampling");
    await page.$eval("#seed", (el, v) => (el.value = v), String(seed));
    await page.click("#go");
    await page.waitForSelector("#output[data-done='1']", { timeout: 20000 });
    const shown = await page.$eval("#output", (el) => el.textContent);
    check(shown === prompt + expected.text, "the streamed continuation is the API's answer", JSON.stringify([shown, expected.text]));
    const marks = await page.$$eval("mark.num", (ms) => ms.map((m) => m.textContent));
    check(marks.length === expected.numbers.length && marks[0] === expected.numbers[0].text, `the numbers are highlighted (${marks.join(", ")})`);
    await page.hover("mark.num");
    await page.waitForSelector("#density[data-drawn='1']", { timeout: 5000 });
    const inked = await page.$eval("#density", (c) => {
      const d = c.getContext("2d").getImageData(0, 0, c.width, c.height).data;
      let n = 0;
      for (let i = 0; i < d.length; i += 4) if (d[i + 3] > 0) ++n;
      return n;
    });
    check(inked > 2000, `the density is drawn (${inked} pixels inked)`);
    const info = await page.$eval("#info", (el) => el.textContent);
    check(info.includes("P(<NUM>)") && info.includes("90 %"), `the number's summary is shown: ${info}`);
    await page.screenshot({ path: `${WORK}/serve_page.png` });
    check(fs.statSync(`${WORK}/serve_page.png`).size > 1000, `screenshot kept: ${WORK}/serve_page.png`);
    check(external.length === 0, "nothing is fetched from elsewhere", external.join(", "));
  } finally {
    await browser.close();
    fs.rmSync(profile, { recursive: true, force: true });
  }
});
