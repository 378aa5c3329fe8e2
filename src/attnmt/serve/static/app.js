// attnmt's page: translate through POST /translate and draw each translation's attention
// as an SVG grid (rows: the attending pieces, columns: the attended ones; colours fixed
// 0-1). With references (and gold alignments) each line's reference is forced through the
// model: its AER is shown with a table of the AER of every layer and head (a click on a
// cell shows that map), and the gold links are outlined on its map. Plain JS, no build
// step, nothing from the network.
"use strict";

const $ = (id) => document.getElementById(id);
const SVG = "http://www.w3.org/2000/svg";
const CELL = 22;
const STOPS = [[255, 255, 255], [198, 219, 239], [107, 174, 214], [33, 113, 181], [8, 48, 107]];
const state = { info: null, results: [] }; // results: [{line, panels: [{model, data, chosen}]}]

function colour(w) {
  const x = Math.min(1, Math.max(0, w)) * (STOPS.length - 1);
  const i = Math.min(STOPS.length - 2, Math.floor(x));
  const f = x - i;
  const c = STOPS[i].map((v, k) => Math.round(v + f * (STOPS[i + 1][k] - v)));
  return `rgb(${c[0]},${c[1]},${c[2]})`;
}

function el(tag, attrs = {}, text = null, ns = null) {
  const node = ns ? document.createElementNS(ns, tag) : document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  if (text !== null) node.textContent = text;
  return node;
}

function showError(message) {
  const box = $("error");
  box.textContent = message || "";
  box.hidden = !message;
}

async function loadInfo() {
  const response = await fetch("/info");
  state.info = await response.json();
  const models = state.info.models;
  $("models").textContent = models
    .map((m) => {
      const bleu = m.valid_bleu == null ? "" : `, valid BLEU ${m.valid_bleu.toFixed(2)}`;
      const step = m.step == null ? "" : ` step ${m.step}`;
      return `${m.label}: ${m.model} ${m.corpus || ""} ${m.direction || ""}${step}${bleu}`;
    })
    .join("  ·  ");
  $("compare-box").hidden = models.length < 2;
  $("beam").max = state.info.limits.max_beam;
  $("beam").value = models[0].decode.beam;
  refreshChoices();
}

// ---------------------------------------------------------------- choices

function mapOf(translation, kind) {
  const attn = translation && translation.attention;
  return attn ? attn[kind] : null;
}

// A line's translations and, when the request gave one, its forced reference.
function targetsOf(line) {
  return line.reference ? [...line.translations, line.reference] : line.translations;
}

function refreshChoices() {
  const kind = $("kind").value;
  let layers = 0;
  let heads = 0;
  for (const result of state.results)
    for (const panel of result.panels)
      for (const line of panel.data.lines)
        for (const t of targetsOf(line)) {
          const m = mapOf(t, kind);
          if (m) {
            layers = Math.max(layers, m.length);
            heads = Math.max(heads, m[0].length);
          }
        }
  const layerOptions = [...Array(Math.max(layers, 1)).keys()].map((i) => [i, `${i + 1}`]);
  if (layers > 1) layerOptions.push(["all", "mean over layers"]);
  fill($("layer"), layerOptions, layers ? layers - 1 : 0);
  fill($("head"), [["mean", "mean over heads"], ...[...Array(heads).keys()].map((h) => [h, `${h + 1}`])],
    "mean");
  $("head").disabled = $("layer").value === "all";
}

function fill(select, options, fallback) {
  const before = select.value;
  select.replaceChildren(...options.map(([v, t]) => el("option", { value: v }, t)));
  select.value = options.some(([v]) => String(v) === before) ? before : String(fallback);
}

// The mean of a list of equally shaped matrices.
function meanOf(maps) {
  return maps[0].map((row, r) => row.map((_, c) => maps.reduce((s, h) => s + h[r][c], 0) / maps.length));
}

function matrix(translation, kind) {
  const m = mapOf(translation, kind);
  if (!m) return null;
  if ($("layer").value === "all") return meanOf(m.flat()); // every layer's every head
  const layer = m[Math.min(Number($("layer").value) || 0, m.length - 1)];
  const head = $("head").value;
  if (head !== "mean" && Number(head) < layer.length) return layer[Number(head)];
  return meanOf(layer);
}

