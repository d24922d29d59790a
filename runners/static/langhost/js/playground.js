/* LangHost admin: the playground. Sends a message with `POST /api/v1/runs?stream=1`, reads
 * the NDJSON reply as it streams, and follows the run's timeline over the WebSocket. */
(function () {
  "use strict";
  const LH = window.LangHost;
  const root = document.getElementById("playground");
  if (!root || !LH) return;

  const MAX_ATTACHMENT_BYTES = 1024 * 1024;  // the JSON request body stays under Django's limit
  const target = document.getElementById("playground-target");
  const form = document.getElementById("playground-form");
  const input = document.getElementById("playground-input");
  const fileInput = document.getElementById("playground-file");
  const sendButton = document.getElementById("playground-send");
  const errorNote = document.getElementById("playground-error");
  const log = document.getElementById("playground-log");
  const conversationLabel = document.getElementById("playground-conversation");
  const runStatus = document.getElementById("run-status");
  const runLink = document.getElementById("playground-run-link");
  const runIdLabel = document.getElementById("playground-run-id");
  const timeline = new LH.Timeline(document.getElementById("playground-timeline"),
                                   document.getElementById("playground-event-count"));
  let conversationId = null;
  let follower = null;

  function newId() {
    if (window.crypto && window.crypto.randomUUID) return window.crypto.randomUUID();
    return "xxxxxxxx-xxxx-4xxx-yxxx-xxxxxxxxxxxx".replace(/[xy]/g, function (c) {
      const r = (Math.random() * 16) | 0;
      return (c === "x" ? r : (r & 0x3) | 0x8).toString(16);
    });
  }

  function newConversation() {
    conversationId = "playground-" + newId();
    conversationLabel.textContent = conversationId;
    log.textContent = "";
  }

  // An agent answers only in a conversation of the caller's own: open it before the first
  // message (409: this session opened it already).
  async function openConversation(url) {
    const response = await fetch(url, {
      method: "POST",
      credentials: "same-origin",
      headers: { "Content-Type": "application/json", "X-CSRFToken": LH.csrfToken(form) },
      body: JSON.stringify({ conversation_id: conversationId, title: "Playground" }),
    });
    if (!response.ok && response.status !== 409) {
      throw new Error("could not open the conversation (" + response.status + ")");
    }
  }

  function showError(text) {
    errorNote.textContent = text;
    errorNote.hidden = !text;
  }

  function bubble(role, author, text) {
    const item = document.createElement("div");
    item.className = "chat-message chat-" + role;
    const who = document.createElement("div");
    who.className = "chat-author";
    who.textContent = author;
    const body = document.createElement("div");
    body.className = "chat-text";
    body.textContent = text || "";
    item.appendChild(who);
    item.appendChild(body);
    log.appendChild(item);
    log.scrollTop = log.scrollHeight;
    return item;
  }

  function note(item, text, className) {
    const line = document.createElement("div");
    line.className = "chat-note " + (className || "");
    line.textContent = text;
    item.appendChild(line);
  }

  function toolLine(frame) {
    const line = document.createElement("div");
    line.className = "chat-note chat-tool";
    line.dataset.sequence = frame.sequence;
    line.textContent = (frame.type === "tool.call.started" ? "calls " : "") + LH.summarize(frame);
    return line;
  }

  function follow(runId) {
    if (follower) follower.stop();
    timeline.clear();
    runIdLabel.textContent = runId;
    runLink.href = root.dataset.runDetailUrl.replace("__RUN__", encodeURIComponent(runId));
    runLink.hidden = false;
    LH.setStatus(runStatus, "running");
    follower = LH.followRun(runId, {
      onEvent: function (frame) { timeline.add(frame); },
      onStatus: function (frame) { LH.setStatus(runStatus, frame.status, frame.status_reason); },
      onRefused: function (code) { LH.setStatus(runStatus, "unknown", "stream closed: " + code); },
    }, 0);
  }

  function readFile(file) {
    return new Promise(function (resolve, reject) {
      const reader = new FileReader();
      reader.onload = function () {
        const data = String(reader.result);
        resolve({
          type: "file", name: file.name, mime_type: file.type || "application/octet-stream",
          size: file.size, content: data.substring(data.indexOf(",") + 1),
        });
      };
      reader.onerror = function () { reject(reader.error); };
      reader.readAsDataURL(file);
    });
  }

  function errorText(status, body) {
    if (!body) return "HTTP " + status;
    let text = body.detail || "HTTP " + status;
    const errors = body.errors || {};
    Object.keys(errors).forEach(function (field) {
      text += " " + field + ": " + [].concat(errors[field]).join(" ");
    });
    return text;
  }

  async function readFrames(response, onFrame) {
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    let buffer = "";
    for (;;) {
      const chunk = await reader.read();
      if (chunk.done) break;
      buffer += decoder.decode(chunk.value, { stream: true });
      let newline;
      while ((newline = buffer.indexOf("\n")) >= 0) {
        const line = buffer.substring(0, newline).trim();
        buffer = buffer.substring(newline + 1);
        if (line) onFrame(JSON.parse(line));
      }
    }
    if (buffer.trim()) onFrame(JSON.parse(buffer));
  }

  // POST `body` to `url` (NDJSON), showing the reply as it streams in a bubble of `author`'s;
  // a question the run asks becomes a form whose answer streams the same way.
  async function streamReply(author, url, body, conversationsUrl, onFinished) {
    const reply = bubble("agent", author, "");
    reply.classList.add("chat-pending");
    const replyText = reply.querySelector(".chat-text");
    let completed = false;
    const response = await fetch(url, {
      method: "POST",
      credentials: "same-origin",
      headers: { "Content-Type": "application/json", "Accept": "application/x-ndjson, application/json",
                 "X-CSRFToken": LH.csrfToken(form) },
      body: JSON.stringify(body),
    });
    if (!response.ok) {
      let detail = null;
      try { detail = await response.json(); } catch (ignored) { detail = null; }
      reply.remove();
      showError(errorText(response.status, detail));
      return;
    }
    await readFrames(response, function (frame) {
      switch (frame.type) {
        case "run.started":
          reply.dataset.runId = frame.run_id;
          follow(frame.run_id);
          break;
        case "message.delta":
          if (completed) break;
          replyText.textContent += LH.summarize(frame);
          break;
        case "message.completed":
          replyText.textContent = LH.summarize(frame);
          if (LH.citationsOf(frame).length) {
            const list = document.createElement("ol");
            list.className = "citations";
            LH.showCitations(list, LH.citationsOf(frame));
            reply.appendChild(list);
          }
          completed = true;
          break;
        case "tool.call.started":
        case "tool.call.completed":
          // What the agent does, above what it says.
          reply.insertBefore(toolLine(frame), replyText);
          break;
        case "interaction.requested":
          reply.appendChild(question(frame.data, author, conversationsUrl));
          break;
        case "steering.queued":
          note(reply, "Joined the active run " + frame.run_id + ".");
          follow(frame.run_id);
          break;
        case "run.finished":
          if (onFinished) onFinished(frame);
          reply.classList.remove("chat-pending");
          reply.dataset.status = frame.status || "";
          if (frame.status && frame.status !== "completed") {
            note(reply, frame.status + (frame.status_reason ? ": " + frame.status_reason : ""),
                 "chat-failed");
          }
          break;
        case "run.refused":
          reply.classList.remove("chat-pending");
          note(reply, "refused: " + frame.detail, "chat-failed");
          break;
        default:
          break;
      }
      log.scrollTop = log.scrollHeight;
    });
    reply.classList.remove("chat-pending");
  }

  // A run's question (LangBot's InteractionRequest) as a form: its fields, then a button per
  // action; answering sends the values with the button's action and the one-time token.
  function question(request, author, conversationsUrl) {
    const box = document.createElement("form");
    box.className = "chat-question";
    box.dataset.interactionId = request.interaction_id;
    const title = document.createElement("strong");
    title.textContent = request.title;
    box.appendChild(title);
    if (request.description) {
      const text = document.createElement("p");
      text.textContent = request.description;
      box.appendChild(text);
    }
    const inputs = {};
    (request.fields || []).forEach(function (field) {
      const label = document.createElement("label");
      label.textContent = field.label + " ";
      let control;
      if (field.type === "select" || field.type === "multiselect") {
        control = document.createElement("select");
        control.multiple = field.type === "multiselect";
        (field.options || []).forEach(function (option) {
          control.appendChild(new Option(option.label, option.value));
        });
      } else if (field.type === "textarea") {
        control = document.createElement("textarea");
      } else {
        control = document.createElement("input");
        control.type = field.type === "number" ? "number" : field.type === "boolean" ? "checkbox" : "text";
      }
      control.name = field.id;
      label.appendChild(control);
      box.appendChild(label);
      inputs[field.id] = [field, control];
    });
    const actions = (request.actions && request.actions.length) ? request.actions
      : [{ id: "submit", label: "Submit", style: "primary" }];
    actions.forEach(function (action) {
      const button = document.createElement("button");
      button.type = "button";
      button.className = "button" + (action.style === "primary" ? " default" : "");
      button.dataset.action = action.id;
      button.textContent = action.label;
      button.addEventListener("click", async function () {
        const values = {};
        Object.keys(inputs).forEach(function (id) {
          const [field, control] = inputs[id];
          if (field.type === "boolean") values[id] = control.checked;
          else if (field.type === "number") { if (control.value !== "") values[id] = Number(control.value); }
          else if (field.type === "multiselect") values[id] = Array.from(control.selectedOptions).map(function (o) { return o.value; });
          else if (control.value !== "") values[id] = control.value;
        });
        box.querySelectorAll("button, input, select, textarea").forEach(function (el) { el.disabled = true; });
        const url = conversationsUrl + "/" + encodeURIComponent(conversationId) + "/interactions/" +
          encodeURIComponent(request.interaction_id) + "?stream=1";
        try {
          await streamReply(author, url, { token: request.token, values: values,
                                           action_id: request.actions && request.actions.length ? action.id : null },
                            conversationsUrl);
        } catch (error) {
          showError(String(error));
        }
      });
      box.appendChild(button);
    });
    if (!conversationsUrl) {
      box.querySelectorAll("button").forEach(function (el) { el.disabled = true; });
      note(box, request.fallback_text || "Answer it in a conversation with an agent.");
    }
    return box;
  }

  function author(option) {
    return option.dataset.label || option.textContent;
  }

  // Edit and resend: the message answered again, edited, in a fork of the conversation as it
  // was before it (`POST .../rerun`); the playground goes on in the fork.
  function editable(mine, agentName, conversationsUrl) {
    mine.dataset.turn = log.querySelectorAll(".chat-user").length - 1;
    const edit = document.createElement("button");
    edit.type = "button";
    edit.className = "button chat-edit";
    edit.textContent = "Edit";
    edit.addEventListener("click", function () {
      const text = mine.querySelector(".chat-text");
      const box = document.createElement("textarea");
      box.className = "chat-edit-text";
      box.value = text.textContent;
      const resend = document.createElement("button");
      resend.type = "button";
      resend.className = "button default chat-resend";
      resend.textContent = "Resend";
      resend.addEventListener("click", function () {
        resendEdited(mine, box.value, agentName, conversationsUrl);
      });
      text.replaceWith(box);
      edit.replaceWith(resend);
      box.focus();
    });
    mine.appendChild(edit);
  }

  async function resendEdited(mine, text, agentName, conversationsUrl) {
    showError("");
    const conversationUrl = conversationsUrl + "/" + encodeURIComponent(conversationId);
    try {
      const listed = await fetch(conversationUrl + "/messages?page_size=100",
                                 { credentials: "same-origin" });
      if (!listed.ok) throw new Error("could not read the transcript (" + listed.status + ")");
      const asked = (await listed.json()).data.filter(function (entry) {
        return entry.role === "user";
      }).reverse()[Number(mine.dataset.turn)];
      if (!asked) throw new Error("this message is not in the transcript yet");
      // What came after the message belongs to the conversation left behind.
      while (mine.nextSibling) mine.nextSibling.remove();
      const shown = document.createElement("div");
      shown.className = "chat-text";
      shown.textContent = text;
      mine.querySelector(".chat-edit-text").replaceWith(shown);
      mine.querySelector(".chat-resend").remove();
      await streamReply(agentName, conversationUrl + "/rerun?stream=1",
                        { entry_id: asked.id, text: text }, conversationsUrl,
                        function (finished) {
                          if (!finished.conversation_id) return;
                          conversationId = finished.conversation_id;
                          conversationLabel.textContent = conversationId + " (fork)";
                        });
      editable(mine, agentName, conversationsUrl);
    } catch (error) {
      showError(String(error));
    }
  }

  async function send(event) {
    event.preventDefault();
    showError("");
    const text = input.value;
    const file = fileInput.files[0];
    if (!text.trim() && !file) {
      showError("Write a message or attach a file.");
      return;
    }
    if (file && file.size > MAX_ATTACHMENT_BYTES) {
      showError("Attachments are limited to 1 MiB here.");
      return;
    }
    const option = target.options[target.selectedIndex];
    if (!option) {
      showError("There is no agent or runner to talk to.");
      return;
    }
    sendButton.disabled = true;
    try {
      if (option.dataset.conversationsUrl) await openConversation(option.dataset.conversationsUrl);
      const attachments = file ? [await readFile(file)] : [];
      const body = { input: { text: text, attachments: attachments },
                     conversation_id: conversationId };
      const [kind, id] = [option.value.substring(0, option.value.indexOf(":")),
                          option.value.substring(option.value.indexOf(":") + 1)];
      body[kind === "agent" ? "agent_id" : "runner_id"] = id;

      const mine = bubble("user", "You", text);
      if (option.dataset.conversationsUrl) editable(mine, author(option), option.dataset.conversationsUrl);
      if (file) note(mine, "attached " + file.name + " (" + file.size + " bytes)", "chat-attachment");
      input.value = "";
      fileInput.value = "";
      await streamReply(author(option), root.dataset.runsUrl + "?stream=1", body,
                        option.dataset.conversationsUrl);
    } catch (error) {
      showError(String(error));
    } finally {
      sendButton.disabled = false;
      input.focus();
    }
  }

  form.addEventListener("submit", send);
  input.addEventListener("keydown", function (event) {
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) form.requestSubmit();
  });
  document.getElementById("playground-new").addEventListener("click", newConversation);
  newConversation();
  root.dataset.ready = "1";
})();
