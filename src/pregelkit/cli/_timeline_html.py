"""``pregelkit timeline THREAD --html FILE``: one self-contained page with the
thread's attempts as an SVG Gantt chart, to open in any browser, attach to a
bug report or archive.

Everything is inline (styles, script, data) and the page's
Content-Security-Policy forbids loading anything, so it works offline and
cannot call out. User text (task names, error messages, ids) reaches the page
only as JSON inside a data block, with ``<``, ``>`` and ``&`` escaped, and the
script puts it into the document as text nodes, never as markup: a task
named ``<script>`` shows as those characters.

Each run is a section with its own axis, times relative to the run's
start, so runs days apart still show side by side; zooming (wheel, or the
buttons) and panning (drag) move every run's axis together. Hovering a bar
shows the attempt's details.
"""

from __future__ import annotations

import html
import json
from typing import TYPE_CHECKING, Any

from pregelkit.cli._timeline_data import (
    RUNNING,
    UNFINISHED,
    attempt_number,
    drawn_end,
    run_title,
    seconds,
    size,
    status_of,
)

if TYPE_CHECKING:
    from pregelkit.checkpoint.attempts import AttemptRecord
    from pregelkit.observe.timeline import RunTimeline, Timeline

_ERROR_CHARS = 2000
"""Longer error messages are cut in the tooltip (the full text is in --json)."""


def render_html(timeline: Timeline, *, running: bool, now: float) -> str:
    """The page for ``timeline``; ``running``: its last run holds the thread
    now (attempts without an outcome still go)."""
    runs = [
        _run_view(run, i, len(timeline.runs), running and i == len(timeline.runs), now)
        for i, run in enumerate(timeline.runs, 1)
    ]
    data = {"thread_id": timeline.thread_id, "runs": runs}
    return _PAGE.format(
        title=html.escape(f"pregelkit timeline: {timeline.thread_id}"),
        thread=html.escape(timeline.thread_id),
        heading=html.escape(size(timeline)),
        style=_STYLE,
        script=_SCRIPT,
        data=_script_json(data),
    )


def _script_json(data: Any) -> str:
    """JSON that cannot end its ``<script>`` block nor open a comment there."""
    text = json.dumps(data, ensure_ascii=True)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _run_view(run: RunTimeline, index: int, count: int, live: bool, now: float) -> dict[str, Any]:
    end = drawn_end(run, live=live, now=now)
    return {
        "title": run_title(run, index, count, live=live, now=now),
        "span": end - run.started_at,
        "attempts": [_attempt_view(a, run.started_at, end, live) for a in run.attempts],
    }


def _attempt_view(a: AttemptRecord, start: float, end: float, live: bool) -> dict[str, Any]:
    status = status_of(a, live=live)
    if status == RUNNING:
        took = f"running for {seconds(end - a.started_at)}"
    elif status == UNFINISHED:
        took = "never finished (its process stopped)"
    else:
        took = seconds(a.duration)
    error = None
    if a.error_type or a.error_message:
        error = f"{a.error_type or 'error'}: {a.error_message or ''}"[:_ERROR_CHARS]
    return {
        "name": a.name,
        "status": status,
        "attempt": a.attempt,
        "attempt_shown": attempt_number(a),
        "step": a.step,
        "task_id": a.task_id,
        "from": a.started_at - start,
        "to": (end if a.ended_at is None else a.ended_at) - start,
        "open": a.ended_at is None,
        "duration": took,
        "error": error,
        "where": " ".join(
            p for p in (a.host, None if a.pid is None else f"pid {a.pid}", a.worker) if p
        ),
    }


