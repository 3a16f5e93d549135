// Genesis Agents dashboard script: live turns and chat over server-sent
// events, and the chat form posted without a reload. Every page works
// without it (plain forms and redirects); it only adds liveness.
"use strict";

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}

function addMessage(list, m) {
  if (list.querySelector('[data-id="' + CSS.escape(m.id) + '"]')) return;
  const li = el("li", "msg " + m.direction);
  li.dataset.id = m.id;
  li.appendChild(el("span", "who", m.direction.startsWith("operator") ? "operator" : "agent"));
  li.appendChild(document.createTextNode(" "));
  li.appendChild(el("time", "", m.at));
  li.appendChild(el("p", "", m.body));
  list.appendChild(li);
  list.scrollTop = list.scrollHeight;
}

function addTurn(list, t) {
  const li = el("li");
  li.dataset.turn = String(t.turn);
  li.appendChild(el("strong", "", "#" + t.turn + " " + t.decision));
  li.appendChild(document.createTextNode(
    " · " + t.event + " · mode " + (t.mode || "—") + " · " + t.at +
    " · " + t.tokens + " tokens · " + t.cost + (t.model ? " · " + t.model : "")));
  if (t.summary) li.appendChild(el("div", "muted", t.summary));
  list.insertBefore(li, list.firstChild);
}

function live() {
  const turns = document.getElementById("live-turns");
  if (!turns || !window.EventSource) return;
  const state = document.getElementById("live-state");
  const transcript = document.getElementById("transcript");
  const src = new EventSource(turns.dataset.events);
  src.onopen = () => { state.textContent = "Live: new turns and messages appear here."; };
  src.onerror = () => { state.textContent = "Reconnecting…"; };
  src.addEventListener("turn", (e) => addTurn(turns, JSON.parse(e.data)));
  src.addEventListener("message", (e) => { if (transcript) addMessage(transcript, JSON.parse(e.data)); });
  // The server ended the stream (signed out, session expired, token revoked):
  // stop, rather than reconnect into the sign-in page.
  src.addEventListener("end", (e) => { src.close(); state.textContent = e.data || "The live stream ended; reload the page."; });
}

// Forms marked data-fetch post without a reload; the outcome goes to the
// element named by data-state. The clicked button's name/value is sent too.
function fetchForms() {
  for (const form of document.querySelectorAll("form[data-fetch]")) {
    const state = document.getElementById(form.dataset.state);
    let clicked = null;
    form.addEventListener("click", (e) => { if (e.target.matches("button[name]")) clicked = e.target; });
    form.addEventListener("submit", async (e) => {
      e.preventDefault();
      const data = new FormData(form);
      const b = e.submitter || clicked;
      if (b && b.name) data.set(b.name, b.value);
      if (state) state.textContent = "Working…";
      try {
        // getAttribute: a control named "action" would shadow form.action.
        const r = await fetch(form.getAttribute("action"), {
          method: "POST", body: new URLSearchParams(data), credentials: "same-origin",
          headers: { "X-Requested-With": "fetch" },
        });
        const text = await r.text();
        if (state) state.textContent = r.ok ? text : "Refused: " + text;
        if (r.ok) {
          const ta = form.querySelector("textarea");
          if (ta) ta.value = "";
          const st = document.getElementById("agent-status");
          if (st && b && b.name === "action") st.textContent = text;
        }
      } catch (err) {
        if (state) state.textContent = "Not sent: " + err;
      }
    });
  }
}

function confirms() {
  for (const b of document.querySelectorAll("button[data-confirm]")) {
    b.addEventListener("click", (e) => { if (!window.confirm(b.dataset.confirm)) e.preventDefault(); });
  }
}

document.addEventListener("DOMContentLoaded", () => { live(); fetchForms(); confirms(); });
