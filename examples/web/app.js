// Draws the predictive of the wasm module's Bayesian MLP over the points a user clicks.
import init, { Demo, Gpu } from "./pkg/bnn_web.js";

const X = [-5, 5], Y = [-4, 4];
const COLORS = { total: "#f4b183", epistemic: "#6fa8dc", mean: "#1f3d7a", point: "#000000" };
const canvas = document.getElementById("plot");
const ctx = canvas.getContext("2d");
const status = document.getElementById("status");
const px = (x) => ((x - X[0]) / (X[1] - X[0])) * canvas.width;
const py = (y) => ((Y[1] - y) / (Y[1] - Y[0])) * canvas.height;
const grid = Array.from({ length: 201 }, (_, i) => X[0] + (i * (X[1] - X[0])) / 200);

await init();
let demo = new Demo();
let drawn = null;
let gpu = null; // WebGPU's device, asked for the first time a prediction wants it
let key = 0n; // the WebGPU predictions' noise keys

// The page's state for people and for the browser test: idle, training, drawn or error.
function setState(state, text) {
  document.body.dataset.state = state;
  status.textContent = text;
}

function band(lo, hi, color) {
  ctx.beginPath();
  grid.forEach((x, i) => (i ? ctx.lineTo : ctx.moveTo).call(ctx, px(x), py(hi[i])));
  for (let i = grid.length - 1; i >= 0; i--) ctx.lineTo(px(grid[i]), py(lo[i]));
  ctx.closePath();
  ctx.fillStyle = color;
  ctx.fill();
}

function draw() {
  ctx.fillStyle = "#ffffff";
  ctx.fillRect(0, 0, canvas.width, canvas.height);
  ctx.strokeStyle = "#dddddd";
  ctx.beginPath();
  ctx.moveTo(px(X[0]), py(0)); ctx.lineTo(px(X[1]), py(0));
  ctx.moveTo(px(0), py(Y[0])); ctx.lineTo(px(0), py(Y[1]));
  ctx.stroke();
  if (drawn) {
    const n = grid.length;
    const [mean, ale, epi] = [drawn.slice(0, n), drawn.slice(n, 2 * n), drawn.slice(2 * n)];
    const total = mean.map((_, i) => Math.hypot(ale[i], epi[i]));
    band(mean.map((m, i) => m - 2 * total[i]), mean.map((m, i) => m + 2 * total[i]), COLORS.total);
    band(mean.map((m, i) => m - 2 * epi[i]), mean.map((m, i) => m + 2 * epi[i]), COLORS.epistemic);
    ctx.strokeStyle = COLORS.mean;
    ctx.lineWidth = 2;
    ctx.beginPath();
    grid.forEach((x, i) => (i ? ctx.lineTo : ctx.moveTo).call(ctx, px(x), py(mean[i])));
    ctx.stroke();
    ctx.lineWidth = 1;
  }
  const p = demo.points();
  ctx.fillStyle = COLORS.point;
  for (let i = 0; i < p.length; i += 2) {
    ctx.beginPath();
    ctx.arc(px(p[i]), py(p[i + 1]), 4, 0, 2 * Math.PI);
    ctx.fill();
  }
}

async function train() {
  const points = demo.points().length / 2;
  const epochs = Number(document.getElementById("epochs").value);
  const noise = Number(document.getElementById("noise").value);
  setState("training", `training on ${points} points…`);
  // Let the page paint the status before the (blocking) training starts.
  await new Promise((done) => requestAnimationFrame(() => setTimeout(done, 0)));
  try {
    const t0 = performance.now();
    const loss = demo.train(epochs, 1n, noise);
    const t1 = performance.now();
    let where = "flex (CPU)";
    if (document.getElementById("webgpu").checked) {
      gpu ??= await Gpu.init();
      drawn = await demo.predict_on(gpu, grid, 200, key++);
      where = "wgpu (WebGPU)";
    } else {
      drawn = demo.predict(grid, 200);
    }
    const t2 = performance.now();
    draw();
    setState("drawn", `${points} points, noise σ ${noise}, ${epochs} epochs, final loss ${loss.toFixed(3)}: ` +
      `trained on flex (CPU) in ${((t1 - t0) / 1000).toFixed(1)} s, ` +
      `predicted on ${where} in ${((t2 - t1) / 1000).toFixed(1)} s`);
  } catch (e) {
    setState("error", `error: ${e.message ?? e}`);
  }
}

canvas.addEventListener("click", (e) => {
  const r = canvas.getBoundingClientRect();
  const x = X[0] + ((e.clientX - r.left) / r.width) * (X[1] - X[0]);
  const y = Y[1] - ((e.clientY - r.top) / r.height) * (Y[1] - Y[0]);
  demo.add_point(x, y);
  draw();
  setState("idle", `${demo.points().length / 2} points: press Train`);
});
document.getElementById("train").addEventListener("click", train);
document.getElementById("clear").addEventListener("click", () => {
  demo.clear();
  drawn = null;
  draw();
  setState("idle", "no points: click on the plot");
});

// A first data set: a noisy sine on two stretches, a gap between them and none beyond.
for (let i = 0; i < 24; i++) {
  const x = i < 12 ? -4 + (i * 3) / 11 : 0.5 + ((i - 12) * 1.5) / 11;
  demo.add_point(x, Math.sin(1.5 * x) * 1.5 + 0.3 * Math.sin(17 * i));
}
draw();
await train();