_STYLE = """
:root { font: 13px/1.4 system-ui, sans-serif; color: #212529; }
body { margin: 16px; }
h1 { font-size: 18px; margin: 0 0 4px; }
h1 code { font-size: 16px; }
.bar { cursor: default; }
.s-ok { fill: #2f9e44; } .s-error { fill: #e03131; } .s-interrupted { fill: #f08c00; }
.s-cached { fill: #1c7ed6; } .s-replayed { fill: #adb5bd; } .s-timeout { fill: #ae3ec9; }
.s-cancelled { fill: #495057; }
.s-running { fill: url(#hatch-running); stroke: #0ca678; }
.s-unfinished { fill: url(#hatch-unfinished); stroke: #e8590c; stroke-dasharray: 4 2; }
.bar:hover, .bar.hover { stroke: #000; stroke-width: 1.5; }
.legend span { display: inline-block; margin-right: 12px; }
.legend i { display: inline-block; width: 12px; height: 12px; margin-right: 4px;
  vertical-align: -2px; border-radius: 2px; }
.controls { margin: 8px 0; }
.controls button { font: inherit; min-width: 32px; }
.hint { color: #868e96; margin-left: 8px; }
#chart { border: 1px solid #dee2e6; user-select: none; overflow: hidden; }
#chart.dragging { cursor: grabbing; }
svg text { font-size: 12px; fill: #212529; }
svg .run-title { font-weight: 600; }
svg .tick { fill: #868e96; font-size: 11px; }
svg .grid { stroke: #f1f3f5; }
svg .sep { stroke: #adb5bd; }
svg .retry { fill: #e8590c; font-weight: 600; }
#tip { position: fixed; pointer-events: none; background: #212529; color: #f8f9fa;
  padding: 6px 8px; border-radius: 4px; max-width: 480px; white-space: pre-wrap;
  word-break: break-word; font-size: 12px; z-index: 10; }
#tip b { color: #fff; }
"""

