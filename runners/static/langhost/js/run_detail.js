/* LangHost admin: the run detail page. Draws the run's newest events, loads older ones on
 * demand, and follows the run live. */
(function () {
  "use strict";
  const LH = window.LangHost;
  const root = document.getElementById("run-live");
  if (!root || !LH) return;

  const runId = root.dataset.runId;
  const statusBadge = document.getElementById("run-status");
  const headingStatus = document.getElementById("run-heading-status");
  const reasonLine = document.getElementById("run-status-reason");
  const liveFlag = document.getElementById("run-live-flag");
  const cancelButton = document.getElementById("run-cancel");
  const olderButton = document.getElementById("run-load-older");
  const scroller = document.getElementById("run-timeline-scroll");
  const reply = document.getElementById("run-reply");
  const citationList = document.getElementById("run-citations");
  const stateList = document.getElementById("run-state-changes");
  const counter = document.getElementById("run-event-count");
  const timeline = new LH.Timeline(document.getElementById("run-timeline-body"));
  const openedLive = LH.TERMINAL.indexOf(root.dataset.status) < 0;
  const lastSequence = parseInt(root.dataset.lastSequence, 10) || 0;
  const tail = parseInt(root.dataset.tail, 10) || 200;
  // The oldest event drawn: older ones come from the REST API, a page at a time.
  let firstDrawn = Math.max(lastSequence - tail, 0) + 1;
  let streaming = reply.querySelector(".run-empty") === null && openedLive;
  let ended = false;
  let pending = [];

  function setLive(text, className) {
    liveFlag.textContent = text;
    liveFlag.className = "run-live-flag " + className;
  }

  function showReply(text, partial) {
    const empty = reply.querySelector(".run-empty");
    if (empty) empty.remove();
    reply.textContent = text;
    reply.classList.toggle("run-reply-partial", !!partial);
  }

  function addStateChange(frame) {
    const empty = stateList.querySelector(".run-empty");
    if (empty) empty.remove();
    const item = document.createElement("li");
    const data = frame.data || {};
    item.innerHTML = "<span class='run-state-seq'></span> <code></code> <span></span>";
    item.children[0].textContent = "#" + frame.sequence;
    item.children[1].textContent = (data.scope || "") + ":" + data.key;
    item.children[2].textContent = "= " + JSON.stringify(data.value);
    stateList.appendChild(item);
  }

  function atBottom() {
    return scroller.scrollHeight - scroller.scrollTop - scroller.clientHeight < 40;
  }

  // Events are drawn once per animation frame, however fast they come: the page stays
  // responsive, and the timeline follows the newest event unless the reader scrolled up.
  function draw() {
    const frames = pending;
    if (frames.length === 0) return;  // drawn already, by onStatus
    pending = [];
    const follow = atBottom();
    frames.forEach(function (frame) { timeline.add(frame); });
    counter.textContent = String(Math.max(lastSequence, frames[frames.length - 1].sequence));
    if (follow) scroller.scrollTop = scroller.scrollHeight;
  }

  function onEvent(frame) {
    if (pending.length === 0) window.requestAnimationFrame(draw);
    pending.push(frame);
    if (frame.type === "message.delta") {
      showReply((streaming ? reply.textContent : "") + LH.summarize(frame), true);
      streaming = true;
    } else if (frame.type === "message.completed") {
      showReply(LH.summarize(frame), false);
      LH.showCitations(citationList, LH.citationsOf(frame));
      streaming = false;
    } else if (frame.type === "state.updated") {
      addStateChange(frame);
    }
    if (statusBadge.textContent === "queued") LH.setStatus(statusBadge, "running");
  }

  function loadOlder() {
    const from = Math.max(firstDrawn - 100, 1);
    olderButton.disabled = true;
    fetch(root.dataset.eventsUrl + "?page_size=100&after_sequence=" + (from - 1),
          { credentials: "same-origin", headers: { "Accept": "application/json" } })
      .then(function (response) { return response.json(); })
      .then(function (body) {
        const older = (body.data || []).filter(function (f) { return f.sequence < firstDrawn; });
        const first = timeline.tbody.firstChild;
        older.forEach(function (frame) { timeline.tbody.insertBefore(timeline.row(frame), first); });
        firstDrawn = from;
        olderButton.hidden = firstDrawn <= 1;
        olderButton.disabled = false;
      })
      .catch(function () { olderButton.disabled = false; });
  }

  // The model calls are rendered by the server: a page opened on a live run takes the
  // finished list from a fresh copy of itself.
  function refreshModelCalls() {
    fetch(window.location.href, { credentials: "same-origin" })
      .then(function (response) { return response.ok ? response.text() : null; })
      .then(function (html) {
        if (!html) return;
        const fresh = new DOMParser().parseFromString(html, "text/html")
          .getElementById("run-model-calls");
        const current = document.getElementById("run-model-calls");
        if (fresh && current) current.replaceWith(fresh);
      })
      .catch(function () { /* the list stays as it was; a reload shows it */ });
  }

  function onStatus(frame) {
    ended = true;
    draw();  // the run's last events appear no later than its final status
    LH.setStatus(statusBadge, frame.status, frame.status_reason);
    if (headingStatus) headingStatus.textContent = frame.status;
    document.title = document.title.replace(/\((queued|running)\)/, "(" + frame.status + ")");
    reasonLine.textContent = frame.status_reason || "";
    setLive("ended", "ended");
    if (cancelButton) cancelButton.disabled = true;
    reply.classList.remove("run-reply-partial");
    if (openedLive) refreshModelCalls();
  }

  function onRefused(code) {
    setLive(code === 4403 ? "not allowed to follow this run" : "disconnected (" + code + ")",
            "refused");
  }

  if (cancelButton) {
    cancelButton.addEventListener("click", function () {
      cancelButton.disabled = true;
      reasonLine.textContent = "cancelling…";
      fetch(root.dataset.cancelUrl, {
        method: "POST",
        credentials: "same-origin",
        headers: { "X-CSRFToken": LH.csrfToken(), "Accept": "application/json" },
      }).then(function (response) {
        return response.json().then(function (body) {
          if (!response.ok) {
            reasonLine.textContent = body.detail || ("cancel failed: HTTP " + response.status);
            cancelButton.disabled = ended;
          } else if (!ended) {
            reasonLine.textContent = "cancel requested";
          }
        });
      }).catch(function (error) {
        reasonLine.textContent = "cancel failed: " + error;
        cancelButton.disabled = false;
      });
    });
  }

  olderButton.hidden = firstDrawn <= 1;
  olderButton.addEventListener("click", loadOlder);
  setLive(openedLive ? "live" : "loading", "live");
  root.dataset.follow = "started";
  LH.followRun(runId, { onEvent: onEvent, onStatus: onStatus, onRefused: onRefused },
               firstDrawn - 1);
})();
