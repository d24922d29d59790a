// A plugin page's parent, as LangBot's web UI is to it (the SDK's page script): it tells the
// frame the theme and language, and answers the frame's calls with the plugin's handle_api.
(function () {
  "use strict";
  var frame = document.getElementById("plugin-page");
  var csrf = document.querySelector("#plugin-page-csrf [name=csrfmiddlewaretoken]").value;

  function sendContext() {
    var dark = window.matchMedia && window.matchMedia("(prefers-color-scheme: dark)").matches;
    frame.contentWindow.postMessage({
      type: "langbot:context",
      theme: dark ? "dark" : "light",
      language: document.documentElement.lang || "en-US",
    }, "*");  // the frame's origin is opaque: "*" is the only target it has
  }

  function answer(requestId, reply) {
    frame.contentWindow.postMessage({
      type: "langbot:api:response", requestId: requestId,
      data: reply.data, error: reply.error || undefined,
    }, "*");
  }

  // Each load of the frame gets the context; so does one that loaded before this script ran
  // (sent to a frame still loading, it is lost, and its load sends it again).
  frame.addEventListener("load", sendContext);
  sendContext();
  window.addEventListener("message", function (event) {
    var call = event.data;
    if (event.source !== frame.contentWindow || !call || call.type !== "langbot:api") return;
    fetch(frame.dataset.api, {
      method: "POST",
      credentials: "same-origin",
      headers: {"Content-Type": "application/json", "X-CSRFToken": csrf},
      body: JSON.stringify({endpoint: call.endpoint, method: call.method, body: call.body}),
    }).then(function (response) {
      return response.json();
    }).then(function (reply) {
      answer(call.requestId, reply);
    }, function (error) {
      answer(call.requestId, {data: null, error: String(error)});
    });
  });
})();
