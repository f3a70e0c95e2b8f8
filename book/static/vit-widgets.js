// The chapters' pickers without a kernel: on the static site, an output made by
// vitlib.utils.page_widget is a <div data-vit-widget="KIND"> holding a JSON description with
// the numbers Python computed when the page was run (compact arrays, an image or two). This
// script draws it and redraws on every move of a control, in the reader's browser.
//
//   patch-grid          chapter 1: a photo cut into patches of the size the slider picks
//   patch-maps          chapters 2 and 3: pick a patch (sliders or a click on the photo);
//                       each panel shows that patch's map (similarity, attention)
//   attention-explorer  page 8b: image, layer or rollout, head or fusion, discard ratio
//
// Attention rollout is computed here with the rule of vitlib.rollout.attention_rollout; page
// 8c's live demo (live-vit.js) uses the same functions, window.vitWidgets.rollout. After each
// draw the root element carries data-draws (a count) and, where a map is shown, data-heat
// (JSON), which the site's browser tests compare with Python's numbers.
(function () {
  "use strict";
  if (window.vitWidgets) return; // a page with several outputs loads this file once per output

  // --- attention rollout, as vitlib.rollout ---------------------------------------------
  function fuseHeads(maps, offset, heads, n, fusion) {
    const out = new Float64Array(n * n);
    for (let k = 0; k < n * n; k++) {
      let value = maps[offset + k];
      for (let h = 1; h < heads; h++) {
        const x = maps[offset + h * n * n + k];
        if (fusion === "mean") value += x;
        else if (fusion === "max") value = Math.max(value, x);
        else value = Math.min(value, x);
      }
      out[k] = fusion === "mean" ? value / heads : value;
    }
    return out;
  }

  // zero the weakest `ratio` of the patch-to-patch links (never the class token's row or
  // column); ties go to the lower index, as torch's stable argsort
  function discardWeakest(a, n, ratio) {
    const m = n - 1;
    const count = Math.floor(m * m * ratio);
    if (count === 0) return a;
    const at = (k) => (1 + Math.floor(k / m)) * n + 1 + (k % m);
    const order = Array.from({ length: m * m }, (_, k) => k);
    order.sort((p, q) => a[at(p)] - a[at(q)] || p - q);
    const out = Float64Array.from(a);
    for (let i = 0; i < count; i++) out[at(order[i])] = 0;
    return out;
  }

  function matmul(a, b, n) {
    const out = new Float64Array(n * n);
    for (let i = 0; i < n; i++)
      for (let k = 0; k < n; k++) {
        const x = a[i * n + k];
        if (x !== 0) for (let j = 0; j < n; j++) out[i * n + j] += x * b[k * n + j];
      }
    return out;
  }

  // maps: (layers, heads, n, n) of one image, flat, starting at `offset`; returns (n, n)
  function rollout(maps, offset, layers, heads, n, fusion, discard) {
    let joint = new Float64Array(n * n);
    for (let i = 0; i < n; i++) joint[i * n + i] = 1;
    for (let l = 0; l < layers; l++) {
      const a = discardWeakest(fuseHeads(maps, offset + l * heads * n * n, heads, n, fusion), n, discard);
      for (let i = 0; i < n; i++) {
        a[i * n + i] += 1; // the residual path
        let sum = 0;
        for (let j = 0; j < n; j++) sum += a[i * n + j];
        for (let j = 0; j < n; j++) a[i * n + j] /= sum;
      }
      joint = matmul(a, joint, n); // the later layer on the left
    }
    return joint;
  }

  // --- colours and drawing ----------------------------------------------------------------
  const STOPS = {
    inferno: [[0, 0, 4], [40, 11, 84], [101, 21, 110], [159, 42, 99], [212, 72, 66], [245, 125, 21], [250, 193, 39], [252, 255, 164]],
    viridis: [[68, 1, 84], [70, 50, 127], [54, 92, 141], [39, 127, 142], [31, 161, 135], [74, 194, 109], [159, 218, 58], [253, 231, 37]],
  };
  function colour(name, t) {
    const stops = STOPS[name];
    const x = Math.min(Math.max(t, 0), 1) * (stops.length - 1);
    const i = Math.min(Math.floor(x), stops.length - 2);
    return stops[i].map((c, k) => Math.round(c + (x - i) * (stops[i + 1][k] - c)));
  }

  function element(tag, props, parent) {
    const e = Object.assign(document.createElement(tag), props || {});
    if (parent) parent.appendChild(e);
    return e;
  }

  function slider(parent, label, min, max, value, step) {
    const l = element("label", { className: "vit-control" }, parent);
    l.append(label + " ");
    const input = element("input", { type: "range", min, max, step: step || 1, value }, l);
    const text = element("span", { className: "vit-value" }, l);
    return { input, text };
  }

  function select(parent, label, options, value) {
    const l = element("label", { className: "vit-control" }, parent);
    l.append(label + " ");
    const s = element("select", {}, l);
    for (const [v, t] of options) element("option", { value: v, textContent: t }, s);
    s.value = String(value);
    return s;
  }

  function loadImage(src) {
    return new Promise((resolve, reject) => {
      const img = new Image();
      img.onload = () => resolve(img);
      img.onerror = () => reject(new Error("an image of the widget did not load"));
      img.src = src;
    });
  }

  // a (h, w) map as coloured squares, each cell `size` pixels
  function drawMap(canvas, values, h, w, name, marker) {
    canvas.width = canvas.width; // clear
    const ctx = canvas.getContext("2d");
    const lo = Math.min(...values), hi = Math.max(...values);
    const cw = canvas.width / w, ch = canvas.height / h;
    for (let r = 0; r < h; r++)
      for (let c = 0; c < w; c++) {
        const [red, green, blue] = colour(name, (values[r * w + c] - lo) / (hi - lo || 1));
        ctx.fillStyle = `rgb(${red}, ${green}, ${blue})`;
        ctx.fillRect(Math.floor(c * cw), Math.floor(r * ch), Math.ceil(cw), Math.ceil(ch));
      }
    if (marker) mark(ctx, marker[0] * ch + ch / 2, marker[1] * cw + cw / 2);
  }

  function mark(ctx, y, x) {
    ctx.strokeStyle = "red";
    ctx.lineWidth = 2;
    ctx.beginPath();
    ctx.moveTo(x - 6, y); ctx.lineTo(x + 6, y);
    ctx.moveTo(x, y - 6); ctx.lineTo(x, y + 6);
    ctx.stroke();
  }

  // the photo dimmed where the map is low: image * (0.15 + 0.85 * map / max), as chapter 3's
  // show_attention; or, with a colour map, the map blended over the image
  function drawOverlay(canvas, img, values, h, w, name) {
    const ctx = canvas.getContext("2d");
    ctx.drawImage(img, 0, 0, canvas.width, canvas.height);
    const hi = Math.max(...values) || 1;
    const cw = canvas.width / w, ch = canvas.height / h;
    for (let r = 0; r < h; r++)
      for (let c = 0; c < w; c++) {
        const t = values[r * w + c] / hi;
        if (name) {
          const [red, green, blue] = colour(name, t);
          ctx.fillStyle = `rgba(${red}, ${green}, ${blue}, 0.55)`;
        } else {
          ctx.fillStyle = `rgba(0, 0, 0, ${0.85 * (1 - t)})`;
        }
        ctx.fillRect(Math.floor(c * cw), Math.floor(r * ch), Math.ceil(cw), Math.ceil(ch));
      }
  }

  function outline(ctx, r, c, ph, pw, colourName) {
    ctx.strokeStyle = colourName || "red";
    ctx.lineWidth = 2;
    ctx.strokeRect(c * pw + 1, r * ph + 1, pw - 2, ph - 2);
  }

  function decode(base64, type) {
    const text = atob(base64);
    const bytes = new Uint8Array(text.length);
    for (let i = 0; i < text.length; i++) bytes[i] = text.charCodeAt(i);
    return type === "float32" ? new Float32Array(bytes.buffer) : bytes;
  }

  function drawn(root, heat) {
    root.dataset.draws = String(+(root.dataset.draws || 0) + 1);
    if (heat) root.dataset.heat = JSON.stringify(Array.from(heat));
  }

  // --- chapter 1: the patch grid ----------------------------------------------------------
  async function patchGrid(root, spec) {
    const img = await loadImage(spec.image);
    const [H, W] = spec.size;
    const size = slider(root, "patch size", 0, spec.sizes.length - 1, spec.sizes.indexOf(spec.value));
    const caption = element("div", { className: "vit-caption" }, root);
    const canvas = element("canvas", { width: W * 2, height: H * 2, className: "vit-canvas" }, root);
    function draw() {
      const p = spec.sizes[+size.input.value];
      const rows = Math.floor(H / p), cols = Math.floor(W / p);
      size.text.textContent = String(p);
      caption.textContent = `patch ${p}: a ${rows} x ${cols} grid, ${rows * cols} tokens`;
      const ctx = canvas.getContext("2d"), s = canvas.width / W;
      ctx.drawImage(img, 0, 0, canvas.width, canvas.height);
      ctx.strokeStyle = "rgba(255, 255, 255, 0.9)";
      ctx.lineWidth = 1;
      ctx.beginPath();
      for (let k = 0; k <= cols; k++) { ctx.moveTo(k * p * s, 0); ctx.lineTo(k * p * s, rows * p * s); }
      for (let k = 0; k <= rows; k++) { ctx.moveTo(0, k * p * s); ctx.lineTo(cols * p * s, k * p * s); }
      ctx.stroke();
      drawn(root);
    }
    size.input.addEventListener("input", draw);
    draw();
  }

  // --- chapters 2 and 3: a map per patch ------------------------------------------------
  async function patchMaps(root, spec) {
    const img = await loadImage(spec.image);
    const [h, w] = spec.grid;
    const n = h * w;
    const panels = spec.panels.map((p) => Object.assign({}, p, { values: decode(p.maps) }));
    const controls = element("div", { className: "vit-controls" }, root);
    const row = slider(controls, "row", 0, h - 1, spec.row);
    const col = slider(controls, "column", 0, w - 1, spec.col);
    const figures = element("div", { className: "vit-row" }, root);
    const figure = (title) => {
      const f = element("figure", { className: "vit-figure" }, figures);
      const c = element("canvas", { width: 224, height: 224, className: "vit-canvas" }, f);
      const t = element("figcaption", { textContent: title }, f);
      return { canvas: c, caption: t };
    };
    const photo = figure("");
    photo.canvas.style.cursor = "crosshair";
    const shown = panels.map((p) => figure(p.title));
    function draw() {
      const r = +row.input.value, c = +col.input.value, k = r * w + c;
      row.text.textContent = String(r);
      col.text.textContent = String(c);
      const ctx = photo.canvas.getContext("2d");
      ctx.drawImage(img, 0, 0, 224, 224);
      outline(ctx, r, c, 224 / h, 224 / w);
      photo.caption.textContent = `patch (${r}, ${c}): click another`;
      let heat;
      panels.forEach((p, i) => {
        const values = Array.from(p.values.subarray(k * n, (k + 1) * n), (v) => p.low + (v / 255) * (p.high - p.low));
        if (p.overlay) {
          drawOverlay(shown[i].canvas, img, values, h, w, null);
          outline(shown[i].canvas.getContext("2d"), r, c, 224 / h, 224 / w);
        } else {
          drawMap(shown[i].canvas, values, h, w, "viridis", [r, c]);
        }
        if (p.caption) shown[i].caption.textContent = p.caption.replace("{value}", values[k].toFixed(2));
        heat = heat || values;
      });
      drawn(root, heat);
    }
    photo.canvas.addEventListener("click", (event) => {
      const box = photo.canvas.getBoundingClientRect();
      row.input.value = Math.floor(((event.clientY - box.top) / box.height) * h);
      col.input.value = Math.floor(((event.clientX - box.left) / box.width) * w);
      draw();
    });
    row.input.addEventListener("input", draw);
    col.input.addEventListener("input", draw);
    draw();
  }

  // --- page 8b: the attention explorer ----------------------------------------------------
  async function attentionExplorer(root, spec) {
    const images = await Promise.all(spec.images.map(loadImage));
    const maps = decode(spec.maps, "float32"); // (b, layers, heads, n, n)
    const { layers, heads, n } = spec;
    const side = Math.round(Math.sqrt(n - 1));
    const controls = element("div", { className: "vit-controls" }, root);
    const image = select(controls, "image", spec.titles.map((t, i) => [i, t]), 0);
    const layer = select(controls, "layer", [...Array.from({ length: layers }, (_, i) => [i, `layer ${i + 1}`]), [-1, "rollout"]], -1);
    const head = select(controls, "head", [...Array.from({ length: heads }, (_, i) => [i, `head ${i + 1}`]), [-1, "fused"]], -1);
    const fusion = select(controls, "fusion", ["mean", "max", "min"].map((f) => [f, f]), "mean");
    const discard = slider(controls, "discard", 0, 0.9, 0, 0.1);
    const figures = element("div", { className: "vit-row" }, root);
    const figure = () => {
      const f = element("figure", { className: "vit-figure" }, figures);
      return [element("canvas", { width: 168, height: 168, className: "vit-canvas" }, f), element("figcaption", {}, f)];
    };
    const [picture, pictureCaption] = figure();
    const [heatCanvas, heatCaption] = figure();
    const [overlay, overlayCaption] = figure();
    function draw() {
      const b = +image.value, l = +layer.value, hd = +head.value, f = fusion.value, d = +discard.input.value;
      head.disabled = l < 0;
      fusion.disabled = l >= 0 && hd >= 0;
      discard.input.disabled = l >= 0;
      discard.text.textContent = Math.round(d * 100) + "%";
      const offset = b * layers * heads * n * n;
      let joint, what;
      if (l < 0) {
        joint = rollout(maps, offset, layers, heads, n, f, d);
        what = `rollout (${f} of heads, discard ${Math.round(d * 100)}%)`;
      } else if (hd < 0) {
        joint = fuseHeads(maps, offset + l * heads * n * n, heads, n, f);
        what = `layer ${l + 1}, ${f} of heads`;
      } else {
        joint = maps.subarray(offset + (l * heads + hd) * n * n, offset + (l * heads + hd + 1) * n * n);
        what = `layer ${l + 1}, head ${hd + 1}`;
      }
      const heat = Array.from(joint.slice(1, n)); // the class token's row, without itself
      picture.getContext("2d").drawImage(images[b], 0, 0, 168, 168);
      pictureCaption.textContent = spec.titles[b];
      drawMap(heatCanvas, heat, side, side, "inferno");
      heatCaption.textContent = "class token's attention";
      drawOverlay(overlay, images[b], heat, side, side, "inferno");
      overlayCaption.textContent = what;
      drawn(root, heat);
    }
    for (const c of [image, layer, head, fusion]) c.addEventListener("change", draw);
    discard.input.addEventListener("input", draw);
    draw();
  }

  const KINDS = { "patch-grid": patchGrid, "patch-maps": patchMaps, "attention-explorer": attentionExplorer };

  function start(root) {
    if (root.dataset.started) return;
    root.dataset.started = "1";
    const spec = JSON.parse(root.querySelector("script[type='application/json']").textContent);
    root.querySelector(".vit-fallback")?.remove();
    KINDS[root.dataset.vitWidget](root, spec).catch((error) => {
      root.dataset.error = String(error);
      element("p", { textContent: "This picker could not start: " + error }, root);
      console.error(error);
    });
  }

  window.vitWidgets = { rollout, fuseHeads, discardWeakest, colour, decode, element, start };
  const startAll = () => document.querySelectorAll("[data-vit-widget]").forEach(start);
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", startAll);
  else startAll();
})();