function axes(line, translation, kind) {
  if (kind === "encoder_self") return [line.source_pieces, line.source_pieces];
  if (kind === "decoder_self") {
    const inputs = translation.attention.decoder_input_pieces;
    return [inputs, inputs];
  }
  return [translation.target_pieces, line.source_pieces];
}

// The cells the gold's word links cover on the reference's piece map ("r,c" -> {kind,
// link}): link i-j covers every (piece of target word j, piece of source word i).
function goldMarks(ref) {
  if (!ref.gold) return null;
  const marks = new Map();
  const add = (links, kind, mark) => links.forEach(([i, j]) => {
    ref.target_words.forEach((tw, r) => {
      if (tw !== j) return;
      ref.source_words.forEach((sw, c) => {
        if (sw === i) marks.set(`${r},${c}`, { kind, link: `${i}${mark}${j}` });
      });
    });
  });
  add(ref.gold.possible, "possible", "?");
  add(ref.gold.sure, "sure", "-");
  return marks;
}

// ---------------------------------------------------------------- the map

function drawMap(weights, rows, cols, marks = null) {
  const left = 12 + 7.5 * Math.max(...rows.map((p) => p.length), 1);
  const top = 12 + 6 * Math.max(...cols.map((p) => p.length), 1);
  const width = left + CELL * cols.length + 8;
  const height = top + CELL * rows.length + 8;
  const svg = el("svg", {
    class: "attn-map", width, height, viewBox: `0 0 ${width} ${height}`,
    "data-rows": rows.length, "data-cols": cols.length,
  }, null, SVG);
  const rowBg = rows.map((_, r) => svg.appendChild(el("rect", {
    class: "label-bg row-bg", "data-r": r, x: 0, y: top + r * CELL + 2, width: left - 4,
    height: CELL - 4, "fill-opacity": 0,
  }, null, SVG)));
  const colBg = cols.map((_, c) => svg.appendChild(el("rect", {
    class: "label-bg col-bg", "data-c": c, x: left + c * CELL + 2, y: 0, width: CELL - 4,
    height: top - 4, "fill-opacity": 0,
  }, null, SVG)));
  const rowText = rows.map((p, r) => svg.appendChild(el("text", {
    class: "row-label", "data-r": r, x: left - 6, y: top + r * CELL + CELL / 2 + 4, "text-anchor": "end",
  }, p, SVG)));
  const colText = cols.map((p, c) => {
    const x = left + c * CELL + CELL / 2 + 4;
    const y = top - 6;
    return svg.appendChild(el("text", {
      class: "col-label", "data-c": c, x, y, transform: `rotate(-60 ${x} ${y})`,
    }, p, SVG));
  });
  const cells = el("g", { class: "cells" }, null, SVG);
  weights.forEach((row, r) => row.forEach((w, c) => {
    const cell = el("rect", {
      class: "cell", "data-r": r, "data-c": c, x: left + c * CELL, y: top + r * CELL,
      width: CELL, height: CELL, fill: colour(w),
    }, null, SVG);
    const gold = marks && marks.get(`${r},${c}`);
    const note = gold ? ` · gold ${gold.kind} link ${gold.link}` : "";
    cell.appendChild(el("title", {}, `${rows[r]} → ${cols[c]}: ${w.toFixed(3)}${note}`, SVG));
    cells.appendChild(cell);
  }));
  svg.appendChild(cells);
  if (marks) { // outlines over the cells: solid for sure links, dashed for possible ones
    const gold = el("g", { class: "gold" }, null, SVG);
    for (const [key, m] of marks) {
      const [r, c] = key.split(",").map(Number);
      if (r >= rows.length || c >= cols.length) continue;
      gold.appendChild(el("rect", {
        class: `gold-${m.kind}`, "data-r": r, "data-c": c, x: left + c * CELL + 1.5,
        y: top + r * CELL + 1.5, width: CELL - 3, height: CELL - 3,
      }, null, SVG));
    }
    svg.appendChild(gold);
  }
  const focus = svg.appendChild(el("rect", { class: "focus", visibility: "hidden" }, null, SVG));

  function clear() {
    for (const bg of [...rowBg, ...colBg]) bg.setAttribute("fill-opacity", 0);
    for (const t of [...rowText, ...colText]) t.classList.remove("hl");
    focus.setAttribute("visibility", "hidden");
  }
  function row(r) { // what row piece r attends to: the columns, by weight
    clear();
    rowText[r].classList.add("hl");
    weights[r].forEach((w, c) => colBg[c].setAttribute("fill-opacity", w.toFixed(3)));
    Object.entries({ x: left, y: top + r * CELL, width: CELL * cols.length, height: CELL })
      .forEach(([k, v]) => focus.setAttribute(k, v));
    focus.setAttribute("visibility", "visible");
  }
  function col(c) { // which row pieces attend to column piece c, by weight
    clear();
    colText[c].classList.add("hl");
    weights.forEach((wr, r) => rowBg[r].setAttribute("fill-opacity", wr[c].toFixed(3)));
    Object.entries({ x: left + c * CELL, y: top, width: CELL, height: CELL * rows.length })
      .forEach(([k, v]) => focus.setAttribute(k, v));
    focus.setAttribute("visibility", "visible");
  }
  rowText.forEach((t, r) => t.addEventListener("mouseenter", () => row(r)));
  colText.forEach((t, c) => t.addEventListener("mouseenter", () => col(c)));
  cells.addEventListener("mouseover", (e) => {
    if (e.target.dataset && e.target.dataset.r !== undefined) row(Number(e.target.dataset.r));
  });
  svg.addEventListener("mouseleave", clear);
  return svg;
}

