// mel · suporte — the support console. Vanilla JS, no build step, no library.
// Every text from the server (above all, the couple's) is put in the page with
// textContent / text nodes, never parsed as HTML; the CSP forbids inline script anyway.
"use strict";

(() => {
  const $ = (id) => document.getElementById(id);

  const EVENT_TYPES = [
    "session.started", "session.closed", "session.closed_abnormally", "session.end.requested",
    "session.human_handoff.requested", "session.human_handoff.expired",
    "support.claimed", "support.released", "support.replied", "support.queue_opened",
    "message.received", "message.sent", "message.failed", "message.parked",
    "guard.preempted", "router.routed", "router.continuity", "agent.replied", "agent.failed",
    "psychologist.hypothesis_proposed", "psychologist.hypothesis_accepted",
    "psychologist.hypothesis_accepted_for_anamnese", "psychologist.hypothesis_dismissed",
    "psychologist.analysis_completed",
  ];
  const FEED_FILTER = "session.*,support.*,message.received,message.sent,message.failed," +
    "message.parked,guard.*,router.*,agent.*,psychologist.*";

  const AUTHORS = { couple: "casal", mel: "mel", support: "suporte" };
  const STATUS = { waiting: "aguardando", open: "aberto", taken: "assumido", bot: "com a mel" };
  const H_STATUS = { proposed: "proposta", accepted: "aceita", dismissed: "descartada" };

  const state = {
    me: null,
    csrf: null,
    queue: [],
    queueLoadedAt: 0,
    threadId: null,
    session: null, // null: the thread's open session
    highlight: [],
    thread: null,
    threadLoadedAt: 0,
    view: "queue",
    insightsThread: null,
    feed: null,
    timers: {},
  };

  // --- small helpers -------------------------------------------------------------------

  function el(tag, attrs = {}, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs)) {
      if (value === null || value === undefined || value === false) continue;
      if (key === "text") node.textContent = String(value);
      else if (key === "class") node.className = value;
      else if (key === "testid") node.dataset.testid = value;
      else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
      else node.setAttribute(key, value === true ? "" : String(value));
    }
    for (const child of children) {
      if (child !== null && child !== undefined && child !== false) node.append(child);
    }
    return node;
  }

  function show(node, visible) {
    node.hidden = !visible;
  }

  function later(name, fn, ms = 120) {
    clearTimeout(state.timers[name]);
    state.timers[name] = setTimeout(fn, ms);
  }

  function duration(seconds) {
    seconds = Math.max(0, Math.round(seconds));
    if (seconds < 60) return `${seconds} s`;
    const minutes = Math.floor(seconds / 60);
    if (minutes < 60) return `${minutes} min`;
    const hours = Math.floor(minutes / 60);
    if (hours < 48) return `${hours} h ${minutes % 60} min`;
    return `${Math.floor(hours / 24)} dias`;
  }

  function clock(iso) {
    if (!iso) return "";
    const date = new Date(iso);
    if (Number.isNaN(date.getTime())) return "";
    return date.toLocaleString("pt-BR", {
      day: "2-digit", month: "2-digit", hour: "2-digit", minute: "2-digit",
    });
  }

  function who(threadId, user) {
    if (user) return user;
    const parts = String(threadId).split(":");
    return parts[parts.length - 1];
  }

  let toastTimer = null;
  function toast(message, kind = "info") {
    const box = $("toast");
    box.textContent = message;
    box.className = `toast ${kind}`;
    box.setAttribute("role", kind === "error" ? "alert" : "status");
    show(box, true);
    clearTimeout(toastTimer);
    toastTimer = setTimeout(() => show(box, false), 7000);
  }

  class ApiError extends Error {
    constructor(message, status, retryAfter) {
      super(message);
      this.status = status;
      this.retryAfter = retryAfter;
    }
  }

  async function api(method, path, body) {
    const options = { method, headers: { Accept: "application/json" }, credentials: "same-origin" };
    if (method !== "GET") {
      options.headers["Content-Type"] = "application/json";
      options.headers["X-CSRF-Token"] = state.csrf || "";
      options.body = JSON.stringify(body || {});
    }
    let response;
    try {
      response = await fetch(`api/${path}`, options);
    } catch (error) {
      throw new ApiError("sem conexão com o gateway", 0, null);
    }
    let data = null;
    try {
      data = await response.json();
    } catch (error) {
      data = null;
    }
    if (!response.ok) {
      if (response.status === 401 && path !== "login" && state.me) signedOut();
      const message = (data && data.error) || `erro ${response.status}`;
      throw new ApiError(message, response.status, response.headers.get("Retry-After"));
    }
    return data;
  }

  function failed(error) {
    if (error instanceof ApiError && error.status === 401) return;
    toast(error.message, "error");
  }

  // --- login ---------------------------------------------------------------------------

  function showLogin() {
    show($("app"), false);
    show($("login-screen"), true);
    $("login-name").focus();
  }

  function signedOut() {
    state.me = null;
    state.csrf = null;
    stopFeed();
    showLogin();
  }

  async function onLogin(event) {
    event.preventDefault();
    const error = $("login-error");
    show(error, false);
    const name = $("login-name").value.trim();
    const password = $("login-password").value;
    if (!name || !password) {
      error.textContent = "Informe nome e senha.";
      show(error, true);
      return;
    }
    const submit = $("login-form").querySelector("button[type=submit]");
    submit.disabled = true;
    try {
      const me = await api("POST", "login", { name, password });
      $("login-password").value = "";
      start(me);
    } catch (failure) {
      error.textContent = failure.status === 401 ? "Nome ou senha incorretos." : failure.message;
      show(error, true);
    } finally {
      submit.disabled = false;
    }
  }

  async function onLogout() {
    try {
      await api("POST", "logout");
    } catch (error) {
      // gone already: the page signs out either way
    }
    state.threadId = null;
    closeThreadPanel();
    signedOut();
  }

  function start(me) {
    state.me = me.name;
    state.csrf = me.csrf;
    $("me").textContent = me.name;
    show($("login-screen"), false);
    show($("app"), true);
    setView("queue");
    loadQueue();
    startFeed();
  }

  // --- live feed -----------------------------------------------------------------------

  function startFeed() {
    stopFeed();
    const feed = new EventSource(`api/events?types=${encodeURIComponent(FEED_FILTER)}`);
    state.feed = feed;
    feed.onopen = () => {
      $("live").className = "live on";
      $("live").title = "ao vivo";
      // anything missed while reconnecting is caught up by reloading what is shown
      loadQueue();
      if (state.threadId) later("thread", loadThread);
    };
    feed.onerror = () => {
      $("live").className = "live off";
      $("live").title = "reconectando…";
      // refused for good (e.g. the login expired): find out, and sign out if so
      if (feed.readyState === EventSource.CLOSED) {
        api("GET", "me").then(() => later("feed", startFeed, 3000), () => {});
      }
    };
    for (const type of EVENT_TYPES) feed.addEventListener(type, onEvent);
  }

  function stopFeed() {
    if (state.feed) state.feed.close();
    state.feed = null;
  }

  function onEvent(message) {
    let envelope;
    try {
      envelope = JSON.parse(message.data);
    } catch (error) {
      return;
    }
    const type = envelope.type || message.type;
    if (type.startsWith("session.") || type.startsWith("support.")) later("queue", loadQueue);
    if (state.threadId && envelope.thread_id === state.threadId) later("thread", loadThread);
    if (type.startsWith("psychologist.") && state.view === "insights") later("insights", loadInsights);
  }

  // --- queue ---------------------------------------------------------------------------

  async function loadQueue() {
    try {
      const data = await api("GET", "queue");
      state.queue = data.handoffs;
      state.queueLoadedAt = Date.now();
      renderQueue();
    } catch (error) {
      failed(error);
    }
  }

  function waited(item) {
    return item.waited_seconds + (Date.now() - state.queueLoadedAt) / 1000;
  }

  function renderQueue() {
    const list = $("queue");
    list.replaceChildren(...state.queue.map(queueItem));
    show($("queue-empty"), state.queue.length === 0);
    $("queue-count").textContent = state.queue.length ? String(state.queue.length) : "";
  }

  function queueItem(item) {
    const mine = item.taken_by && item.taken_by === state.me;
    const status = mine ? "com você" : STATUS[item.status] || item.status;
    const li = el("li", {
      class: `item ${item.status}${item.thread_id === state.threadId ? " current" : ""}`,
      testid: "handoff-item",
      "data-thread-id": item.thread_id,
      "data-status": item.status,
      tabindex: "0",
      onclick: () => openThread(item.thread_id),
      onkeydown: (event) => {
        if (event.key === "Enter" && event.target === li) openThread(item.thread_id);
      },
    });
    const info = el("div", { class: "item-info" },
      el("strong", { class: "item-who", text: who(item.thread_id) }),
      el("span", { class: `badge ${item.status}`, text: status }),
      el("span", { class: "waited muted small", "data-since": item.requested_at,
        text: `esperando há ${duration(waited(item))}` }),
    );
    if (item.taken_by) {
      info.append(el("span", { class: "assignee small", testid: "assignee", text: item.taken_by }));
    }
    li.append(info);
    if (!mine) {
      li.append(el("button", {
        class: item.taken_by ? "claim" : "claim primary",
        testid: "claim",
        text: "Assumir",
        onclick: (event) => {
          event.stopPropagation();
          claim(item.thread_id);
        },
      }));
    }
    return li;
  }

  function tickWaits() {
    for (const node of document.querySelectorAll("#queue .waited")) {
      const item = state.queue.find((i) => i.requested_at === node.dataset.since);
      if (item) node.textContent = `esperando há ${duration(waited(item))}`;
    }
    if (state.thread) renderWindow();
  }

  async function claim(threadId) {
    try {
      await api("POST", `threads/${encodeURIComponent(threadId)}/claim`);
      toast("Conversa assumida: ela está com você.");
      await loadQueue();
      openThread(threadId);
    } catch (error) {
      failed(error);
      loadQueue();
    }
  }

  // --- a conversation ------------------------------------------------------------------

  function openThread(threadId, options = {}) {
    state.threadId = threadId;
    state.session = options.session || null;
    state.highlight = options.highlight || [];
    state.thread = null;
    setView("queue");
    $("queue-view").classList.add("show-thread");
    show($("thread-panel"), true);
    $("transcript").replaceChildren();
    $("thread-title").textContent = who(threadId);
    renderQueue();
    loadThread();
  }

  function closeThreadPanel() {
    state.threadId = null;
    state.thread = null;
    $("queue-view").classList.remove("show-thread");
    show($("thread-panel"), false);
    renderQueue();
  }

  async function loadThread() {
    const threadId = state.threadId;
    if (!threadId) return;
    const query = state.session ? `?session=${encodeURIComponent(state.session)}` : "";
    try {
      const data = await api("GET", `threads/${encodeURIComponent(threadId)}${query}`);
      if (state.threadId !== threadId) return;
      state.thread = data;
      state.threadLoadedAt = Date.now();
      renderThread();
    } catch (error) {
      failed(error);
    }
  }

  function renderThread() {
    const t = state.thread;
    const mine = t.assignee && t.assignee === state.me;
    $("thread-title").textContent = who(t.thread_id, t.user);
    const meta = [t.channel, STATUS[t.status] || t.status];
    if (t.session_id) meta.push(`sessão ${t.session_id}`);
    $("thread-meta").textContent = meta.filter(Boolean).join(" · ");

    $("thread-assignee").textContent = t.assignee
      ? (mine ? "com você" : `com ${t.assignee}`)
      : (t.status === "open" || t.status === "waiting" ? "ninguém assumiu" : "com a mel");
    show($("thread-claim"), !mine && (t.status === "open" || t.status === "waiting"));

    const release = $("release");
    release.disabled = !(t.status === "open" || t.status === "taken");
    release.title = release.disabled ? "A conversa não está com uma pessoa." : "";
    const close = $("close");
    close.disabled = !t.session_open;
    close.title = close.disabled ? "Não há sessão aberta." : "";

    const viewingOld = Boolean(state.session) && !t.session_open;
    show($("session-bar"), viewingOld);
    if (viewingOld) $("session-label").textContent = `Sessão encerrada ${t.session_id}`;

    renderTranscript(t.transcript);
    renderOlder(t.sessions);
    renderWindow();
    renderThreadInsightsLink();
  }

  function renderTranscript(items) {
    const list = $("transcript");
    const nearBottom = list.scrollHeight - list.scrollTop - list.clientHeight < 80;
    list.replaceChildren(...items.map(transcriptItem));
    show($("transcript-empty"), items.length === 0);
    const cited = state.highlight.length
      ? list.querySelector(`li[data-event-id="${CSS.escape(state.highlight[0])}"]`)
      : null;
    if (cited) cited.scrollIntoView({ block: "center" });
    else if (nearBottom || list.dataset.for !== state.threadId) list.scrollTop = list.scrollHeight;
    list.dataset.for = state.threadId;
  }

  function transcriptItem(item) {
    const cited = state.highlight.includes(item.id);
    if (item.kind === "message") {
      const label = item.author === "support" && item.by
        ? `suporte · ${item.by}` : AUTHORS[item.author] || item.author;
      const li = el("li", {
        class: `msg ${item.author}${cited ? " cited" : ""}`,
        testid: "transcript-message",
        "data-author": item.author,
        "data-event-id": item.id,
      },
      el("span", { class: "msg-who small", text: label }),
      el("p", { class: "msg-text", text: item.text }),
      el("span", { class: "msg-at small muted", text: clock(item.at) }));
      if (item.author === "support") {
        li.append(el("span", { class: "small muted", text: item.delivered ? " · entregue" : " · na fila" }));
      }
      return li;
    }
    return el("li", {
      class: `decision${cited ? " cited" : ""}`,
      testid: "transcript-decision",
      "data-type": item.type,
      "data-event-id": item.id,
    },
    el("span", { class: "decision-text", text: item.text }),
    el("span", { class: "msg-at small muted", text: clock(item.at) }));
  }

  function renderOlder(sessions) {
    const list = $("older-list");
    list.replaceChildren(...sessions.map((s) => el("li", {},
      el("button", {
        class: "link",
        testid: "older-session",
        "data-session-id": s.session_id,
        text: `Sessão encerrada em ${clock(s.closed_at)}`,
        onclick: () => openThread(state.threadId, { session: s.session_id }),
      }))));
    show($("older"), sessions.length > 0);
  }

  function renderWindow() {
    const t = state.thread;
    if (!t) return;
    const line = $("window");
    const left = t.window.remaining_seconds - (Date.now() - state.threadLoadedAt) / 1000;
    const open = t.window.open && left > 0;
    line.dataset.open = open ? "true" : "false";
    line.className = `window ${open ? "open" : "closed"}`;
    let reason = "";
    if (open) {
      line.textContent = `Janela de 24 h do WhatsApp: faltam ${duration(left)}`;
    } else if (t.window.last_user_at) {
      line.textContent = "Janela de 24 h do WhatsApp fechada";
      reason = "Fora da janela de 24 horas do WhatsApp: o casal escreveu pela última vez em " +
        `${clock(t.window.last_user_at)}. Só modelos aprovados podem ser enviados agora.`;
    } else {
      line.textContent = "Janela de 24 h do WhatsApp fechada";
      reason = "O casal ainda não escreveu: não há janela aberta para responder.";
    }
    if (!reason && t.assignee && t.assignee !== state.me) {
      reason = `Esta conversa está com ${t.assignee}: só quem assumiu responde.`;
    }
    const send = $("reply-send");
    send.disabled = Boolean(reason);
    send.title = reason;
    $("reply-input").disabled = Boolean(reason);
    $("reply-reason").textContent = reason;
    show($("reply-reason"), Boolean(reason));
  }

  async function onReply(event) {
    event.preventDefault();
    const input = $("reply-input");
    const text = input.value.trim();
    if (!text || !state.threadId) return;
    const send = $("reply-send");
    send.disabled = true;
    try {
      await api("POST", `threads/${encodeURIComponent(state.threadId)}/messages`, { text });
      input.value = "";
      await loadThread();
    } catch (error) {
      failed(error);
      renderWindow();
    }
  }

  async function threadAction(action, done) {
    if (!state.threadId) return;
    const threadId = state.threadId;
    try {
      const data = await api("POST", `threads/${encodeURIComponent(threadId)}/${action}`);
      toast(done);
      if (action === "close" && data.session_id) state.session = data.session_id;
      await Promise.all([loadThread(), loadQueue()]);
    } catch (error) {
      failed(error);
    }
  }

  // --- insights ------------------------------------------------------------------------

  function setView(view) {
    state.view = view;
    show($("queue-view"), view === "queue");
    show($("insights-view"), view === "insights");
    $("tab-queue").setAttribute("aria-pressed", String(view === "queue"));
    $("tab-insights").setAttribute("aria-pressed", String(view === "insights"));
  }

  function renderThreadInsightsLink() {
    const link = $("thread-insights");
    link.textContent = "Insights desta conversa";
    show(link, true);
  }

  function showInsights(threadId = null) {
    state.insightsThread = threadId;
    setView("insights");
    loadInsights();
  }

  async function loadInsights() {
    const params = new URLSearchParams();
    const status = $("insights-status").value;
    if (status) params.set("status", status);
    if (state.insightsThread) params.set("thread", state.insightsThread);
    const chip = $("insights-thread");
    chip.textContent = state.insightsThread ? `só ${who(state.insightsThread)} ✕` : "";
    show(chip, Boolean(state.insightsThread));
    try {
      const data = await api("GET", `insights?${params}`);
      renderInsights(data.agents);
    } catch (error) {
      failed(error);
    }
  }

  function renderInsights(groups) {
    const box = $("insights");
    // a live update redraws the list: what someone is typing in it stays
    const typed = new Map();
    for (const li of box.querySelectorAll("[data-hypothesis-id]")) {
      const note = li.querySelector('[data-testid="hypothesis-note"]');
      const anamnese = li.querySelector('[data-testid="hypothesis-anamnese"]');
      if (note) typed.set(li.dataset.hypothesisId, { note: note.value, anamnese: anamnese.checked });
    }
    box.replaceChildren(...groups.map((group) => el("section", { class: "agent-group" },
      el("h3", { text: `${group.target_agent} (${group.count})` }),
      el("ul", { class: "hypotheses" }, ...group.hypotheses.map(hypothesisItem)))));
    for (const li of box.querySelectorAll("[data-hypothesis-id]")) {
      const kept = typed.get(li.dataset.hypothesisId);
      const note = li.querySelector('[data-testid="hypothesis-note"]');
      if (kept && note) {
        note.value = kept.note;
        li.querySelector('[data-testid="hypothesis-anamnese"]').checked = kept.anamnese;
      }
    }
    show($("insights-empty"), groups.length === 0);
  }

  function hypothesisItem(h) {
    const li = el("li", {
      class: `hypothesis ${h.status}`,
      testid: "hypothesis-item",
      "data-hypothesis-id": h.id,
      "data-status": h.status,
    });
    li.append(
      el("div", { class: "h-head" },
        el("strong", { class: "h-title", text: h.title }),
        el("span", { class: "badge", text: `${h.confidence}% de confiança` }),
        el("span", { class: `badge ${h.status}`, testid: "hypothesis-status", text: H_STATUS[h.status] || h.status })),
      el("p", { class: "h-text", text: h.description }));
    if (h.termination_analysis) {
      li.append(el("p", { class: "h-text muted", text: `Encerramento: ${h.termination_analysis}` }));
    }
    const evidence = el("p", { class: "evidence small" },
      el("span", { class: "muted", text: `Sessão ${h.session_id} · evidências: ` }));
    for (const id of h.evidence_event_ids) {
      evidence.append(el("button", {
        class: "link evidence-id",
        testid: "evidence",
        "data-event-id": id,
        text: id,
        onclick: () => openThread(h.thread_id, { session: h.session_id, highlight: [id] }),
      }), " ");
    }
    li.append(evidence);
    if (h.status === "proposed") {
      const anamnese = el("input", { type: "checkbox", testid: "hypothesis-anamnese" });
      const note = el("input", {
        type: "text", class: "note", testid: "hypothesis-note", maxlength: "2000",
        placeholder: "nota (opcional, ao descartar)", "aria-label": "nota ao descartar",
      });
      li.append(el("div", { class: "h-actions" },
        el("label", { class: "small" }, anamnese, " para anamnese"),
        el("button", {
          class: "primary", testid: "hypothesis-accept", text: "Aceitar",
          onclick: () => decide(h.id, "accept", { for_anamnese: anamnese.checked }),
        }),
        note,
        el("button", {
          testid: "hypothesis-dismiss", text: "Descartar",
          onclick: () => decide(h.id, "dismiss", { note: note.value.trim() || null }),
        })));
    } else {
      const by = h.decided_by ? ` por ${h.decided_by}` : "";
      const extra = h.for_anamnese ? " (para anamnese)" : "";
      const noted = h.note ? ` — “${h.note}”` : "";
      li.append(el("p", { class: "small muted", testid: "hypothesis-decision",
        text: `${H_STATUS[h.status] || h.status}${by}${extra}${noted}` }));
    }
    li.append(el("button", {
      class: "link small", testid: "reanalyze", text: "Pedir reanálise desta sessão",
      onclick: () => reanalyze(h.session_id),
    }));
    return li;
  }

  async function decide(id, action, body) {
    try {
      await api("POST", `hypotheses/${encodeURIComponent(id)}/${action}`, body);
      toast(action === "accept" ? "Hipótese aceita." : "Hipótese descartada.");
      await loadInsights();
    } catch (error) {
      failed(error);
    }
  }

  async function reanalyze(sessionId) {
    try {
      await api("POST", `sessions/${encodeURIComponent(sessionId)}/reanalyze`);
      toast("Reanálise pedida: a nova análise aparece aqui quando terminar.");
    } catch (error) {
      failed(error);
    }
  }

  // --- wiring --------------------------------------------------------------------------

  function wire() {
    $("login-form").addEventListener("submit", onLogin);
    $("logout").addEventListener("click", onLogout);
    $("tab-queue").addEventListener("click", () => setView("queue"));
    $("tab-insights").addEventListener("click", () => showInsights(null));
    $("back").addEventListener("click", closeThreadPanel);
    $("thread-claim").addEventListener("click", () => claim(state.threadId));
    $("reply-form").addEventListener("submit", onReply);
    $("reply-input").addEventListener("keydown", (event) => {
      if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) onReply(event);
    });
    $("release").addEventListener("click", () => threadAction("release", "Conversa devolvida à mel."));
    $("close").addEventListener("click", () => threadAction("close", "Sessão encerrada."));
    $("session-current").addEventListener("click", () => openThread(state.threadId));
    $("thread-insights").addEventListener("click", () => showInsights(state.threadId));
    $("insights-status").addEventListener("change", loadInsights);
    $("insights-thread").addEventListener("click", () => showInsights(null));
    setInterval(tickWaits, 15000);
  }

  async function boot() {
    wire();
    try {
      start(await api("GET", "me"));
    } catch (error) {
      showLogin();
    }
  }

  document.addEventListener("DOMContentLoaded", boot);
})();
