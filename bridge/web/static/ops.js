// The page's operations views, clients of the bridge's read-only ops API
// (package bridge/ops):
//
//   #/approvals  the approvals inbox: every pending approval of the mesh,
//                oldest first, live from GET /ops/approvals/events; approve
//                or reject one or several (POST /approvals/{uuid}, with the
//                hash of the arguments shown and an optional reason); the
//                decided ones with who decided and when. Approvers and
//                admins only (the bridge says so in GET /auth/me's may.decide).
//   #/mesh       the processes of the mesh by role, their breakers, the work
//                queues, degradation mode and small charts of the rates, live
//                from GET /ops/mesh/events (viewers and up).
//
// Each view holds one EventSource while it shows; it reopens it with a
// fresh stream token when the bridge refuses or drops it.

import { api, describeError, follow } from './api.js';
import { createChart } from './charts.js';
import { ago, duration, h } from './dom.js';
import { argsHash } from './hash.js';

const $ = (sel) => document.querySelector(sel);

// foldAt is the length past which a string argument is folded.
const foldAt = 160;

export function createOps({ onNavigate }) {
  const ui = {
    root: $('#ops'),
    title: $('#ops-title'),
    meta: $('#ops-meta'),
    connection: $('#ops-connection'),
    error: $('#ops-error'),
    errorText: $('#ops-error-text'),
    errorClose: $('#ops-error-close'),
    denied: $('#ops-denied'),
    nav: $('#ops-nav'),
    navApprovals: $('#nav-approvals'),
    navCount: $('#nav-approvals-count'),
    navMesh: $('#nav-mesh'),
    inbox: $('#inbox'),
    pending: $('#pending'),
    pendingEmpty: $('#pending-empty'),
    pendingCount: $('#pending-count'),
    decided: $('#decided'),
    decidedEmpty: $('#decided-empty'),
    selectAll: $('#select-all'),
    selectedCount: $('#selected-count'),
    bulkReason: $('#bulk-reason'),
    bulkApprove: $('#bulk-approve'),
    bulkReject: $('#bulk-reject'),
    meshview: $('#meshview'),
    degraded: $('#degraded'),
    charts: $('#charts'),
    detection: $('#detection'),
    roles: $('#roles'),
    queues: $('#queues tbody'),
    breakers: $('#breakers tbody'),
    breakersEmpty: $('#breakers-empty'),
    systemEvents: $('#system-events'),
  };
  let may = {};
  let current = ''; // the view shown: approvals, mesh or ''
  let es = null; // the view's stream (follow)
  let clock = 0;
  const selected = new Set(); // uuids ticked
  const deciding = new Set(); // uuids whose decision is on its way
  const pendingItems = new Map(); // uuid → {li, ap}
  const samples = [];
  const charts = [];

  ui.errorClose.addEventListener('click', clearError);
  ui.selectAll.addEventListener('change', () => {
    for (const uuid of pendingItems.keys()) {
      if (ui.selectAll.checked && !deciding.has(uuid)) selected.add(uuid);
      else selected.delete(uuid);
    }
    for (const { li } of pendingItems.values()) li.querySelector('.pick').checked = selected.has(li.dataset.uuid);
    updateBulk();
  });
  ui.bulkApprove.addEventListener('click', () => decideMany([...selected], true, ui.bulkReason.value));
  ui.bulkReject.addEventListener('click', () => decideMany([...selected], false, ui.bulkReason.value));
  for (const a of [ui.navApprovals, ui.navMesh]) a.addEventListener('click', () => onNavigate());

  function showError(text) {
    ui.errorText.textContent = text;
    ui.error.hidden = false;
  }

  function clearError() {
    ui.error.hidden = true;
    ui.errorText.textContent = '';
  }

  function setConnection(text) {
    ui.connection.textContent = text;
    ui.connection.hidden = !text;
  }

  // setAccess takes GET /auth/me's may: which views to offer.
  function setAccess(m) {
    may = m || {};
    ui.navApprovals.hidden = !may.decide;
    ui.navMesh.hidden = !may.read;
    ui.nav.hidden = !may.decide && !may.read;
  }

  function show(name) {
    if (current === name && es) return;
    stop();
    current = name;
    ui.root.hidden = false;
    clearError();
    ui.inbox.hidden = true;
    ui.meshview.hidden = true;
    ui.denied.hidden = true;
    for (const a of [ui.navApprovals, ui.navMesh]) a.classList.toggle('active', a.getAttribute('href') === `#/${name}`);
    if (name === 'approvals') {
      ui.title.textContent = 'Approvals';
      ui.meta.textContent = 'Every call that waits for a person, across the mesh.';
      if (!may.decide) return deny('Only approvers and admins see the approvals inbox.');
      ui.inbox.hidden = false;
      connect('/ops/approvals/events?history=50', onInbox);
      clock = setInterval(tickWaited, 1000);
    } else if (name === 'mesh') {
      ui.title.textContent = 'Mesh';
      ui.meta.textContent = 'The processes of the mesh, live.';
      if (!may.read) return deny('Your roles do not allow the mesh view.');
      ui.meshview.hidden = false;
      if (!charts.length) makeCharts();
      connect('/ops/mesh/events', onMesh);
    } else {
      ui.title.textContent = 'Operations';
      ui.meta.textContent = '';
      deny(`There is no page #/${name}: see #/approvals or #/mesh.`);
    }
  }

  function deny(text) {
    ui.denied.textContent = text;
    ui.denied.hidden = false;
  }

  function hide() {
    stop();
    current = '';
    ui.root.hidden = true;
    for (const a of [ui.navApprovals, ui.navMesh]) a.classList.remove('active');
  }

  // stop closes the view's stream (signed out, another view).
  function stop() {
    if (es) es.close();
    es = null;
    clearInterval(clock);
    setConnection('');
  }

  function connect(path, onData) {
    es = follow(path, onData, (state) => setConnection(state === 'open' ? '' : 'reconnecting…'));
  }

  // ------------------------------------------------------------ the inbox

  function onInbox(data) {
    if (data.type !== 'approvals') return;
    const pending = data.pending || [];
    const keep = new Set(pending.map((it) => it.uuid));
    for (const [uuid, { li }] of pendingItems) {
      if (!keep.has(uuid)) {
        li.remove();
        pendingItems.delete(uuid);
        selected.delete(uuid);
        deciding.delete(uuid);
      }
    }
    // Oldest first: existing items keep their element (what was typed or
    // ticked in it stays), new ones are made.
    pending.forEach((it, i) => {
      let entry = pendingItems.get(it.uuid);
      if (!entry) {
        entry = { li: pendingItem(it), ap: it };
        pendingItems.set(it.uuid, entry);
      }
      // Moved only when out of place: moving an element blurs what it holds.
      const at = ui.pending.children[i];
      if (at !== entry.li) ui.pending.insertBefore(entry.li, at || null);
    });
    ui.pendingEmpty.hidden = pending.length > 0;
    ui.pendingCount.textContent = pending.length ? `${pending.length}` : '';
    ui.navCount.textContent = String(pending.length);
    ui.navCount.hidden = pending.length === 0;
    const decided = data.decided || [];
    ui.decided.replaceChildren(...decided.map(decidedItem));
    ui.decidedEmpty.hidden = decided.length > 0;
    tickWaited();
    updateBulk();
  }

  function pendingItem(it) {
    const conv = it.conversation || { id: it.conversation_id };
    const pick = h('input', { type: 'checkbox', class: 'pick', 'aria-label': `Select ${it.tool_name}` });
    pick.addEventListener('change', () => {
      if (pick.checked) selected.add(it.uuid);
      else selected.delete(it.uuid);
      updateBulk();
    });
    const reason = h('input', { type: 'text', class: 'reason', placeholder: 'Reason (optional)', maxlength: 500, 'aria-label': 'Reason' });
    const args = argsBlock(it.tool_args || {});
    const who = [it.member ? `${it.member} (${it.agent})` : it.agent, it.asked_by ? `asked by ${it.asked_by}` : ''].filter(Boolean).join(' · ');
    const li = h('li', { class: 'inbox-item', dataset: { uuid: it.uuid, conversation: conv.id, tool: it.tool_name, created: it.created_at } },
      h('div', { class: 'inbox-head' },
        pick,
        h('div', { class: 'inbox-what' },
          h('div', {}, h('strong', { class: 'tool', text: it.tool_name || it.tool || 'a tool' }), it.server ? h('span', { class: 'muted', text: ` on ${it.server}` }) : null),
          h('div', { class: 'muted small' },
            h('a', { href: `#${conv.id}`, class: 'conv-link', text: conv.title || `conversation ${conv.id.slice(0, 8)}` }),
            who ? ` · ${who}` : '')),
        h('div', { class: 'inbox-when' },
          h('span', { class: 'waited', text: '' }),
          h('span', { class: 'muted small', text: new Date(it.created_at).toLocaleString() }))),
      it.request ? h('p', { class: 'request muted small' }, 'Message: ', h('q', { text: it.request })) : null,
      it.description ? h('p', { class: 'description small', text: it.description }) : null,
      args,
      h('div', { class: 'inbox-actions' },
        reason,
        h('button', { type: 'button', class: 'btn small danger-ghost reject', onclick: () => decideMany([it.uuid], false, reason.value) }, 'Reject'),
        h('button', { type: 'button', class: 'btn small primary approve', onclick: () => decideMany([it.uuid], true, reason.value) }, 'Approve')));
    return li;
  }

  // argsBlock shows the exact arguments as formatted JSON, long strings
  // folded, with a button that shows them whole.
  function argsBlock(args) {
    const whole = JSON.stringify(args, null, 2);
    let folded = false;
    const short = JSON.stringify(args, (k, v) => {
      if (typeof v === 'string' && v.length > foldAt) {
        folded = true;
        return `${v.slice(0, foldAt)}… (${v.length - foldAt} more characters)`;
      }
      return v;
    }, 2);
    const pre = h('pre', { class: 'args', text: short, dataset: { folded: folded ? 'true' : 'false' } });
    if (!folded) return h('div', { class: 'args-block' }, pre);
    const btn = h('button', { type: 'button', class: 'btn small ghost unfold', text: 'Show whole values' });
    btn.addEventListener('click', () => {
      const open = pre.dataset.folded === 'true';
      pre.textContent = open ? whole : short;
      pre.dataset.folded = open ? 'false' : 'true';
      btn.textContent = open ? 'Fold long values' : 'Show whole values';
    });
    return h('div', { class: 'args-block' }, pre, btn);
  }

  function decidedItem(it) {
    const conv = it.conversation || { id: it.conversation_id };
    const d = it.decision || {};
    return h('li', { class: 'history-item', dataset: { uuid: it.uuid, status: it.status, by: d.by || '' } },
      h('span', { class: `pill ${it.status}`, text: it.status }),
      h('strong', { text: it.tool_name || 'a tool' }),
      h('a', { href: `#${conv.id}`, class: 'conv-link small', text: conv.title || conv.id.slice(0, 8) }),
      h('span', { class: 'muted small' }, `by ${d.by || 'someone'} · ${ago(it.decided_at)} · waited ${duration(it.waited_seconds || 0)}`),
      d.reason ? h('span', { class: 'reason-text small', text: `“${d.reason}”` }) : null);
  }

  function tickWaited() {
    for (const { li, ap } of pendingItems.values()) {
      const secs = (Date.now() - Date.parse(ap.created_at)) / 1000;
      li.querySelector('.waited').textContent = `waiting ${duration(secs)}`;
    }
  }

  function updateBulk() {
    const n = [...selected].filter((u) => pendingItems.has(u) && !deciding.has(u)).length;
    ui.selectedCount.textContent = n ? `${n} selected` : 'Select all';
    ui.bulkApprove.disabled = n === 0;
    ui.bulkReject.disabled = n === 0;
    ui.selectAll.checked = n > 0 && n === pendingItems.size;
  }

  // decideMany decides each approval; the stream takes them off the list.
  async function decideMany(uuids, approved, reason) {
    clearError();
    const todo = uuids.filter((u) => pendingItems.has(u) && !deciding.has(u));
    await Promise.all(todo.map(async (uuid) => {
      const { li, ap } = pendingItems.get(uuid);
      deciding.add(uuid);
      selected.delete(uuid);
      li.dataset.deciding = approved ? 'approve' : 'reject';
      for (const b of li.querySelectorAll('button, input')) b.disabled = true;
      updateBulk();
      try {
        const body = { approved };
        if (reason && reason.trim()) body.reason = reason.trim();
        const shown = await argsHash(ap.tool_args || {});
        if (shown) body.args_hash = shown;
        // Answers once the resumed turn ends: the stream shows the
        // decision long before.
        await api('POST', `/approvals/${encodeURIComponent(uuid)}`, body);
      } catch (err) {
        if (err.code === 'approval_decided') return;
        deciding.delete(uuid);
        delete li.dataset.deciding;
        for (const b of li.querySelectorAll('button, input')) b.disabled = false;
        showError(`${ap.tool_name}: ${describeError(err)}`);
        updateBulk();
      }
    }));
    if (uuids.length > 1) ui.bulkReason.value = '';
  }

  // ------------------------------------------------------------ the mesh

  function makeCharts() {
    const defs = [
      { metric: 'turns_per_s', label: 'Turns per second', digits: 2 },
      { metric: 'events_per_s', label: 'Events per second', digits: 1 },
      { metric: 'p95_turn_ms', label: 'p95 turn time', unit: 'ms', digits: 0 },
      { metric: 'approvals_waiting', label: 'Approvals waiting', digits: 0 },
    ];
    for (const d of defs) charts.push(createChart(ui.charts, d));
  }

  function onMesh(data) {
    if (data.type === 'history') {
      samples.length = 0;
      samples.push(...(data.samples || []));
      for (const c of charts) c.update(samples);
      return;
    }
    if (data.type !== 'mesh') return;
    const s = data.stats;
    if (s && s.at && (!samples.length || Date.parse(s.at) > Date.parse(samples[samples.length - 1].at))) {
      samples.push(s);
      if (samples.length > 600) samples.splice(0, samples.length - 600);
      for (const c of charts) c.update(samples);
    }
    renderDegradation(data.degradation);
    ui.detection.textContent = `a silent node is down after ${(data.detection_ms / 1000).toFixed(1)} s`;
    renderRoles(data.nodes || [], data.roles || {});
    renderQueues(data.queues || [], data.queue_error);
    renderBreakers(data.breakers || []);
    ui.systemEvents.replaceChildren(...(data.events || []).slice(0, 20).map((e) =>
      h('li', { dataset: { name: e.name, node: e.node || '' } },
        h('span', { class: `pill ${e.name}`, text: e.name.replace(/_/g, ' ') }),
        e.node ? h('strong', { text: ` ${e.node}` }) : null,
        e.reason ? h('span', { class: 'muted small', text: ` · ${e.reason}` }) : null,
        h('span', { class: 'muted small', text: ` · ${ago(e.at)}` }))));
  }

  function renderDegradation(d) {
    ui.degraded.hidden = !d;
    if (d) ui.degraded.textContent = `Degradation mode since ${new Date(d.since).toLocaleTimeString()}: ${d.reason}. New conversations are refused until it ends.`;
  }

  function nodeState(n) {
    if (n.state === 'down') return 'down';
    if (n.late) return 'late';
    return n.state || 'unknown';
  }

  function renderRoles(nodes, roles) {
    const byRole = new Map();
    for (const n of nodes) {
      if (!byRole.has(n.role)) byRole.set(n.role, []);
      byRole.get(n.role).push(n);
    }
    const groups = [...byRole.keys()].sort().map((role) => {
      const c = roles[role] || {};
      const health = c.down || c.late ? 'bad' : c.degraded ? 'warn' : 'ok';
      const counts = [`${c.nodes || 0} ${c.nodes === 1 ? 'node' : 'nodes'}`, c.down ? `${c.down} down` : '', c.late ? `${c.late} late` : '', c.degraded ? `${c.degraded} degraded` : '']
        .filter(Boolean).join(' · ');
      return h('section', { class: 'role-group', dataset: { role, health } },
        h('h3', {}, h('span', { text: role }), h('span', { class: 'muted small', text: counts })),
        h('div', { class: 'nodes' }, ...byRole.get(role).map(nodeCard)));
    });
    ui.roles.replaceChildren(...groups);
  }

  function nodeCard(n) {
    const state = nodeState(n);
    const beat = n.state === 'down' ? `down ${ago(n.down_at)}` : `beat ${(n.beat_age_ms / 1000).toFixed(1)} s ago`;
    return h('div', { class: 'node', dataset: { node: n.node, state, role: n.role } },
      h('div', { class: 'node-head' }, h('span', { class: 'dot', 'aria-hidden': 'true' }), h('strong', { text: n.node }), h('span', { class: 'node-state', text: state })),
      h('div', { class: 'muted small', text: [n.pid ? `pid ${n.pid}` : '', n.host ? `on ${n.host}` : '', n.version ? `v${n.version}` : ''].filter(Boolean).join(' ') }),
      h('div', { class: 'muted small beat', text: beat }),
      n.serves && n.serves.length ? h('div', { class: 'small serves', text: `serves ${n.serves.join(', ')}` }) : null,
      n.detail ? h('div', { class: 'small detail', text: n.detail }) : null);
  }

  function renderQueues(queues, err) {
    const rows = queues.map((q) => h('tr', { class: 'queue', dataset: { role: q.role, name: q.name, pending: String(q.pending), working: String(q.working), messages: String(q.messages) } },
      h('td', {}, h('strong', { text: q.name }), h('span', { class: 'muted small', text: ` ${q.role}` })),
      h('td', { text: String(q.messages) }),
      h('td', { class: q.pending ? 'hot' : '', text: String(q.pending) }),
      h('td', { text: String(q.working) }),
      h('td', { class: q.redelivered ? 'warm' : '', text: String(q.redelivered) }),
      h('td', { class: q.consumer && !q.pulling ? 'warm' : '', text: q.consumer ? String(q.pulling) : '–' })));
    if (err) rows.push(h('tr', {}, h('td', { colspan: 6, class: 'muted small', text: `work queues: ${err}` })));
    ui.queues.replaceChildren(...rows);
  }

  function renderBreakers(list) {
    ui.breakers.replaceChildren(...list.map((b) => h('tr', { class: 'breaker', dataset: { name: b.name, state: b.state, node: b.node } },
      h('td', { text: b.name.replace(/^[a-z0-9]+:/, '') }),
      h('td', { text: { mcp: 'MCP server', sub_agent: 'sub-agent', model: 'model' }[b.kind] || b.kind }),
      h('td', { class: 'small', text: b.node }),
      h('td', {}, h('span', { class: `pill breaker-${b.state.replace(/[^a-z-]/g, '')}`, text: b.state })))));
    ui.breakersEmpty.hidden = list.length > 0;
  }

  return { show, hide, stop, setAccess };
}
