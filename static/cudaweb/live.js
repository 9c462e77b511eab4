// Polls each live fragment (an element with data-poll-url) until its content says it is no longer live
// (an element inside with data-live="0"); pauses while the tab is hidden. No page reload. data-poll-every sets the
// interval (ms); data-poll-hold a selector that, matched inside, skips a refresh (ticked boxes are kept).
(function () {
  function watch(box) {
    var url = box.dataset.pollUrl;
    var timer = null;
    var every = parseInt(box.dataset.pollEvery, 10) || 1500;  // the fleet page asks every 15 s, a run every 1.5 s
    var hold = box.dataset.pollHold;  // e.g. "input:checked": not replaced while the user is choosing in it
    function schedule() { timer = window.setTimeout(poll, every); }
    function poll() {
      timer = null;
      if (document.hidden) return;
      if ((hold && box.querySelector(hold)) || box.contains(document.activeElement)) { schedule(); return; }
      fetch(url, {credentials: "same-origin", headers: {"X-Requested-With": "fetch"}})
        .then(function (r) { if (!r.ok) throw new Error(r.status); return r.text(); })
        .then(function (html) {
          box.innerHTML = html;
          var marker = box.querySelector("[data-live]");
          if (marker && marker.dataset.live === "1") schedule();
        })
        .catch(function () { schedule(); });
    }
    document.addEventListener("visibilitychange", function () {
      if (!document.hidden && timer === null) poll();
    });
    schedule();
  }
  var boxes = document.querySelectorAll("[data-poll-url]");
  for (var i = 0; i < boxes.length; i++) watch(boxes[i]);
})();

// "Print" links: a handler here, not a javascript: URL, so the Content-Security-Policy needs no inline script.
document.addEventListener("click", function (event) {
  var link = event.target.closest && event.target.closest("[data-print]");
  if (link) {
    event.preventDefault();
    window.print();
  }
});
