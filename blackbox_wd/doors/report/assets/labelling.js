/* bbwd report --suggest N: rows labelled in the page. The suggested rows first (as bbwd calibrate --suggest N picks
   them), then the others by risk; keys h (hallucinated, 1), c (correct, 0), s (skip), u (undo), or the buttons of
   the same names. The labels are kept in localStorage under the scored file's content key and downloaded as
   labels.jsonl. Nothing leaves the page; text from the log is only ever put into it with textContent. */
(function () {
  "use strict";
  var P = window.bbwdPage;
  var L = P.meta.labelling;
  if (!L) return;
  var D = P.D, el = P.el, n = D.id.length;
  var storeKey = "bbwd-labels:" + L.key;
  var rowsOf = new Map(); // id -> the indices of its rows (the same id scored at several K shares one label)
  for (var i = 0; i < n; i++) {
    var id = String(D.id[i]);
    if (!rowsOf.has(id)) rowsOf.set(id, []);
    rowsOf.get(id).push(i);
  }
  var labels = load(); // id -> 0 or 1 (a Map: an id is never an object's key)
  var panel = document.getElementById("labelling");
  var queue = null; // the row indices in the order asked
  var pos = 0;
  var history = []; // {pos, id, had}: what undo puts back (id null: a skip)

  function load() {
    try {
      var kept = JSON.parse(window.localStorage.getItem(storeKey) || "[]");
      var ok = function (e) { return Array.isArray(e) && rowsOf.has(e[0]) && (e[1] === 0 || e[1] === 1); };
      return new Map(Array.isArray(kept) ? kept.filter(ok) : []);
    } catch (e) {
      return new Map();
    }
  }
  function save() {
    try {
      window.localStorage.setItem(storeKey, JSON.stringify(Array.from(labels.entries())));
    } catch (e) {
      document.getElementById("label-note").textContent =
        "This browser keeps no local storage here: download the labels before you close the page.";
    }
  }
  function buildQueue() {
    var picked = new Set(L.suggested);
    var rest = [];
    for (var i = 0; i < n; i++) if (!picked.has(i) && !D.error[i]) rest.push(i);
    rest.sort(function (a, b) {
      var ra = D.risk[a], rb = D.risk[b];
      if (ra === rb) return a - b;
      if (ra === null) return 1;
      if (rb === null) return -1;
      return rb - ra;
    });
    return L.suggested.concat(rest);
  }
  function showInTable(id) {
    var v = labels.has(id) ? labels.get(id) : null;
    P.table.updateData((rowsOf.get(id) || []).map(function (i) { return { i: i, mine: v }; }));
  }
  function count() {
    var hallucinated = 0, suggestedDone = 0;
    labels.forEach(function (v) { hallucinated += v; });
    L.suggested.forEach(function (i) { if (labels.has(String(D.id[i]))) suggestedDone += 1; });
    document.getElementById("n-mine").textContent = String(labels.size);
    document.getElementById("n-mine-h").textContent = String(hallucinated);
    document.getElementById("n-mine-suggested").textContent = String(suggestedDone);
  }
  function render() {
    var box = document.getElementById("label-row");
    box.replaceChildren();
    var where = document.getElementById("label-where");
    if (pos >= queue.length) {
      panel.removeAttribute("data-labelling");
      where.textContent = "";
      box.appendChild(el("p", "hint", "Every row is asked: download the labels, then bbwd calibrate SCORES --labels labels.jsonl."));
      return;
    }
    var i = queue[pos];
    var id = String(D.id[i]);
    panel.setAttribute("data-labelling", id);
    panel.setAttribute("data-row", String(i));
    where.textContent = "row " + (pos + 1) + " of " + queue.length + (pos < L.suggested.length ? " (suggested)" : " (by risk)");
    var h = el("h2", "label-id", id);
    h.appendChild(el("span", "pill", "line " + D.line[i]));
    h.appendChild(el("span", "pill", "risk " + P.fmt(D.risk[i])));
    if (labels.has(id)) h.appendChild(el("span", "pill", "your label " + labels.get(id)));
    box.appendChild(h);
    box.appendChild(el("h3", null, "Prompt"));
    box.appendChild(el("div", "text prompt", D.prompt[i] || "(not in the rows: give the log with --log)"));
    if (D.answer[i] !== null) {
      box.appendChild(el("h3", null, "Judged answer, each sentence shaded by its risk"));
      box.appendChild(P.answerBlock(D.answer[i], D.sentences[i]));
    }
    if (D.samples[i]) {
      box.appendChild(el("h3", null, "Samples (" + D.samples[i].length + ")"));
      var ol = el("ol", "samples");
      D.samples[i].forEach(function (s) { ol.appendChild(el("li", null, s)); });
      box.appendChild(ol);
    }
  }
  function act(key) {
    if (!queue || panel.hidden) return;
    if (key === "u") {
      var last = history.pop();
      if (!last) return;
      if (last.id !== null) {
        if (last.had === null) labels.delete(last.id);
        else labels.set(last.id, last.had);
        save();
        showInTable(last.id);
      }
      pos = last.pos;
    } else {
      if (pos >= queue.length) return;
      var id = String(D.id[queue[pos]]);
      if (key === "s") {
        history.push({ pos: pos, id: null, had: null });
      } else {
        history.push({ pos: pos, id: id, had: labels.has(id) ? labels.get(id) : null });
        labels.set(id, key === "h" ? 1 : 0);
        save();
        showInTable(id);
      }
      pos += 1;
    }
    count();
    render();
  }
  function start() {
    queue = queue || buildQueue();
    pos = 0;
    while (pos < queue.length && labels.has(String(D.id[queue[pos]]))) pos += 1; // on at the first row not labelled
    panel.hidden = false;
    render();
    document.getElementById("label-bar").scrollIntoView({ block: "nearest" });
  }
  function download() {
    var lines = [];
    rowsOf.forEach(function (_, id) {
      if (labels.has(id)) lines.push(JSON.stringify({ id: id, label: labels.get(id) }) + "\n");
    });
    var url = URL.createObjectURL(new Blob(lines, { type: "application/x-ndjson" }));
    var a = document.createElement("a");
    a.href = url;
    a.download = "labels.jsonl";
    document.body.appendChild(a);
    a.click();
    a.remove();
    setTimeout(function () { URL.revokeObjectURL(url); }, 1000);
  }

  document.getElementById("label-start").addEventListener("click", start);
  document.getElementById("label-download").addEventListener("click", download);
  document.getElementById("label-stop").addEventListener("click", function () { panel.hidden = true; });
  ["h", "c", "s", "u"].forEach(function (key) {
    document.getElementById("label-" + key).addEventListener("click", function () { act(key); });
  });
  document.addEventListener("keydown", function (e) {
    var t = e.target;
    if (e.ctrlKey || e.metaKey || e.altKey || (t && (t.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(t.tagName)))) return;
    var key = e.key.toLowerCase();
    if (key === "h" || key === "c" || key === "s" || key === "u") {
      if (!queue || panel.hidden) return;
      e.preventDefault();
      act(key);
    }
  });
  function shown() {
    labels.forEach(function (_, id) { if (rowsOf.has(id)) showInTable(id); });
  }
  if (P.built) shown();
  else P.table.on("tableBuilt", shown);
  count();
  window.bbwdLabels = labels;
})();