// ---------------------------------------------------------------- results

function scoresText(s) {
  const f = (x) => (x == null ? "n/a" : x.toFixed(3));
  return `AER ${f(s.aer)} · precision ${f(s.precision)} · recall ${f(s.recall)}` +
    ` (${s.links} links; gold: ${s.sure} sure, ${s.possible - s.sure} possible)`;
}

// The AER of every map (ref.aer_table: rows {layer: 0-based or "all", head: null or
// 0-based, aer}) as a small table, layers and heads numbered from 1 as in the selectors;
// the best cell is marked and a click on a cell shows that map.
function aerTable(table) {
  const heads = [...new Set(table.rows.filter((r) => r.head !== null).map((r) => r.head))]
    .sort((a, b) => a - b);
  const box = el("table", { class: "aer-table" });
  box.appendChild(el("caption", {}, `AER per map (lower is better; reading: words ` +
    `${table.extraction.words}, </s> ${table.extraction.eos}, step ${table.extraction.step})`));
  const head = el("tr");
  ["layer", "mean of heads", ...heads.map((h) => `head ${h + 1}`)]
    .forEach((t) => head.appendChild(el("th", {}, t)));
  box.appendChild(head);
  const layers = [...new Set(table.rows.map((r) => r.layer))];
  for (const layer of layers) {
    const tr = el("tr");
    tr.appendChild(el("th", {}, layer === "all" ? "mean over layers" : `${layer + 1}`));
    for (const h of [null, ...heads]) {
      const row = table.rows.find((r) => r.layer === layer && r.head === h);
      const td = el("td", row ? { "data-layer": layer, "data-head": h === null ? "mean" : h } : {},
        row ? (row.aer == null ? "n/a" : row.aer.toFixed(3)) : "");
      if (row && row.map === table.best) td.classList.add("best");
      if (row) {
        td.title = `${row.map}: precision ${row.precision == null ? "n/a" : row.precision.toFixed(3)}` +
          `, recall ${row.recall == null ? "n/a" : row.recall.toFixed(3)}, ${row.links} links`;
        td.addEventListener("click", () => { // the reference's own click then draws it
          $("kind").value = "cross";
          refreshChoices();
          $("layer").value = String(layer);
          $("head").value = h === null ? "mean" : String(h);
          $("head").disabled = layer === "all";
        });
      }
      tr.appendChild(td);
    }
    box.appendChild(tr);
  }
  return box;
}

function referenceItem(ref, panel) {
  const item = el("div", {
    class: panel.chosen === "ref" ? "translation reference selected" : "translation reference",
  });
  item.appendChild(el("span", { class: "label" }, "reference"));
  item.appendChild(el("span", { class: "text" }, ref.text));
  item.appendChild(el("span", { class: "alignment" }, ref.alignment));
  item.appendChild(el("div", { class: "aer" },
    ref.scores ? scoresText(ref.scores) : "forced alignment (no gold alignment given)"));
  if (ref.aer_table && ref.aer_table.rows.length > 1) item.appendChild(aerTable(ref.aer_table));
  item.addEventListener("click", () => { panel.chosen = "ref"; render(); });
  return item;
}

