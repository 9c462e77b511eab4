// Polls the live fragment of a run page until the run ends; pauses while the tab is hidden.
(function () {
  var box = document.getElementById("run-live");
  if (!box || !box.dataset.pollUrl) return;
  var url = box.dataset.pollUrl;
  var timer = null;
  function schedule() { timer = window.setTimeout(poll, 1500); }
  function poll() {
    timer = null;
    if (document.hidden) return;
    fetch(url, {credentials: "same-origin", headers: {"X-Requested-With": "fetch"}})
      .then(function (r) { if (!r.ok) throw new Error(r.status); return r.text(); })
      .then(function (html) {
        box.innerHTML = html;
        var head = box.querySelector(".run-head");
        var status = head ? head.dataset.status : "";
        if (status === "PENDING" || status === "RUNNING") schedule();
      })
      .catch(function () { schedule(); });
  }
  document.addEventListener("visibilitychange", function () {
    if (!document.hidden && timer === null) poll();
  });
  schedule();
})();
