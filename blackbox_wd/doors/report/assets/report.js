/* bbwd report: the rows table (Tabulator), the charts (uPlot) and a row's detail.
   Text from the log is only ever put into the page with textContent, never as markup. */
(function () {
  "use strict";
  var meta = JSON.parse(document.getElementById("bbwd-meta").textContent);
  var D = JSON.parse(document.getElementById("bbwd-data").textContent);
  var S = meta.summary;
  var n = D.id.length;

  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  function fmt(v, digits) {
    return v === null || v === undefined ? "n/a" : Number(v).toFixed(digits === undefined ? 3 : digits);
  }
  // risk in [0, 1] -> a green (0) to red (1) shade
  function shade(p, alpha) {
    if (p === null || p === undefined) return "transparent";
    var q = Math.max(0, Math.min(1, p));
    return "hsla(" + Math.round(120 * (1 - q)) + ", 75%, 50%, " + (alpha || 0.35) + ")";
  }

  // ---- the table --------------------------------------------------------------------------------------------
  var rows = new Array(n);
  for (var i = 0; i < n; i++) {
    var a = D.answer[i];
    rows[i] = {
      i: i,
      id: D.id[i],
      risk: D.risk[i],
      flag: D.flag[i],
      label: D.label[i],
      err: D.error[i] ? 1 : 0,
      text: D.error[i] ? D.error[i] : a ? a.slice(0, 200) : ""
    };
  }
  function textCell(cell) {
    var v = cell.getValue();
    return el("span", null, v === null || v === undefined ? "" : v);
  }
  function riskCell(cell) {
    var v = cell.getValue();
    var s = el("span", "riskcell", v === null ? "–" : fmt(v));
    s.style.background = shade(v, 0.45);
    return s;
  }
  function verdictCell(cell) {
    var d = cell.getRow().getData();
    if (d.err) return el("span", "pill err", "error");
    if (d.flag === 1) return el("span", "pill flag", "flagged");
    return el("span", null, d.flag === 0 ? "" : "–");
  }
  var columns = [
    { title: "#", field: "i", sorter: "number", width: 70, formatter: function (c) { return el("span", null, D.line[c.getValue()]); } },
    { title: "id", field: "id", sorter: "string", width: 150, formatter: textCell },
    { title: "risk", field: "risk", sorter: "number", width: 90, hozAlign: "right", sorterParams: { alignEmptyValues: "bottom" }, formatter: riskCell },
    { title: "verdict", field: "flag", sorter: "number", width: 90, formatter: verdictCell },
    { title: "answer", field: "text", sorter: "string", formatter: textCell, headerSort: false }
  ];
  if (D.label.some(function (v) { return v !== null; })) {
    columns.splice(4, 0, { title: "label", field: "label", sorter: "number", width: 70, formatter: textCell });
  }
  if (meta.labelling) {
    // the labels given in the page (labelling.js fills them in)
    columns.splice(columns.length - 1, 0, { title: "yours", field: "mine", sorter: "number", width: 75, formatter: textCell });
  }
  // sorted by risk here (nulls last), so that the table's initial sort finds them in order: 0.5 s less at 100,000
  rows.sort(function (a, b) {
    if (a.risk === b.risk) return a.i - b.i;
    if (a.risk === null) return 1;
    if (b.risk === null) return -1;
    return b.risk - a.risk;
  });
  var table = new Tabulator("#table", {
    data: rows,
    index: "i",
    layout: "fitColumns",
    columns: columns,
    initialSort: [{ column: "risk", dir: "desc" }],
    pagination: true,
    paginationSize: 25,
    paginationSizeSelector: [25, 50, 100, 500],
    paginationCounter: "rows"
  });
  // what labelling.js reuses: the data, the table and the helpers that put text into the page
  var page = { meta: meta, D: D, table: table, built: false, el: el, fmt: fmt, shade: shade };
  window.bbwdPage = page;

  var search = document.getElementById("search");
  var onlyFlagged = document.getElementById("only-flagged");
  var onlyErrors = document.getElementById("only-errors");
  function keep(d) {
    if (onlyFlagged.checked && d.flag !== 1) return false;
    if (onlyErrors.checked && !d.err) return false;
    var q = search.value.trim().toLowerCase();
    if (!q) return true;
    var i = d.i;
    return (
      String(D.id[i]).toLowerCase().indexOf(q) >= 0 ||
      (D.answer[i] || "").toLowerCase().indexOf(q) >= 0 ||
      (D.prompt[i] || "").toLowerCase().indexOf(q) >= 0 ||
      (D.error[i] || "").toLowerCase().indexOf(q) >= 0
    );
  }
  function refilter() {
    if (!onlyFlagged.checked && !onlyErrors.checked && !search.value.trim()) table.clearFilter();
    else table.setFilter(keep);
  }
  var timer = null;
  search.addEventListener("input", function () {
    clearTimeout(timer);
    timer = setTimeout(refilter, 200);
  });
  onlyFlagged.addEventListener("change", refilter);
  onlyErrors.addEventListener("change", refilter);
  var shown = document.getElementById("shown");
  table.on("dataFiltered", function (filters, active) {
    shown.textContent = active.length + " of " + n + " rows";
  });
  var openRow = null;
  table.on("rowClick", function (e, row) {
    if (openRow) openRow.getElement().classList.remove("open");
    openRow = row;
    row.getElement().classList.add("open");
    show(row.getData().i);
  });
  table.on("tableBuilt", function () {
    page.built = true;
    shown.textContent = n + " of " + n + " rows";
    requestAnimationFrame(function () {
      document.body.setAttribute("data-ready", "1");
    });
  });
  window.bbwdTable = table;

  // ---- a row opened -----------------------------------------------------------------------------------------
  function ranks(values) {
    // each score's rank among the answer's scores, in [0, 1] (where a sentence has no calibrated p)
    var known = values.filter(function (v) { return v !== null; });
    return values.map(function (v) {
      if (v === null || known.length === 0) return null;
      var below = known.filter(function (k) { return k < v; }).length;
      var same = known.filter(function (k) { return k === v; }).length;
      return known.length === 1 ? 0.5 : (below + (same - 1) / 2) / (known.length - 1);
    });
  }
  function answerBlock(answer, sentences) {
    var box = el("div", "text answer");
    if (!sentences || !sentences.length) {
      box.textContent = answer;
      return box;
    }
    var sorted = sentences.slice().sort(function (x, y) { return x[0] - y[0]; });
    var fallback = ranks(sorted.map(function (s) { return s[3]; }));
    var at = 0;
    sorted.forEach(function (s, k) {
      if (s[0] < at) return;
      if (s[0] > at) box.appendChild(document.createTextNode(answer.slice(at, s[0])));
      var risk = s[2] !== null ? s[2] : fallback[k];
      var span = el("span", "sent" + (s[4] === 1 ? " flag" : ""), answer.slice(s[0], s[1]));
      span.style.background = shade(risk);
      span.setAttribute("data-risk", risk === null ? "" : String(risk));
      span.title = (s[2] !== null ? "p " + fmt(s[2]) : "no p: shaded by its score's rank") + ", score " + fmt(s[3]) +
        (s[4] === 1 ? ", flagged" : "");
      box.appendChild(span);
      at = s[1];
    });
    if (at < answer.length) box.appendChild(document.createTextNode(answer.slice(at)));
    return box;
  }
  function show(i) {
    var box = document.getElementById("detail");
    box.replaceChildren();
    var h = el("h2", null, String(D.id[i]));
    h.appendChild(el("span", "pill", "line " + D.line[i]));
    h.appendChild(el("span", "pill", "risk " + fmt(D.risk[i])));
    if (D.flag[i] === 1) h.appendChild(el("span", "pill flag", "flagged"));
    if (D.label[i] !== null) h.appendChild(el("span", "pill", "label " + D.label[i]));
    box.appendChild(h);
    if (D.error[i]) {
      box.appendChild(el("h3", null, "Error"));
      box.appendChild(el("div", "text", D.error[i]));
    }
    box.appendChild(el("h3", null, "Prompt"));
    box.appendChild(el("div", "text prompt", D.prompt[i] || "(not in the rows: give the log with --log)"));
    if (D.answer[i] !== null) {
      box.appendChild(el("h3", null, "Judged answer, each sentence shaded by its risk"));
      box.appendChild(answerBlock(D.answer[i], D.sentences[i]));
    }
    if (D.claims[i]) {
      box.appendChild(el("h3", null, "Claims"));
      var ct = el("table", "claims");
      D.claims[i].forEach(function (c) {
        var tr = el("tr");
        var td = el("td", "sent" + (c[3] ? " flag" : ""), c[0]);
        td.style.background = shade(c[1]);
        tr.appendChild(td);
        tr.appendChild(el("td", null, c[1] !== null ? "p " + fmt(c[1]) : "score " + fmt(c[2])));
        ct.appendChild(tr);
      });
      box.appendChild(ct);
    }
    if (D.members[i]) {
      var names = D.member_sets[D.members[i][0]];
      box.appendChild(el("h3", null, "Members behind the verdict"));
      var mt = el("table", "members");
      names.forEach(function (name, k) {
        var tr = el("tr");
        tr.appendChild(el("td", null, name));
        var v = D.members[i][k + 1];
        tr.appendChild(el("td", null, v === null ? "n/a" : String(v)));
        mt.appendChild(tr);
      });
      box.appendChild(mt);
    }
    if (D.samples[i]) {
      box.appendChild(el("h3", null, "Samples (" + D.samples[i].length + ")"));
      var ol = el("ol", "samples");
      D.samples[i].forEach(function (s) { ol.appendChild(el("li", null, s)); });
      box.appendChild(ol);
    }
  }
  window.bbwdShow = show;
  page.answerBlock = answerBlock;

  // ---- charts -----------------------------------------------------------------------------------------------
  function chartWidth() {
    // two charts and the labels' card (~440 px) in one row, or the histogram alone
    var room = document.body.clientWidth - 100;
    return Math.max(300, Math.min(560, Math.floor(S.labelled ? (room - 480) / 2 : room / 1.6)));
  }
  var bars = uPlot.paths.bars({ size: [0.92, 60] });
  var h = S.histogram;
  new uPlot(
    {
      width: chartWidth(),
      height: 220,
      legend: { live: false },
      scales: { x: { time: false, range: [0, 1] } },
      axes: [{ label: S.risk_from }, { label: "rows" }],
      series: [
        { label: S.risk_from },
        { label: "all rows", fill: "rgba(70,110,200,0.55)", stroke: "rgb(70,110,200)", paths: bars, points: { show: false } },
        { label: "flagged", fill: "rgba(200,50,40,0.8)", stroke: "rgb(200,50,40)", paths: bars, points: { show: false } }
      ]
    },
    [h.x, h.all, h.flagged],
    document.getElementById("hist")
  );
  if (S.labelled) {
    var r = S.labelled.reliability;
    new uPlot(
      {
        width: chartWidth(),
        height: 220,
        legend: { live: false },
        scales: { x: { time: false, range: [0, 1] }, y: { range: [0, 1] } },
        axes: [{ label: "p_hallucination (bin)" }, { label: "share hallucinated" }],
        series: [
          { label: "p bin" },
          { label: "ideal", stroke: "#9aa3b2", dash: [4, 4], points: { show: false } },
          { label: "seen", stroke: "rgb(200,50,40)", width: 2, points: { size: 7 }, spanGaps: true }
        ]
      },
      [r.map(function (b) { return b.x; }), r.map(function (b) { return b.x; }), r.map(function (b) { return b.rate; })],
      document.getElementById("reliability")
    );
  }
})();