function renderPanel(line, panel, model) {
  const box = el("div", { class: "panel" });
  if (state.results.length && state.results[0].panels.length > 1)
    box.appendChild(el("h3", {}, `${model.label}: ${model.model} (${model.given})`));
  for (const w of line.warnings) box.appendChild(el("div", { class: "warning" }, w));
  const list = el("ol", { class: "nbest" });
  line.translations.forEach((t, i) => {
    const item = el("li", { class: i === panel.chosen ? "translation selected" : "translation" });
    item.appendChild(el("span", { class: "text" }, t.text));
    if (t.score != null) item.appendChild(el("span", { class: "score" }, t.score.toFixed(3)));
    if (t.alignment != null) item.appendChild(el("span", { class: "alignment" }, t.alignment));
    item.addEventListener("click", () => { panel.chosen = i; render(); });
    list.appendChild(item);
  });
  box.appendChild(list);
  if (line.reference) box.appendChild(referenceItem(line.reference, panel));
  const t = panel.chosen === "ref" ? line.reference : line.translations[panel.chosen];
  const map = el("div", { class: "map" });
  const kind = $("kind").value;
  const weights = t ? matrix(t, kind) : null;
  if (weights) {
    const [rows, cols] = axes(line, t, kind);
    const marks = t === line.reference && kind === "cross" ? goldMarks(t) : null;
    map.appendChild(drawMap(weights, rows, cols, marks));
    if (marks) map.appendChild(el("div", { class: "muted gold-legend" },
      "gold links outlined over every piece of the linked words: solid sure, dashed possible"));
  } else if (t) {
    const missing = t.attention === null ? "maps left out of this answer (see the warning)"
      : `no ${kind.replace("_", " ")} attention for this model`;
    map.appendChild(el("div", { class: "muted" }, panel.data.attention_note || missing));
  }
  box.appendChild(map);
  return box;
}

function render() {
  const out = $("results");
  out.replaceChildren();
  state.results.forEach((result, i) => {
    const card = el("section", { class: "line" });
    card.appendChild(el("div", { class: "source" }, result.line));
    const panels = el("div", { class: "panels" });
    result.panels.forEach((panel) => {
      const line = panel.data.lines[i];
      panels.appendChild(renderPanel(line, panel, state.info.models[panel.model]));
    });
    card.appendChild(panels);
    out.appendChild(card);
  });
}

async function translate(event) {
  event.preventDefault();
  showError("");
  const at = (id, k) => { // line k of a textarea; null when missing or blank
    const l = $(id).value.split("\n")[k];
    return l && l.trim() ? l : null;
  };
  const rows = $("src").value.split("\n")
    .map((line, k) => ({ line, ref: at("ref", k), gold: at("gold", k) }))
    .filter((r) => r.line.trim());
  const lines = rows.map((r) => r.line);
  if (!lines.length) return showError("text: type a sentence first");
  const n = Number($("nbest").value);
  const beam = Math.max(Number($("beam").value) || 1, n);
  const compare = state.info.models.length > 1 && $("compare").checked;
  const chosen = compare ? [0, 1] : [0];
  $("go").disabled = true;
  try {
    const answers = await Promise.all(chosen.map(async (model) => {
      const info = state.info.models[model];
      const body = { text: lines, beam, attention: true, model };
      if (info.backend === "attnmt") {
        Object.assign(body, { n_best: n, alignments: true });
        if (rows.some((r) => r.ref !== null)) body.reference = rows.map((r) => r.ref);
        if (rows.some((r) => r.gold !== null)) body.gold = rows.map((r) => r.gold);
      }
      const response = await fetch("/translate", {
        method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body),
      });
      const data = await response.json();
      if (!response.ok) throw new Error(`${info.label}: ${data.error}`);
      return { model, data };
    }));
    state.results = lines.map((line) => ({ line, panels: [] }));
    state.results.forEach((result, i) => {
      result.panels = answers.map(({ model, data }) => ({
        model, data, chosen: data.lines[i].reference ? "ref" : 0,
      }));
    });
    refreshChoices();
    render();
  } catch (err) {
    showError(err.message);
  } finally {
    $("go").disabled = false;
  }
}

$("form").addEventListener("submit", translate);
$("src").addEventListener("keydown", (e) => {
  if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) translate(e);
});
for (const id of ["kind", "layer", "head"])
  $(id).addEventListener("change", () => {
    if (id === "kind") refreshChoices();
    $("head").disabled = $("layer").value === "all";
    render();
  });
loadInfo().catch((err) => showError(`cannot read /info: ${err.message}`));
