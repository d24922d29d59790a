/* LangHost admin: follow a run over the WebSocket `ws/runs/<run_id>/` and draw its timeline.
 * Plain JavaScript, no dependencies. Used by the run detail page and the playground. */
(function () {
  "use strict";
  const LH = (window.LangHost = window.LangHost || {});
  const TERMINAL = ["completed", "failed", "cancelled", "timeout"];
  LH.TERMINAL = TERMINAL;

  LH.wsUrl = function (runId, afterSequence) {
    const scheme = window.location.protocol === "https:" ? "wss://" : "ws://";
    return scheme + window.location.host + "/ws/runs/" + encodeURIComponent(runId) +
      "/?after_sequence=" + (afterSequence || 0);
  };

  /* Follow a run: handlers.onEvent(frame) for each event, in order and once;
   * handlers.onStatus(frame) with the final status; handlers.onRefused(code) when the server
   * refuses (4xxx) or the connection cannot be re-established. Reconnects after a dropped
   * connection, resuming after the last sequence seen. Returns {stop()}. */
  LH.followRun = function (runId, handlers, afterSequence) {
    let last = afterSequence || 0;
    let done = false;
    let stopped = false;
    let retries = 0;
    let socket = null;

    function open() {
      socket = new WebSocket(LH.wsUrl(runId, last));
      socket.onmessage = function (message) {
        const frame = JSON.parse(message.data);
        if (frame.type === "run.status") {
          done = true;
          if (handlers.onStatus) handlers.onStatus(frame);
          return;
        }
        if (typeof frame.sequence !== "number" || frame.sequence <= last) return;
        last = frame.sequence;
        retries = 0;
        if (handlers.onEvent) handlers.onEvent(frame);
      };
      socket.onclose = function (event) {
        if (done || stopped) return;
        if (event.code >= 4000 && event.code < 5000) {
          if (handlers.onRefused) handlers.onRefused(event.code);
          return;
        }
        retries += 1;
        if (retries > 5) {
          if (handlers.onRefused) handlers.onRefused(event.code);
          return;
        }
        window.setTimeout(open, 500 * retries);
      };
    }

    open();
    return {
      stop: function () {
        stopped = true;
        if (socket) socket.close();
      },
    };
  };

  /* The text of a message's content (a string, or a list of content parts). */
  function contentText(content) {
    if (content === null || content === undefined) return "";
    if (typeof content === "string") return content;
    if (Array.isArray(content)) {
      return content.map(function (part) {
        if (typeof part === "string") return part;
        if (part && typeof part.text === "string") return part.text;
        if (part && part.type === "file_url") return " [file: " + (part.file_name || "file") + "]";
        return part && part.type ? "[" + part.type + "]" : "";
      }).join("");
    }
    return JSON.stringify(content);
  }

  /* The citations a completed message carries (knowledge-base passages), or none. */
  LH.citationsOf = function (frame) {
    const message = (frame.data || {}).message || {};
    const citations = (message.provider_specific_fields || {}).citations;
    return Array.isArray(citations) ? citations : [];
  };

  /* Draw citations into a list (hidden when there are none), numbered as the reply cites. */
  LH.showCitations = function (list, citations) {
    list.textContent = "";
    citations.forEach(function (citation) {
      const item = document.createElement("li");
      item.textContent = citation.document + (citation.page ? ", page " + citation.page : "") +
        " · chunk " + citation.chunk + " · score " + citation.score;
      list.appendChild(item);
    });
    list.hidden = citations.length === 0;
  };

  /* One line saying what an event is about; for a message, its text. */
  function clipped(text) {
    return text.length > 300 ? text.slice(0, 300) + "… (cut)" : text;
  }

  LH.summarize = function (frame) {
    const data = frame.data || {};
    switch (frame.type) {
      case "message.delta":
        return contentText((data.chunk || {}).content);
      case "message.completed":
        return contentText((data.message || {}).content);
      case "state.updated":
        return (data.scope ? data.scope + ": " : "") + data.key + " = " + JSON.stringify(data.value);
      case "run.completed":
        return "finished: " + (data.finish_reason || "stop");
      case "run.failed":
        return (data.code ? data.code + ": " : "") + (data.error || "");
      case "tool.call.started":
        return (data.tool_name || "tool") + "(" + JSON.stringify(data.parameters || {}) + ")";
      case "tool.call.completed":
        return (data.tool_name || "tool") + (data.error ? " failed: " + data.error
          : " returned " + clipped(JSON.stringify(data.result === undefined ? null : data.result)));
      case "processor.log":
        return (data.level ? data.level + ": " : "") + (data.text || "");
      default:
        return data.reason || "";
    }
  };

  function cell(row, className, text) {
    const td = document.createElement("td");
    td.className = className;
    if (text !== undefined) td.textContent = text;
    row.appendChild(td);
    return td;
  }

  function clock(frame) {
    const date = frame.created_at ? new Date(frame.created_at) : new Date();
    return date.toISOString().substring(11, 23);
  }

  /* A <tbody> that gets one row per event; the payload unfolds under the summary. */
  LH.Timeline = function (tbody, counter) {
    this.tbody = tbody;
    this.counter = counter || null;
    this.count = 0;
  };
  LH.Timeline.prototype.clear = function () {
    this.tbody.textContent = "";
    this.count = 0;
    if (this.counter) this.counter.textContent = "0";
  };
  LH.Timeline.prototype.row = function (frame) {
    const row = document.createElement("tr");
    row.className = "run-event event-" + String(frame.type).replace(/\./g, "-");
    row.dataset.sequence = frame.sequence;
    row.dataset.type = frame.type;
    cell(row, "event-sequence", String(frame.sequence));
    cell(row, "event-time", clock(frame));
    cell(row, "event-source", frame.source || "");
    const type = cell(row, "event-type");
    const code = document.createElement("code");
    code.textContent = frame.type;
    type.appendChild(code);
    const summary = cell(row, "event-summary");
    const details = document.createElement("details");
    const label = document.createElement("summary");
    label.textContent = LH.summarize(frame) || "payload";
    details.appendChild(label);
    // The payload is drawn when it is opened: thousands of events stay cheap.
    details.addEventListener("toggle", function () {
      if (!details.open || details.querySelector("pre")) return;
      const pre = document.createElement("pre");
      pre.textContent = JSON.stringify({ data: frame.data, usage: frame.usage }, null, 2);
      details.appendChild(pre);
    });
    summary.appendChild(details);
    return row;
  };
  LH.Timeline.prototype.add = function (frame) {
    const row = this.row(frame);
    this.tbody.appendChild(row);
    this.count += 1;
    if (this.counter) this.counter.textContent = String(this.count);
    return row;
  };

  /* Show a status as an admin-style badge. */
  LH.setStatus = function (element, status, reason) {
    if (!element) return;
    element.textContent = status || "unknown";
    element.className = "run-status status-" + (status || "unknown");
    if (reason !== undefined) element.title = reason || "";
  };

  LH.csrfToken = function (root) {
    const holder = (root || document).querySelector("[name=csrfmiddlewaretoken]");
    return holder ? holder.value : "";
  };
})();