_SCRIPT = r"""
"use strict";
(function () {
  const data = JSON.parse(document.getElementById("timeline-data").textContent);
  const NS = "http://www.w3.org/2000/svg";
  const LABEL_W = 280, ROW = 22, TITLE = 26, AXIS = 20, GAP = 14, RIGHT = 16;
  const STATUSES = ["ok", "error", "interrupted", "cached", "replayed", "timeout",
    "cancelled", "running", "unfinished"];
  const svg = document.getElementById("timeline");
  const chart = document.getElementById("chart");
  const tip = document.getElementById("tip");
  const full = Math.max(1e-3, ...data.runs.map((r) => r.span));
  let t0 = 0, t1 = full;
  const bars = [], axes = [];

  function el(name, attrs, parent) {
    const node = document.createElementNS(NS, name);
    for (const key in attrs) node.setAttribute(key, attrs[key]);
    if (parent) parent.appendChild(node);
    return node;
  }
  function text(parent, x, y, content, cls) {
    const node = el("text", {x: x, y: y}, parent);
    if (cls) node.setAttribute("class", cls);
    node.textContent = content;
    return node;
  }
  function clip(s, n) { return s.length <= n ? s : s.slice(0, n - 1) + "\u2026"; }
  function plotWidth() { return Math.max(100, chart.clientWidth - LABEL_W - RIGHT); }
  function x(t) { return LABEL_W + (t - t0) / (t1 - t0) * plotWidth(); }
  function fmt(s) {
    if (s === 0) return "0s";
    if (Math.abs(s) < 1) return +(s * 1000).toPrecision(3) + "ms";
    if (Math.abs(s) < 120) return +s.toPrecision(4) + "s";
    return +(s / 60).toPrecision(4) + "m";
  }

  function legend() {
    const box = document.getElementById("legend");
    const used = new Set();
    data.runs.forEach((r) => r.attempts.forEach((a) => used.add(a.status)));
    STATUSES.filter((s) => used.has(s)).forEach((s) => {
      const item = document.createElement("span");
      const sw = document.createElement("i");
      const probe = el("rect", {class: "s-" + s}, svg);
      const style = getComputedStyle(probe);
      sw.style.background = style.fill.startsWith("url") ? style.stroke : style.fill;
      probe.remove();
      item.appendChild(sw);
      item.appendChild(document.createTextNode(s));
      box.appendChild(item);
    });
  }

  function build() {
    const defs = el("defs", {}, svg);
    [["running", "#0ca678"], ["unfinished", "#e8590c"]].forEach(([name, colour]) => {
      const p = el("pattern", {id: "hatch-" + name, width: 6, height: 6,
        patternUnits: "userSpaceOnUse", patternTransform: "rotate(45)"}, defs);
      el("rect", {width: 6, height: 6, fill: "#fff"}, p);
      el("rect", {width: 3, height: 6, fill: colour, opacity: 0.7}, p);
    });
    el("rect", {x: 0, y: 0, width: "100%", height: "100%", fill: "transparent"}, svg);
    let y = 8;
    data.runs.forEach((run, ri) => {
      if (ri > 0) el("line", {class: "sep", x1: 0, x2: "100%", y1: y - GAP / 2,
        y2: y - GAP / 2}, svg);
      text(svg, 4, y + 16, run.title, "run-title");
      y += TITLE;
      const axis = {y: y, top: y + AXIS, rows: run.attempts.length, group: el("g", {}, svg)};
      axes.push(axis);
      y += AXIS;
      run.attempts.forEach((a) => {
        const label = text(svg, 4, y + 15, "", null);
        const stepSpan = el("tspan", {class: "tick"}, label);
        stepSpan.textContent = "step " + a.step + "  ";
        const nameSpan = el("tspan", {}, label);
        nameSpan.textContent = clip(a.name, 30);
        if (a.attempt > 1) {
          const r = el("tspan", {class: "retry"}, label);
          r.textContent = "  \u21bb" + a.attempt;
        }
        const rect = el("rect", {class: "bar s-" + a.status, y: y + 4, height: ROW - 8,
          rx: 2, "data-index": bars.length}, svg);
        bars.push({rect: rect, a: a});
        y += ROW;
      });
      y += GAP;
    });
    svg.setAttribute("height", Math.max(y, 40));
    const clipPath = el("clipPath", {id: "plot"}, defs);
    el("rect", {x: LABEL_W, y: 0, width: 100000, height: 100000}, clipPath);
    bars.forEach((b) => b.rect.setAttribute("clip-path", "url(#plot)"));
  }

  function niceStep(span, px) {
    const raw = span / Math.max(1, Math.floor(px / 90));
    const p = Math.pow(10, Math.floor(Math.log10(raw)));
    for (const m of [1, 2, 5, 10]) if (m * p >= raw) return m * p;
    return 10 * p;
  }

  function layout() {
    const w = plotWidth();
    svg.setAttribute("width", LABEL_W + w + RIGHT);
    svg.dataset.t0 = t0;
    svg.dataset.t1 = t1;
    bars.forEach((b) => {
      const left = Math.max(x(b.a.from), LABEL_W - 10);
      const right = Math.min(x(b.a.to), LABEL_W + w + 10);
      b.rect.setAttribute("x", left);
      b.rect.setAttribute("width", Math.max(3, right - left));
      b.rect.style.display = x(b.a.to) < LABEL_W - 3 || x(b.a.from) > LABEL_W + w ? "none" : "";
    });
    const step = niceStep(t1 - t0, w);
    axes.forEach((axis) => {
      while (axis.group.firstChild) axis.group.firstChild.remove();
      for (let t = Math.ceil(t0 / step) * step; t <= t1 + step * 1e-9; t += step) {
        const px = x(t);
        el("line", {class: "grid", x1: px, x2: px, y1: axis.y + 14,
          y2: axis.top + axis.rows * ROW}, axis.group);
        text(axis.group, px + 2, axis.y + 12, fmt(t), "tick");
      }
    });
  }

  function zoom(factor, at) {
    const span = Math.min(full * 1.05, Math.max(1e-6, (t1 - t0) * factor));
    const tAt = t0 + (at - LABEL_W) / plotWidth() * (t1 - t0);
    const f = (tAt - t0) / (t1 - t0);
    show(tAt - f * span, span);
  }

  // the view keeps at least a tenth of itself over the runs: panning never
  // loses the chart
  function show(start, span) {
    t0 = Math.min(full - span * 0.1, Math.max(-span * 0.9, start));
    t1 = t0 + span;
    layout();
  }

  function reset() { t0 = 0; t1 = full; layout(); }

  function showTip(b, ev) {
    const a = b.a;
    while (tip.firstChild) tip.firstChild.remove();
    const name = document.createElement("b");
    name.textContent = a.name;
    tip.appendChild(name);
    const lines = ["duration: " + a.duration, "outcome: " + a.status,
      "attempt: " + a.attempt_shown, "step: " + a.step, "task: " + a.task_id];
    if (a.where) lines.push("ran on: " + a.where);
    if (a.error) lines.push("error: " + a.error);
    tip.appendChild(document.createTextNode("\n" + lines.join("\n")));
    tip.hidden = false;
    moveTip(ev);
  }
  function moveTip(ev) {
    const pad = 14;
    let left = ev.clientX + pad, top = ev.clientY + pad;
    if (left + tip.offsetWidth > window.innerWidth) left = ev.clientX - tip.offsetWidth - pad;
    if (top + tip.offsetHeight > window.innerHeight) top = ev.clientY - tip.offsetHeight - pad;
    tip.style.left = Math.max(0, left) + "px";
    tip.style.top = Math.max(0, top) + "px";
  }

  build();
  legend();
  layout();
  let drag = null;
  svg.addEventListener("wheel", (ev) => {
    ev.preventDefault();
    const box = svg.getBoundingClientRect();
    // a wheel notch (about 100 pixels, or 3 lines) zooms by about a fifth; a
    // touchpad's many small steps add up to the same
    const amount = ev.deltaY * (ev.deltaMode ? 0.06 : 0.002);
    zoom(Math.exp(Math.max(-1, Math.min(1, amount))), Math.max(LABEL_W, ev.clientX - box.left));
  }, {passive: false});
  svg.addEventListener("mousedown", (ev) => {
    drag = {x: ev.clientX, t0: t0, t1: t1};
    chart.classList.add("dragging");
  });
  window.addEventListener("mousemove", (ev) => {
    if (!drag) return;
    const dt = (drag.x - ev.clientX) / plotWidth() * (drag.t1 - drag.t0);
    show(drag.t0 + dt, drag.t1 - drag.t0);
  });
  window.addEventListener("mouseup", () => { drag = null; chart.classList.remove("dragging"); });
  svg.addEventListener("dblclick", reset);
  svg.addEventListener("mouseover", (ev) => {
    const i = ev.target.dataset && ev.target.dataset.index;
    if (i !== undefined) showTip(bars[+i], ev);
  });
  svg.addEventListener("mousemove", (ev) => { if (!tip.hidden) moveTip(ev); });
  svg.addEventListener("mouseout", (ev) => {
    if (ev.target.dataset && ev.target.dataset.index !== undefined) tip.hidden = true;
  });
  const centre = () => LABEL_W + plotWidth() / 2;
  document.getElementById("zoom-in").addEventListener("click", () => zoom(1 / 1.5, centre()));
  document.getElementById("zoom-out").addEventListener("click", () => zoom(1.5, centre()));
  document.getElementById("reset").addEventListener("click", reset);
  window.addEventListener("resize", layout);
  if (!bars.length) document.getElementById("empty").hidden = false;
})();
"""

_PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy"
  content="default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title>
<style>{style}</style>
</head>
<body>
<h1>Timeline of thread <code>{thread}</code></h1>
<div>{heading}</div>
<div class="legend" id="legend"></div>
<div class="controls">
<button id="zoom-in" title="zoom in">+</button>
<button id="zoom-out" title="zoom out">&minus;</button>
<button id="reset" title="show everything">reset</button>
<span class="hint">wheel: zoom &middot; drag: pan &middot; double-click: reset &middot;
hover a bar for details</span>
</div>
<p id="empty" hidden>No attempts recorded for this thread.</p>
<noscript><p>The chart needs JavaScript; <code>pregelkit timeline --json</code> gives
the same data as text.</p></noscript>
<div id="chart"><svg id="timeline" xmlns="http://www.w3.org/2000/svg"
  role="img" aria-label="attempts of each run over time"></svg></div>
<div id="tip" role="tooltip" hidden></div>
<script type="application/json" id="timeline-data">{data}</script>
<script>{script}</script>
</body>
</html>
"""
