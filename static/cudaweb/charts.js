// Node page: one metric over time with the node's baseline and the fleet peers' band (Chart.js, vendored).
(function () {
  var data = JSON.parse(document.getElementById("chart-data").textContent);
  var select = document.getElementById("chart-metric");
  var canvas = document.getElementById("metric-chart");
  var chart = null;
  // colours from the stylesheet's tokens, so the chart follows the light or dark scheme
  var css = getComputedStyle(document.documentElement);
  var token = function (name) { return css.getPropertyValue(name).trim(); };
  Chart.defaults.color = token("--fg-muted");
  Chart.defaults.borderColor = token("--border-muted");
  var line = token("--accent"), baseline = token("--fg-muted");
  function draw(name) {
    var c = data[name];
    var labels = c.points.map(function (p) { return p[0].slice(0, 16).replace("T", " "); });
    var flat = function (v) { return labels.map(function () { return v; }); };
    var sets = [{label: c.label, data: c.points.map(function (p) { return p[1]; }), borderColor: line,
                 backgroundColor: line, tension: 0, pointRadius: 2}];
    if (c.baseline !== null && c.baseline !== undefined) {
      sets.push({label: "baseline", data: flat(c.baseline), borderColor: baseline, borderDash: [6, 4], pointRadius: 0});
    }
    if (c.band) {
      sets.push({label: "peers p10", data: flat(c.band.low), borderColor: "rgba(60,160,90,0.4)", pointRadius: 0});
      sets.push({label: "peers p90 (n=" + c.band.count + ")", data: flat(c.band.high), borderColor: "rgba(60,160,90,0.4)",
                 backgroundColor: "rgba(60,160,90,0.15)", fill: "-1", pointRadius: 0});
    }
    if (chart) chart.destroy();
    chart = new Chart(canvas, {type: "line", data: {labels: labels, datasets: sets},
      options: {animation: false, scales: {y: {title: {display: true, text: c.unit}}}}});
  }
  select.addEventListener("change", function () { draw(select.value); });
  draw(select.value);
})();
