// The browser test: serves examples/web on localhost, drives the page in headless Chromium,
// clicks points on the plot, trains, and checks a screenshot of the canvas for the bands.
// Usage: node browser.mjs CHROMIUM OUT_DIR [flex|webgpu ...]
import http from "node:http";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { chromium } from "playwright-core";
import { PNG } from "pngjs";

const [executablePath, outDir, ...backends] = process.argv.slice(2);
if (!executablePath || !outDir) {
  console.error("usage: node browser.mjs CHROMIUM OUT_DIR [flex|webgpu ...]");
  process.exit(2);
}
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
fs.mkdirSync(outDir, { recursive: true });

// The page's plot geometry and colours (app.js).
const X = [-5, 5], Y = [-4, 4], W = 800, H = 400;
const TOTAL = [0xf4, 0xb1, 0x83], EPISTEMIC = [0x6f, 0xa8, 0xdc];
const col = (x) => Math.round(((x - X[0]) / (X[1] - X[0])) * W);
const row = (y) => Math.round(((Y[1] - y) / (Y[1] - Y[0])) * H);

const TYPES = { ".html": "text/html", ".js": "text/javascript", ".wasm": "application/wasm" };
const server = http.createServer((req, res) => {
  const rel = decodeURIComponent(new URL(req.url, "http://localhost").pathname);
  const file = path.join(root, rel === "/" ? "index.html" : rel);
  if (!file.startsWith(root + path.sep) || !fs.existsSync(file)) {
    res.writeHead(404).end();
    return;
  }
  res.writeHead(200, { "content-type": TYPES[path.extname(file)] ?? "application/octet-stream" });
  fs.createReadStream(file).pipe(res);
});
await new Promise((ok) => server.listen(0, "127.0.0.1", ok));
const url = `http://127.0.0.1:${server.address().port}/`;

const browser = await chromium.launch({
  executablePath,
  args: [
    "--no-sandbox", "--disable-quic", "--no-first-run", "--disable-background-networking",
    "--disable-component-update", "--disable-sync",
    // WebGPU on SwiftShader, Chromium's CPU Vulkan, where the machine has no GPU.
    "--enable-unsafe-webgpu", "--enable-unsafe-swiftshader",
  ],
});
const failures = [];
const check = (ok, what) => {
  console.log(`${ok ? "ok  " : "FAIL"} ${what}`);
  if (!ok) failures.push(what);
};

try {
  const page = await browser.newPage({ viewport: { width: 1000, height: 800 } });
  page.on("console", (m) => m.type() === "error" && console.log(`page console: ${m.text()}`));
  page.on("pageerror", (e) => console.log(`page error: ${e.message}`));
  await page.goto(url);
  const drawn = async (what) => {
    await page.waitForFunction(
      () => ["drawn", "error"].includes(document.body.dataset.state),
      null,
      { timeout: 300_000 },
    );
    const status = await page.textContent("#status");
    check((await page.evaluate(() => document.body.dataset.state)) === "drawn", `${what}: ${status}`);
    return status;
  };
  await drawn("the page trains on its first points");

  for (const backend of backends.length ? backends : ["flex"]) {
    // A user's points: a sine on [-4, -0.5] only, so the right half of the plot is far from data.
    await page.click("#clear");
    await page.setChecked("#webgpu", backend === "webgpu");
    const box = await page.locator("#plot").boundingBox();
    const xs = Array.from({ length: 14 }, (_, i) => -4 + (i * 3.5) / 13);
    const clicks = xs.map((x) => [x, Math.sin(1.5 * x) * 1.5]);
    for (const [x, y] of clicks) await page.mouse.click(box.x + col(x), box.y + row(y));
    await page.click("#train");
    const status = await drawn(`${backend}: trains on 14 clicked points`);
    check(status.startsWith("14 points"), `${backend}: the net saw the 14 clicked points`);
    check(
      status.includes(`predicted on ${backend === "webgpu" ? "wgpu (WebGPU)" : "flex (CPU)"}`),
      `${backend}: it predicted on the backend asked for`,
    );

    const file = path.join(outDir, `web-${backend}.png`);
    await page.locator("#plot").screenshot({ path: file });
    const png = PNG.sync.read(fs.readFileSync(file));
    const near = (x, y, c) => {
      const i = (png.width * y + x) * 4;
      return c.every((v, k) => Math.abs(png.data[i + k] - v) <= 8);
    };
    // Per column of the plot, how many pixels are in each band's colour.
    const perColumn = (c) =>
      Array.from({ length: png.width }, (_, x) => {
        let n = 0;
        for (let y = 0; y < png.height; y++) n += near(x, y, c);
        return n;
      });
    const [total, epistemic] = [perColumn(TOTAL), perColumn(EPISTEMIC)];
    const mean = (v, a, b) => {
      const s = v.slice(col(a), col(b));
      return s.reduce((p, q) => p + q, 0) / s.length;
    };
    const [dataTotal, dataEpi] = [mean(total, -3.5, -1), mean(epistemic, -3.5, -1)];
    const farEpi = mean(epistemic, 3, 5);
    console.log(
      `${backend}: band heights in pixels, over the data (x in [-3.5, -1]): total-only ` +
        `${dataTotal.toFixed(1)}, epistemic ${dataEpi.toFixed(1)}; far from it (x in [3, 5]): ` +
        `epistemic ${farEpi.toFixed(1)}`,
    );
    check(dataTotal >= 4, `${backend}: the aleatoric band is drawn over the data`);
    check(farEpi >= 20, `${backend}: the epistemic band is drawn far from the data`);
    check(farEpi >= 3 * Math.max(dataEpi, 1), `${backend}: epistemic uncertainty grows away from the data`);
    const dots = clicks.filter(([x, y]) => near(col(x), row(y), [0, 0, 0])).length;
    check(dots === clicks.length, `${backend}: every clicked point is drawn (${dots} of ${clicks.length})`);
    console.log(`${backend}: screenshot ${file}`);
  }
} finally {
  await browser.close();
  server.close();
}
if (failures.length) {
  console.error(`${failures.length} check(s) failed`);
  process.exit(1);
}
