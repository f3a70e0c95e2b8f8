// Page 8c's live demo: chapter 6's trained ViT runs in the reader's browser.
//
// The page's output holds a <div data-live-vit> with a JSON description (the model file, the
// classes, the normalisation, 24 test images as raw pixels). This script, served by the site
// from _static/ beside onnxruntime-web (book/js, no CDN), loads the ONNX model that
// vitlib.to_onnx wrote and, on every change, runs it on the image with the painted patches
// blanked: the top-3 classes, and attention rollout computed from the model's `attention`
// output by vit-widgets.js with the rule of vitlib.rollout.attention_rollout (fuse the heads,
// drop the weakest patch-to-patch links, add the identity, renormalise the rows, multiply the
// layers). After each update the root element carries data-probabilities and data-rollout
// (JSON), which the site's browser test compares with Python's numbers.
//
// Page 8d adds a choice of map: rollout, the last layer's attention (both computed here from
// the model's attention output) or maps that need gradients, precomputed in Python for each
// whole image (spec.maps). "Delete in this order" plays the deletion curve: the patches go,
// highest score first, and the probability of the class predicted for the whole image is
// drawn after each one (data-deletion, JSON, for the browser test).
(function () {
  "use strict";
  const script = document.currentScript;
  const staticDir = script.src.slice(0, script.src.lastIndexOf("/"));
  const widgets = window.vitWidgets; // vit-widgets.js, loaded before this file: rollout and helpers

  function softmax(logits) {
    const top = Math.max(...logits);
    const e = Array.from(logits, (x) => Math.exp(x - top));
    const sum = e.reduce((s, x) => s + x, 0);
    return e.map((x) => x / sum);
  }

  const { decode, element } = widgets; // base64 to bytes, and a DOM helper

  // --- one demo ------------------------------------------------------------------------
  async function start(root) {
    const spec = JSON.parse(root.querySelector("script[type='application/json']").textContent);
    const status = root.querySelector(".live-status");
    const ort = await import(staticDir + "/ort/ort.wasm.bundle.min.mjs");
    ort.env.wasm.numThreads = 1; // threads need cross-origin isolation, which a static host lacks
    ort.env.wasm.wasmPaths = { wasm: staticDir + "/ort/ort-wasm-simd-threaded.wasm" };
    const session = await ort.InferenceSession.create(staticDir + "/" + spec.model, {
      executionProviders: ["wasm"],
    });
    const images = spec.images.map((im) => Object.assign({}, im, { pixels: decode(im.pixels) }));
    const [height, width] = spec.image_size;
    const [ph, pw] = spec.patch_size;
    const rows = height / ph, cols = width / pw;
    const scale = spec.scale;
    const state = { image: 0, hidden: new Set(), fusion: "mean", discard: 0, updates: 0, method: "rollout" };
    const precomputed = spec.maps || {}; // method -> one score per patch for each image
    let playing = 0; // the playback under way (see deletion)

    // the layout: thumbnails, then the image with its patches, the rollout overlay, the classes
    root.querySelector(".live-fallback")?.remove();
    const strip = element("div", { className: "live-thumbnails" }, root);
    const thumbs = images.map((im, i) => {
      const c = element("canvas", { width, height, title: im.title }, strip);
      c.dataset.index = i;
      c.classList.toggle("live-wrong", im.prediction !== im.label);
      drawGrey(c.getContext("2d"), im.pixels, width, height, 1, new Set());
      c.addEventListener("click", () => { playing++; state.image = i; state.hidden.clear(); update(); });
      return c;
    });
    const row = element("div", { className: "live-row" }, root);
    const figure = (caption) => {
      const f = element("figure", { className: "live-figure" }, row);
      element("figcaption", { textContent: caption }, f);
      return f;
    };
    const size = { width: width * scale, height: height * scale };
    const paint = element("canvas", Object.assign({ className: "live-image" }, size), figure("paint patches out and in"));
    const overlayFigure = figure("attention rollout");
    const overlay = element("canvas", Object.assign({ className: "live-overlay" }, size), overlayFigure);
    const panel = element("div", { className: "live-panel" }, row);
    const truth = element("div", { className: "live-truth" }, panel);
    const prediction = element("div", { className: "live-prediction" }, panel);
    const bars = element("div", { className: "live-bars" }, panel);
    const controls = element("div", { className: "live-controls" }, panel);
    if (spec.about) element("div", { className: "live-about", textContent: "model: " + spec.about }, panel);
    const method = element("select", { className: "live-method" }, element("label", { textContent: "map: " }, controls));
    const methods = { rollout: "attention rollout", attention: "last layer's attention" };
    for (const name of Object.keys(precomputed)) methods[name] = name + " (precomputed, whole image)";
    for (const [value, text] of Object.entries(methods)) element("option", { value, textContent: text }, method);
    const fusion = element("select", { className: "live-fusion" }, element("label", { textContent: "heads fused by " }, controls));
    for (const f of ["mean", "max", "min"]) element("option", { value: f, textContent: f }, fusion);
    const discardLabel = element("label", { textContent: "discard " }, controls);
    const discard = element("input", { className: "live-discard", type: "range", min: 0, max: 0.9, step: 0.1, value: 0 }, discardLabel);
    const discardText = element("span", { textContent: "0%" }, discardLabel);
    const reset = element("button", { className: "live-reset", textContent: "show every patch" }, controls);
    const play = element("button", { className: "live-delete", textContent: "delete in this order" }, controls);
    const curve = element("canvas", { className: "live-curve", width: 220, height: 110 }, panel);
    method.addEventListener("change", () => {
      playing++;
      state.method = method.value;
      overlayFigure.querySelector("figcaption").textContent = methods[method.value];
      update();
    });
    play.addEventListener("click", () =>
      deletion().catch((error) => { root.dataset.error = String(error); console.error(error); }));
    fusion.addEventListener("change", () => { state.fusion = fusion.value; update(); });
    discard.addEventListener("input", () => {
      state.discard = Number(discard.value);
      discardText.textContent = Math.round(state.discard * 100) + "%";
      update();
    });
    reset.addEventListener("click", () => { playing++; state.hidden.clear(); update(); });

    // painting: a press on a shown patch hides patches while the button is down, a press on a
    // hidden one shows them again
    let painting = null;
    const patchAt = (event) => {
      const box = paint.getBoundingClientRect();
      const r = Math.floor(((event.clientY - box.top) / box.height) * rows);
      const c = Math.floor(((event.clientX - box.left) / box.width) * cols);
      return r >= 0 && r < rows && c >= 0 && c < cols ? r * cols + c : null;
    };
    const apply = (event) => {
      const k = patchAt(event);
      if (k === null || painting === null) return;
      const before = state.hidden.has(k);
      if (painting === "hide") state.hidden.add(k); else state.hidden.delete(k);
      if (before !== state.hidden.has(k)) update();
    };
    paint.addEventListener("pointerdown", (event) => {
      const k = patchAt(event);
      if (k === null) return;
      playing++;
      painting = state.hidden.has(k) ? "show" : "hide";
      apply(event);
    });
    paint.addEventListener("pointermove", apply);
    window.addEventListener("pointerup", () => { painting = null; });

    // one update at a time; changes made meanwhile are folded into the next one
    let running = null, again = false;
    function update() {
      if (running) { again = true; return running; }
      running = (async () => {
        try {
          do { again = false; await compute(); } while (again);
        } finally {
          running = null; // an error must not leave every later update waiting on this one
        }
      })();
      return running;
    }

    async function compute() {
      const now = Object.assign({}, state, { hidden: new Set(state.hidden) }); // as asked
      const im = images[now.image];
      const hidden = now.hidden;
      const input = new Float32Array(spec.in_channels * height * width);
      for (let y = 0; y < height; y++)
        for (let x = 0; x < width; x++) {
          const k = Math.floor(y / ph) * cols + Math.floor(x / pw);
          const raw = hidden.has(k) ? spec.blank : im.pixels[y * width + x];
          input[y * width + x] = (raw / 255 - spec.mean[0]) / spec.std[0];
        }
      const feeds = { images: new ort.Tensor("float32", input, [1, spec.in_channels, height, width]) };
      const out = await session.run(feeds);
      const probabilities = softmax(out.logits.data);
      const [layers, , heads, n] = out.attention.dims;
      // batch 1: (layers, 1, heads, n, n) is laid out as (layers, heads, n, n)
      const joint = widgets.rollout(out.attention.data, 0, layers, heads, n, now.fusion, now.discard);
      const rolled = Array.from(joint.slice(1, n)); // the class token's row, without itself
      const heat = scores(now, out.attention.data, layers, heads, n, rolled);
      state.updates += 1;
      show(now, im, hidden, probabilities, heat);
      root.dataset.probabilities = JSON.stringify(probabilities);
      root.dataset.rollout = JSON.stringify(rolled);
      root.dataset.map = JSON.stringify(heat);
      root.dataset.method = now.method;
      root.dataset.image = String(now.image);
      root.dataset.hidden = JSON.stringify([...hidden].sort((a, b) => a - b));
      root.dataset.updates = String(state.updates);
    }

    // the chosen map: rollout, the class token's row of the last layer (heads averaged), or
    // the precomputed scores of the image
    function scores(now, maps, layers, heads, n, rolled) {
      if (now.method === "rollout") return rolled;
      if (now.method === "attention") {
        const heat = new Array(n - 1).fill(0);
        const last = (layers - 1) * heads * n * n;
        for (let h = 0; h < heads; h++)
          for (let j = 1; j < n; j++) heat[j - 1] += maps[last + h * n * n + j] / heads;
        return heat;
      }
      return precomputed[now.method][now.image];
    }

    // the deletion curve, played: every patch shown, then the highest-scoring patch of the map
    // hidden, and the next, ...; each step is one update, the curve drawn as it grows
    async function deletion() {
      const mine = ++playing; // a later playback, or any change the reader makes, stops this one
      play.disabled = true;
      try {
        await playDeletion(mine);
      } finally {
        play.disabled = false;
      }
    }

    async function playDeletion(mine) {
      state.hidden.clear();
      await update();
      const heat = JSON.parse(root.dataset.map);
      const whole = JSON.parse(root.dataset.probabilities);
      const target = whole.indexOf(Math.max(...whole));
      const order = heat.map((v, k) => [v, k]).sort((a, b) => b[0] - a[0] || a[1] - b[1]).map((x) => x[1]);
      const points = [whole[target]];
      root.dataset.deletion = "";
      drawCurve(curve.getContext("2d"), points, order.length);
      for (const k of order) {
        await new Promise((resolve) => setTimeout(resolve, 120)); // slow enough to watch
        if (mine !== playing) return; // the reader changed something: no curve
        state.hidden.add(k);
        await update();
        points.push(JSON.parse(root.dataset.probabilities)[target]);
        drawCurve(curve.getContext("2d"), points, order.length);
      }
      root.dataset.deletionOrder = JSON.stringify(order);
      root.dataset.deletion = JSON.stringify(points);
    }

    function drawCurve(ctx, points, n) {
      const { width, height } = ctx.canvas;
      ctx.clearRect(0, 0, width, height);
      ctx.strokeStyle = "#999";
      ctx.strokeRect(24.5, 4.5, width - 30, height - 24);
      ctx.fillStyle = "#666";
      ctx.font = "10px sans-serif";
      ctx.fillText("1", 12, 12);
      ctx.fillText("0", 12, height - 20);
      ctx.fillText("p of the first prediction, as patches go", 26, height - 6);
      const x = (k) => 25 + (k / n) * (width - 31);
      const y = (p) => 5 + (1 - p) * (height - 26);
      ctx.strokeStyle = "#B279A2";
      ctx.lineWidth = 2;
      ctx.beginPath();
      points.forEach((p, k) => (k ? ctx.lineTo(x(k), y(p)) : ctx.moveTo(x(k), y(p))));
      ctx.stroke();
      let area = 0;
      for (let k = 1; k < points.length; k++) area += (points[k - 1] + points[k]) / 2 / n;
      ctx.fillStyle = "#222";
      if (points.length === n + 1) ctx.fillText("area " + area.toFixed(3), width - 70, 16);
    }

    function show(now, im, hidden, probabilities, heat) {
      thumbs.forEach((t, i) => t.classList.toggle("live-selected", i === now.image));
      drawGrey(paint.getContext("2d"), im.pixels, width, height, scale, hidden, ph, pw, spec.blank);
      drawGrid(paint.getContext("2d"), rows, cols, ph * scale, pw * scale, hidden);
      drawOverlay(overlay.getContext("2d"), im.pixels, width, height, scale, hidden, heat, rows, cols, ph, pw, spec.blank);
      const order = probabilities.map((p, i) => [p, i]).sort((a, b) => b[0] - a[0]).slice(0, 3);
      truth.textContent = `image ${now.image + 1}: a ${spec.classes[im.label]}` +
        ` (${hidden.size} of ${rows * cols} patches hidden)`;
      prediction.textContent = `${spec.classes[order[0][1]]}, ${(100 * order[0][0]).toFixed(1)}%`;
      prediction.classList.toggle("live-wrong", order[0][1] !== im.label);
      bars.replaceChildren(...order.map(([p, i]) => {
        const line = element("div", { className: "live-bar" });
        element("span", { className: "live-name", textContent: spec.classes[i] }, line);
        const bar = element("span", { className: "live-fill" }, line);
        bar.style.width = (8 * p).toFixed(2) + "em"; // 8em for 100%
        element("span", { className: "live-value", textContent: (100 * p).toFixed(1) + "%" }, line);
        return line;
      }));
    }

    status.textContent = "";
    await update();
    root.dataset.firstPredictionMs = performance.now().toFixed(1); // since the page was opened
    root.dataset.ready = "1";
    window.liveVit = { root, update, state }; // for benchmarks/browser_latency.py
  }

  function drawGrey(ctx, pixels, width, height, scale, hidden, ph, pw, blank) {
    const image = ctx.createImageData(width * scale, height * scale);
    for (let y = 0; y < height * scale; y++)
      for (let x = 0; x < width * scale; x++) {
        const sy = Math.floor(y / scale), sx = Math.floor(x / scale);
        const k = ph ? Math.floor(sy / ph) * (width / pw) + Math.floor(sx / pw) : -1;
        const v = hidden.has(k) ? blank : pixels[sy * width + sx];
        const o = 4 * (y * width * scale + x);
        image.data[o] = image.data[o + 1] = image.data[o + 2] = v;
        image.data[o + 3] = 255;
      }
    ctx.putImageData(image, 0, 0);
  }

  function drawGrid(ctx, rows, cols, h, w, hidden) {
    ctx.lineWidth = 1;
    for (let r = 0; r < rows; r++)
      for (let c = 0; c < cols; c++) {
        const hiddenHere = hidden.has(r * cols + c);
        ctx.strokeStyle = hiddenHere ? "rgba(255, 80, 80, 0.9)" : "rgba(120, 160, 255, 0.6)";
        ctx.strokeRect(c * w + 0.5, r * h + 0.5, w - 1, h - 1);
        if (hiddenHere) {
          ctx.beginPath();
          ctx.moveTo(c * w + 4, r * h + 4);
          ctx.lineTo((c + 1) * w - 4, (r + 1) * h - 4);
          ctx.stroke();
        }
      }
  }

  function drawOverlay(ctx, pixels, width, height, scale, hidden, heat, rows, cols, ph, pw, blank) {
    drawGrey(ctx, pixels, width, height, scale, hidden, ph, pw, blank);
    const low = Math.min(0, ...heat), top = Math.max(...heat); // gradient maps can be negative
    const span = top - low || 1;
    for (let r = 0; r < rows; r++)
      for (let c = 0; c < cols; c++) {
        const [red, green, blue] = widgets.colour("inferno", (heat[r * cols + c] - low) / span);
        ctx.fillStyle = `rgba(${red}, ${green}, ${blue}, 0.6)`;
        ctx.fillRect(c * pw * scale, r * ph * scale, pw * scale, ph * scale);
      }
  }

  // A page opened from disk (file://): Chromium refuses the ES module and the WebAssembly this
  // demo loads, so it says how to serve the site instead of failing on the import.
  function needsServer(root) {
    const path = location.pathname;
    const marker = "/_build/html/";
    const page = path.includes(marker)
      ? path.slice(path.lastIndexOf(marker) + marker.length)
      : "notebooks/" + path.slice(path.lastIndexOf("/") + 1);
    root.querySelector(".live-fallback")?.remove();
    const status = root.querySelector(".live-status");
    if (status)
      status.textContent =
        "The live demo runs only when the site is served over http: this page was opened " +
        "from a file, and browsers refuse to load WebAssembly from one. In the book's folder, " +
        "run make serve, then open http://127.0.0.1:8000/" + page;
    root.dataset.error = "opened from a file: make serve";
  }

  function run(root) {
    if (location.protocol === "file:") return needsServer(root);
    start(root).catch((error) => {
      const status = root.querySelector(".live-status");
      if (status) status.textContent = "The live demo could not start: " + error;
      root.dataset.error = String(error);
      console.error(error);
    });
  }

  document.querySelectorAll("[data-live-vit]").forEach(run);
})();
