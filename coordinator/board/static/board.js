/* memoria-farm board: sortable tables and the question filters. Vanilla, no network, and it reads the page
   through textContent and data attributes only: nothing from a results file is ever parsed as markup. */
"use strict";

function cellValue(row, column, numeric) {
  var cell = row.cells[column];
  if (!cell) { return numeric ? null : ""; }
  if (numeric) {
    var raw = cell.dataset.v;
    return raw === undefined || raw === "" ? null : parseFloat(raw);
  }
  return cell.textContent.trim().toLowerCase();
}

function sortTable(table, column, header) {
  var numeric = header.dataset.kind === "num";
  var current = header.getAttribute("aria-sort");
  /* first click: numbers best (largest) first, text A to Z; every further click reverses */
  var descending = current === null ? numeric : current !== "descending";
  var body = table.tBodies[0];
  var rows = Array.prototype.slice.call(body.rows);
  rows.sort(function (a, b) {
    var x = cellValue(a, column, numeric), y = cellValue(b, column, numeric);
    if (x === y) { return 0; }
    if (x === null) { return 1; }  /* empty cells last, whichever the direction */
    if (y === null) { return -1; }
    var order = x < y ? -1 : 1;
    return descending ? -order : order;
  });
  Array.prototype.forEach.call(header.parentNode.children, function (th) { th.removeAttribute("aria-sort"); });
  header.setAttribute("aria-sort", descending ? "descending" : "ascending");
  rows.forEach(function (row) { body.appendChild(row); });
}

function makeSortable(table) {
  var headers = table.tHead.rows[0].cells;
  Array.prototype.forEach.call(headers, function (header, column) {
    var sort = function () { sortTable(table, column, header); };
    header.addEventListener("click", sort);
    header.addEventListener("keydown", function (event) {
      if (event.key === "Enter" || event.key === " ") { event.preventDefault(); sort(); }
    });
  });
}

function setUpFilters() {
  var table = document.getElementById("questions");
  if (!table) { return; }
  var search = document.getElementById("search"), type = document.getElementById("type");
  var missed = document.getElementById("missed"), disagree = document.getElementById("disagree");
  var shown = document.getElementById("shown");
  var rows = Array.prototype.slice.call(table.tBodies[0].rows);
  var texts = rows.map(function (row) {
    return (row.cells[0].textContent + " " + row.cells[2].textContent).toLowerCase();
  });
  function apply() {
    var words = search.value.trim().toLowerCase().split(/\s+/).filter(Boolean);
    var count = 0;
    rows.forEach(function (row, index) {
      var ok = (!type.value || row.dataset.type === type.value)
        && (!missed.checked || row.dataset.missed === "1")
        && (!disagree.checked || row.dataset.disagree === "1")
        && words.every(function (word) { return texts[index].indexOf(word) !== -1; });
      row.hidden = !ok;
      if (ok) { count += 1; }
    });
    shown.textContent = count + " of " + rows.length + (rows.length === 1 ? " question" : " questions") + " shown";
  }
  [search, type, missed, disagree].forEach(function (control) {
    control.addEventListener("input", apply);
    control.addEventListener("change", apply);
  });
  search.addEventListener("keydown", function (event) { if (event.key === "Enter") { event.preventDefault(); } });
  var params = new URLSearchParams(window.location.hash.slice(1));
  if (params.get("q")) { search.value = params.get("q"); }
  if (params.get("type")) { type.value = params.get("type"); }
  if (params.get("missed") === "1") { missed.checked = true; }
  if (params.get("disagree") === "1") { disagree.checked = true; }
  apply();
}

document.addEventListener("DOMContentLoaded", function () {
  Array.prototype.forEach.call(document.querySelectorAll("table.sortable"), makeSortable);
  setUpFilters();
});
