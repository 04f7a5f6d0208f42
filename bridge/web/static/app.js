// Agent Mesh web chat.
//
// A client of the bridge's own routes: REST for conversations, messages and
// approvals, and GET /conversations/{id}/events (AG-UI events over SSE) to
// see a conversation live. Opening a conversation renders its history from
// GET /conversations/{id}, then follows its event stream from the start:
// events of messages and tool calls the history already holds are skipped by
// id, so nothing shows twice, and whatever the history missed (a turn still
// running, or one that ended in between) comes from the stream. A dropped
// stream is followed again after its last event (?after=), the waits
// growing 1, 2, 4, 8 … up to 30 s (backoff.js) while the bridge stays away.
//
// Group chats: GET /groups lists the groups; when there are some, a select
// next to "New conversation" (or ?group=<name> in the address) makes new
// conversations group chats (POST /conversations {"group"}). In one, every
// member's message and tool call carries its author (the message's name,
// TEXT_MESSAGE_START's name, else the last speaker_selected), #speaking
// says who speaks now and why (CUSTOM speaker_selected, STEP_STARTED), and
// the log gets small notices for members skipped (speaker_skipped) and for
// the end of each round (group_ended). The history holds neither notice:
// while the stream replays from the start they are put back after the
// element of the last event that named something already shown.
//
// Agents: GET /agents is the agent directory; the same select offers every
// agent the mesh serves besides the default one, with its live status
// (online, busy, offline), refreshed every few seconds; a new conversation
// with one is POST /conversations {"agent"}.
//
// User actions: every answer of the agent has like and dislike buttons
// (POST /conversations/{id}/messages/{messageId}/feedback; CUSTOM feedback
// events keep them in step across pages), and the last answer a
// Regenerate button (POST /conversations/{id}/regenerate): the earlier
// answer stays, dimmed, as the conversation's superseded lists it. Copy
// puts an answer's text on the clipboard. Every message shows the time it
// was written (created_at, or its event's timestamp while it streams).
//
// Branches: every user message has an Edit action. Editing and sending
// forks the conversation before that message (POST
// /conversations/{id}/fork {"before"}) and sends the new text on the
// branch, which the page then shows: a branch is a conversation of its
// own, so the address (#<its id>) names it and a reload stays on it. The
// fork and the message are two requests so that the answer streams in on
// the branch like any other (a fork with "message" answers only once the
// turn ends). GET /conversations/{id}/branches lists the family: where
// alternatives part, the message shows "2 / 3" with arrows to the others,
// and the header lists every branch (branches.js).
//
// Untrusted text is only ever set with textContent or as text nodes.

import { api, describeError, follow as followStream, hasToken, onAuthRequired, setToken, streamURL } from './api.js';
import { applyPatch } from './patch.js';
import { retryDelay } from './backoff.js';
import { ago, h } from './dom.js';
import { argsHash } from './hash.js';
import { family, placeOf, pointBefore, siblingsAt } from './branches.js';
import { createOps } from './ops.js';

const $ = (sel) => document.querySelector(sel);

const ui = {
  app: $('#app'),
  sidebar: $('#sidebar'),
  scrim: $('#scrim'),
  menu: $('#menu-toggle'),
  sidebarClose: $('#sidebar-close'),
  brand: $('#brand'),
  newConv: $('#new-conversation'),
  target: $('#target'),
  targetSelect: $('#new-target'),
  targetHint: $('#target-hint'),
  convList: $('#conversations'),
  convEmpty: $('#conversations-empty'),
  title: $('#conversation-title'),
  meta: $('#conversation-meta'),
  connection: $('#connection'),
  runStatus: $('#run-status'),
  cancel: $('#cancel'),
  statePanel: $('#state-panel'),
  state: $('#state'),
  stateSummary: $('#state-summary'),
  error: $('#error'),
  errorText: $('#error-text'),
  errorClose: $('#error-close'),
  chat: $('#chat'),
  welcome: $('#welcome'),
  welcomeTitle: $('#welcome-title'),
  welcomeText: $('#welcome-text'),
  suggestions: $('#suggestions'),
  messages: $('#messages'),
  speaking: $('#speaking'),
  approval: $('#approval'),
  approvalDesc: $('#approval-description'),
  approvalArgs: $('#approval-args'),
  approve: $('#approval .approve'),
  reject: $('#approval .reject'),
  composer: $('#composer'),
  input: $('#message-input'),
  send: $('#send'),
  hint: $('#composer-hint'),
  signin: $('#signin'),
  signinForm: $('#signin-form'),
  signinToken: $('#signin-token'),
  signinError: $('#signin-error'),
  who: $('#who'),
  whoName: $('#who-name'),
  signout: $('#signout'),
  main: $('#main'),
  opsMenu: $('#ops-menu'),
  branches: $('#branches'),
  branchesSummary: $('#branches-summary'),
  branchesList: $('#branches-list'),
};

// ops draws the approvals inbox (#/approvals) and the mesh view (#/mesh).
const ops = createOps({ onNavigate: closeSidebar });

// ---------------------------------------------------------------- view state

// view is the open conversation; null when none is open.
let view = null;
let openSeq = 0; // invalidates the async work of a conversation closed meanwhile

function newView(id) {
  return {
    id,
    seq: ++openSeq,
    es: null,
    lastEventId: '',
    retryTimer: 0,
    retries: 0, // failed attempts since the stream was last open
    history: new Set(), // message ids rendered from the REST history
    historyCalls: new Set(), // tool call ids rendered from the REST history
    texts: new Map(), // message id → {el, body, chunks}
    reasoning: new Map(), // reasoning message id → {el, body}
    tools: new Map(), // tool call id → card
    users: new Set(), // ids of user messages shown (= their turn ids)
    approvals: new Set(), // approval ids seen (a resume run has the approval's id)
    localUsers: [], // user bubbles sent from this page, waiting for their run
    approval: null, // the pending approval shown in the box
    status: 'idle',
    state: {},
    sending: false,
    deciding: false,
    reconcileTimer: 0,
    conv: null, // the conversation as last read
    run: '', // the run the events are of
    group: null, // the conversation's group (conv.group), null for the agent
    speaker: null, // the member speaking: speaker_selected's value
    cursor: null, // the element replayed notices go after; null: the end
    ended: new Map(), // run id → its group_ended notice
    regens: new Set(), // run ids of regenerate turns (they add no user message)
    done: new Set(), // runs the conversation had applied when it was read
    family: null, // its branches (branches.js family), once read
    editing: null, // the user message being edited: {li, form}
    forking: false,
  };
}

const still = (seq) => view && view.seq === seq;

// me is the principal this page is signed in as (GET /auth/me).
let me = '';

// ---------------------------------------------------------------- errors

function showError(text) {
  ui.errorText.textContent = text;
  ui.error.hidden = false;
}

function clearError() {
  ui.error.hidden = true;
  ui.errorText.textContent = '';
}

// ---------------------------------------------------------------- conversation list

// The list shows the first page of GET /conversations (newest first),
// followed live (?watch=true): a turn, or an approval decided on another
// page or from the CLI, shows within a moment. A "more" item at its end
// asks for the next page (next_cursor).
let listStream = null;

// watchList follows the first page; loadList reads it once (after a run
// of this page, in case the stream is reconnecting).
function watchList() {
  if (listStream) listStream.close();
  listStream = followStream('/conversations?watch=true&limit=50', (data) => {
    if (data.type === 'conversations') showList(data);
  });
}

function stopList() {
  if (listStream) listStream.close();
  listStream = null;
}

async function loadList() {
  let data;
  try {
    data = await api('GET', '/conversations?limit=50');
  } catch (err) {
    showError(`Could not load the conversations: ${describeError(err)}`);
    return;
  }
  showList(data);
}

function showList(data) {
  const convs = (data && data.conversations) || [];
  ui.convList.replaceChildren(...convs.map(convItem), ...moreItem(data && data.next_cursor));
  ui.convEmpty.hidden = convs.length > 0;
  markActive();
}

// moreItem is the list item that loads the page after cursor; none
// without one.
function moreItem(cursor) {
  if (!cursor) return [];
  const li = h('li', { class: 'conv-more' });
  li.append(h('button', {
    type: 'button',
    class: 'conv-item',
    text: 'More conversations',
    onclick: async () => {
      let data;
      try {
        data = await api('GET', `/conversations?limit=50&cursor=${encodeURIComponent(cursor)}`);
      } catch (err) {
        showError(`Could not load more conversations: ${describeError(err)}`);
        return;
      }
      li.replaceWith(...((data && data.conversations) || []).map(convItem), ...moreItem(data && data.next_cursor));
      markActive();
    },
  }));
  return [li];
}

function convItem(c) {
  const status = c.pending_approval ? 'waiting_approval' : c.status;
  const btn = h('button', {
    type: 'button',
    class: 'conv-item',
    dataset: { id: c.id, status },
    onclick: () => {
      closeSidebar();
      go(c.id);
    },
  },
  h('span', { class: 'conv-title', text: c.title || 'New conversation' }),
  h('span', { class: 'conv-meta' },
    h('span', { class: `pill ${status}`, text: statusLabel(status) }),
    c.group ? h('span', { class: 'conv-group', text: `group ${c.group}` }) : null,
    c.forked_from ? h('span', { class: 'conv-branch', title: 'A branch: an edit of another conversation', text: 'branch' }) : null,
    h('span', { text: ago(c.updated_at) })));
  return h('li', {}, btn);
}

function markActive() {
  for (const b of ui.convList.querySelectorAll('.conv-item')) {
    const active = view && b.dataset.id === view.id;
    b.classList.toggle('active', !!active);
    if (active) b.setAttribute('aria-current', 'page');
    else b.removeAttribute('aria-current');
  }
}

let listTimer = 0;
function refreshListSoon() {
  clearTimeout(listTimer);
  listTimer = setTimeout(loadList, 250);
}

function statusLabel(s) {
  return { queued: 'queued', running: 'running', waiting_approval: 'waiting approval', completed: 'completed', error: 'error', deleted: 'deleted', expired: 'expired' }[s] || 'idle';
}

// ---------------------------------------------------------------- groups

// groups are GET /groups by name; empty when the mesh has none.
const groups = new Map();
// wantedGroup is ?group=<name>: the group new conversations go to.
const wantedGroup = new URLSearchParams(location.search).get('group') || '';

// agents are GET /agents by name; defaultAgent the one a conversation
// that names none goes to.
const agents = new Map();
let defaultAgent = '';
// agentPrefix marks an agent's value in the select (group names have no
// ':'); '' is the default agent.
const agentPrefix = 'agent:';

async function loadAgents() {
  let data;
  try {
    data = await api('GET', '/agents');
  } catch {
    return false; // the picker keeps what it showed
  }
  agents.clear();
  for (const a of (data && data.agents) || []) {
    agents.set(a.name, a);
    if (a.default) defaultAgent = a.name;
  }
  return true;
}

function agentLabel(a) {
  return `${a.name} · ${a.status}`;
}

// refreshAgents updates the statuses the picker shows, every few seconds
// while the page is visible.
async function refreshAgents() {
  if (document.hidden || !ui.signin.hidden || !(await loadAgents())) return;
  const known = new Set([...ui.targetSelect.options].map((o) => o.value));
  const fresh = [...agents.keys()].some((n) => n !== defaultAgent && !known.has(agentPrefix + n));
  if (fresh) {
    fillTargets();
    return;
  }
  for (const o of ui.targetSelect.options) {
    const a = o.value === '' ? agents.get(defaultAgent) : o.value.startsWith(agentPrefix) && agents.get(o.value.slice(agentPrefix.length));
    if (a) o.textContent = o.value === '' ? `the agent (${agentLabel(a)})` : agentLabel(a);
  }
  onTargetChange();
}

// fillTargets lists the default agent, the other agents and the groups.
function fillTargets() {
  const chosen = ui.targetSelect.value;
  const main = agents.get(defaultAgent);
  const options = [h('option', { value: '', text: main ? `the agent (${agentLabel(main)})` : 'the agent' })];
  const others = [...agents.values()].filter((a) => a.name !== defaultAgent);
  if (others.length) {
    options.push(h('optgroup', { label: 'Agents' }, ...others.map((a) => h('option', { value: agentPrefix + a.name, text: agentLabel(a) }))));
  }
  if (groups.size) {
    options.push(h('optgroup', { label: 'Group chats' }, ...[...groups.values()].map((g) => {
      const n = (g.participants || []).length;
      return h('option', { value: g.name, text: `group ${g.name} (${n} ${n === 1 ? 'agent' : 'agents'})` });
    })));
  }
  ui.targetSelect.replaceChildren(...options);
  if ([...ui.targetSelect.options].some((o) => o.value === chosen)) ui.targetSelect.value = chosen;
  ui.target.hidden = groups.size === 0 && others.length === 0;
}

async function loadGroups() {
  let data;
  await loadAgents();
  try {
    data = await api('GET', '/groups');
  } catch (err) {
    if (wantedGroup) showError(`Could not load the groups: ${describeError(err)}`);
    data = null;
  }
  groups.clear();
  for (const g of (data && data.groups) || []) groups.set(g.name, g);
  fillTargets();
  if (wantedGroup) {
    if (groups.has(wantedGroup)) ui.targetSelect.value = wantedGroup;
    else showError(`There is no group ${wantedGroup}; new conversations go to the agent.`);
  }
  onTargetChange();
  if (view && view.group && view.conv) {
    setHeader(view.conv);
    showIntro();
  }
}

// target is the group new conversations go to; '' for an agent.
function target() {
  const v = ui.target.hidden ? '' : ui.targetSelect.value;
  return v.startsWith(agentPrefix) ? '' : v;
}

// targetAgent is the agent new conversations go to when it is not the
// default one; '' otherwise.
function targetAgent() {
  const v = ui.target.hidden ? '' : ui.targetSelect.value;
  return v.startsWith(agentPrefix) ? v.slice(agentPrefix.length) : '';
}

function onTargetChange() {
  const g = groups.get(target());
  const a = agents.get(targetAgent() || defaultAgent);
  if (g) ui.targetHint.textContent = `Members: ${members(g).join(', ')} (${strategyLabel(g.strategy)}).`;
  else if (a) ui.targetHint.textContent = `${a.description ? `${a.description} ` : ''}${agentStatusText(a)}`;
  else ui.targetHint.textContent = 'One agent answers.';
  if (!view) showIntro();
}

// agentStatusText says in words whether an agent can answer now.
function agentStatusText(a) {
  return {
    online: `Online: ${a.workers - a.busy} of ${a.workers} workers free.`,
    busy: 'Busy: every worker is answering; a message waits its turn.',
    offline: 'Offline: no process serves it; a message waits until one does.',
  }[a.status] || '';
}

function members(g) {
  return ((g && g.participants) || []).map((p) => p.agent);
}

function strategyLabel(s) {
  return { round_robin: 'round robin', priority: 'by priority', router: 'by keyword', llm: 'by a model' }[s] || String(s || 'round robin').replace(/_/g, ' ');
}

// endLabel says in words why a round of a group chat ended (group_ended).
function endLabel(reason) {
  return {
    max_turns: 'the turn limit was reached',
    termination_phrase: 'a member said the termination phrase',
    participant_done: 'a member ended the chat',
    stopped: 'it was stopped',
    no_speaker: 'no member could speak',
    member_error: 'a member failed',
  }[reason] || reason || 'it ended';
}

// tone picks one of the member colours: its place in the group.
function tone(name) {
  const g = view && view.group && groups.get(view.group.name);
  let i = members(g).indexOf(name);
  if (i < 0) i = [...name].reduce((a, c) => a + c.charCodeAt(0), 0);
  return String(i % 6);
}

// showIntro fills the welcome screen and the header for no conversation (or
// an empty one) after the agent or group it goes to.
function showIntro() {
  const g = view ? view.group && groups.get(view.group.name) : groups.get(target());
  const name = view ? view.group && view.group.name : target();
  if (name) {
    ui.welcomeTitle.textContent = `What should the group ${name} do?`;
    ui.welcomeText.textContent = g
      ? `${g.description ? `${g.description}. ` : ''}Its members ${members(g).join(', ')} answer each message in up to ${g.max_turns} turns, the speakers chosen ${strategyLabel(g.strategy)}.`
      : 'Its members answer each message in turn.';
  } else if (!view && targetAgent()) {
    const a = agents.get(targetAgent());
    ui.welcomeTitle.textContent = `What should ${targetAgent()} do?`;
    ui.welcomeText.textContent = (a && a.description) || `The agent ${targetAgent()} answers.`;
  } else {
    ui.welcomeTitle.textContent = 'What should the agent do?';
    ui.welcomeText.textContent = 'It manages named resources through MCP tools. Reading them runs at once; adding or removing one waits for your approval.';
  }
  const agent = !view && targetAgent();
  ui.input.placeholder = name ? 'Message the group…' : agent ? `Message ${agent}…` : 'Message the agent…';
  if (!view) ui.meta.textContent = name ? `Start a chat with the group ${name}.` : agent ? `Start a conversation with ${agent}.` : 'Start a conversation with the agent.';
}

// ---------------------------------------------------------------- opening

function go(id) {
  if (location.hash.slice(1) === id) open(id);
  else location.hash = id; // hashchange opens it
}

async function open(id) {
  if (view && view.id === id) return;
  close();
  clearError();
  if (!id) {
    showWelcome(true);
    ui.title.textContent = 'Agent Mesh';
    showIntro();
    markActive();
    return;
  }
  view = newView(id);
  const seq = view.seq;
  markActive();
  ui.title.textContent = 'Loading…';
  ui.meta.textContent = '';
  let conv;
  try {
    conv = (await api('GET', `/conversations/${encodeURIComponent(id)}`)).conversation;
  } catch (err) {
    if (!still(seq)) return;
    view = null;
    showWelcome(true);
    ui.title.textContent = 'Agent Mesh';
    showIntro();
    showError(err.status === 404 ? 'That conversation does not exist (any more).' : `Could not open the conversation: ${describeError(err)}`);
    history.replaceState(null, '', location.pathname);
    return;
  }
  await groupsLoaded; // the members' colours follow their order in the group
  if (!still(seq)) return;
  renderHistory(conv);
  follow();
  // No focus on touch screens: it would open the keyboard over the conversation.
  if (matchMedia('(pointer: fine)').matches) ui.input.focus();
}

function close() {
  if (!view) return;
  if (view.es) view.es.close();
  clearTimeout(view.retryTimer);
  clearTimeout(view.reconcileTimer);
  view = null;
  ui.messages.replaceChildren();
  showBranches();
  hideSpeaking();
  hideApproval();
  setConnection('');
  setState({}, true);
  setStatus('idle');
}

function showWelcome(show) {
  ui.welcome.hidden = !show;
}

// setTitle names the open conversation after its first message.
function setTitle(text) {
  ui.title.textContent = text;
  const item = view && ui.convList.querySelector(`.conv-item[data-id="${CSS.escape(view.id)}"] .conv-title`);
  if (item) item.textContent = text;
}

function setHeader(conv) {
  view.conv = conv;
  const first = (conv.messages || []).find((m) => m.role === 'user');
  ui.title.textContent = first ? first.content : 'New conversation';
  if (conv.group) {
    const g = groups.get(conv.group.name);
    ui.meta.textContent = [`group ${conv.group.name}`, g && members(g).join(', '), g && strategyLabel(g.strategy), conv.id.slice(0, 8)]
      .filter(Boolean).join(' · ');
  } else {
    ui.meta.textContent = `${conv.agent || 'agent'} · ${conv.id.slice(0, 8)}`;
  }
}

function renderHistory(conv) {
  // The replay of a run applied before the read does not show it running.
  view.done = new Set(conv.recent_turns || []);
  view.group = conv.group || null;
  setHeader(conv);
  showIntro();
  for (const m of conv.messages || []) {
    view.history.add(m.id);
    if (m.role === 'user') {
      addUser(m.content, m.id, m.created_at);
    } else if (m.role === 'assistant') {
      if (m.reasoning) {
        view.history.add(`${m.id}-reasoning`);
        addReasoning(`${m.id}-reasoning`, m.reasoning, 'history');
      }
      if (m.content) addText(m.id, m.content, { notice: m.notice, source: 'history', name: m.name, at: m.created_at });
      for (const c of m.tool_calls || []) {
        view.historyCalls.add(c.id);
        if (c.approval_id) view.approvals.add(c.approval_id);
        const card = addToolCall(c.id, c.name, JSON.stringify(c.arguments || {}), 'history', m.name);
        if (c.approval_id) card.dataset.approvalId = c.approval_id;
      }
    } else if (m.role === 'tool') {
      setToolResult(m.tool_call_id, m.content, m.is_error, m.tool_name);
    }
  }
  const g = conv.group;
  if (g && g.round && g.round.pending && conv.status === 'running') {
    const p = g.round.pending;
    showSpeaking({ speaker: p.speaker, strategy: p.strategy, reason: p.reason, turn: p.id });
  } else if (g && !g.round && g.ended && conv.last_run) {
    // How the last round ended; the replayed group_ended adds the detail.
    addEnded({ reason: g.ended }, [conv.last_run.id, ...(conv.last_run.runs || [])]);
  }
  // A message no agent has taken up yet: shown, and bound to its run.
  const q = conv.queued_turn;
  if (q && !view.users.has(q.id)) bindUser(addUser(q.message, null), q.id);
  setState(conv.state || {}, true);
  markAnswers(conv);
  if (conv.pending_approval) showApproval(conv.pending_approval);
  const status = conv.status === 'running' ? 'running'
    : conv.status === 'queued' ? 'queued'
      : conv.status === 'waiting_approval' || conv.pending_approval ? 'waiting_approval' : 'idle';
  setStatus(status, status === 'queued' ? 'waiting for an agent' : undefined);
  if (status === 'idle' && conv.last_run && conv.last_run.outcome === 'error') {
    setStatus('error', conv.last_run.error || conv.last_run.error_code);
  }
  updateWelcome();
  scrollToEnd(true);
  loadBranches();
}

function updateWelcome() {
  showWelcome(!ui.messages.querySelector('li'));
}

// ---------------------------------------------------------------- following events

async function follow() {
  const v = view;
  let url = `/conversations/${encodeURIComponent(v.id)}/events${v.lastEventId ? `?after=${encodeURIComponent(v.lastEventId)}` : ''}`;
  try {
    url = await streamURL(url); // a fresh stream token: an EventSource sends no headers
  } catch {
    // Signed out or unreachable: retried below like a refused stream.
  }
  if (v !== view) return;
  const es = new EventSource(url);
  v.es = es;
  es.onopen = () => {
    if (v !== view) return;
    v.retries = 0;
    setConnection('');
  };
  es.onmessage = (e) => {
    if (v !== view) return;
    if (e.lastEventId) v.lastEventId = e.lastEventId;
    let ev;
    try {
      ev = JSON.parse(e.data);
    } catch {
      return;
    }
    try {
      onEvent(ev);
    } catch (err) {
      console.error('event', ev, err);
    }
  };
  es.onerror = () => {
    if (v !== view || v.es !== es) return;
    // Dropped or refused (the bridge gone, 503 too many streams, 401 an
    // expired stream token): the browser's own retry would keep a fixed
    // pace and the old token, so the page retries by hand after the last
    // event, with a new token and a growing wait.
    es.close();
    const wait = retryDelay(v.retries++);
    setConnection(`reconnecting in ${wait / 1000} s…`);
    clearTimeout(v.retryTimer);
    v.retryTimer = setTimeout(() => {
      if (v === view) follow();
    }, wait);
  };
}

function setConnection(text) {
  ui.connection.textContent = text;
  ui.connection.hidden = !text;
}

function onEvent(ev) {
  // A queued run's first event of its own: an agent took it up.
  if (view.status === 'queued' && ev.type !== 'CUSTOM' && !ev.type.startsWith('RUN_')) setStatus('running');
  switch (ev.type) {
    case 'RUN_STARTED': return onRunStarted(ev);
    case 'RUN_FINISHED': return onRunFinished(ev);
    case 'RUN_ERROR': return onRunError(ev);
    case 'STATE_SNAPSHOT': return setState(ev.snapshot || {});
    case 'STATE_DELTA':
      try {
        setState(applyPatch(view.state, ev.delta));
      } catch (err) {
        console.warn('STATE_DELTA not applied:', err);
      }
      return;
    case 'STEP_STARTED':
      if (view.status === 'running') setStatus('running', ev.stepName);
      // A member's turn (also one resumed after an approval).
      if (view.group && view.status === 'running' && ev.stepName && (!view.speaker || view.speaker.speaker !== ev.stepName)) {
        showSpeaking({ speaker: ev.stepName });
      }
      return;
    case 'STEP_FINISHED':
      if (view.group && view.speaker && view.speaker.speaker === ev.stepName) showSpeaking(null);
      return;
    case 'TEXT_MESSAGE_START':
      if (view.history.has(ev.messageId)) {
        placeAfter(view.texts.get(ev.messageId));
        return;
      }
      startText(ev.messageId, ev.role, ev.name || (view.group && view.speaker ? view.speaker.speaker : ''), ev.timestamp);
      return;
    case 'TEXT_MESSAGE_CONTENT': {
      const t = view.texts.get(ev.messageId);
      if (!t || view.history.has(ev.messageId)) return;
      t.body.append(ev.delta || '');
      t.chunks++;
      t.el.dataset.chunks = String(t.chunks);
      scrollToEnd();
      return;
    }
    case 'TEXT_MESSAGE_END': {
      const t = view.texts.get(ev.messageId);
      if (t && !view.history.has(ev.messageId)) t.el.dataset.streaming = 'false';
      return;
    }
    case 'REASONING_MESSAGE_START':
      if (!view.history.has(ev.messageId)) addReasoning(ev.messageId, '', 'stream');
      return;
    case 'REASONING_MESSAGE_CONTENT': {
      const r = view.reasoning.get(ev.messageId);
      if (r && !view.history.has(ev.messageId)) r.body.append(ev.delta || '');
      return;
    }
    case 'TOOL_CALL_START':
      if (view.historyCalls.has(ev.toolCallId)) {
        placeAfter(view.tools.get(ev.toolCallId));
        return;
      }
      addToolCall(ev.toolCallId, ev.toolCallName, '', 'stream', view.group && view.speaker ? view.speaker.speaker : '');
      return;
    case 'TOOL_CALL_ARGS': {
      const card = view.tools.get(ev.toolCallId);
      if (!card || view.historyCalls.has(ev.toolCallId)) return;
      card._args += ev.delta || '';
      renderArgs(card);
      return;
    }
    case 'TOOL_CALL_END':
      return;
    case 'TOOL_CALL_RESULT':
      if (view.history.has(ev.messageId)) return;
      setToolResult(ev.toolCallId, ev.content);
      return;
    case 'CUSTOM': return onCustom(ev);
    default:
  }
}

// writtenBy says why the bridge wrote a run's start or end into the events
// (metadata.mesh): "queued" (the run starts where its turn was queued, an
// agent takes it up later), "decided" (a resume starts where its approval
// was decided), "envelope" (a run around a fact of no run, a rating).
function writtenBy(ev) {
  return (ev.metadata && ev.metadata.mesh) || '';
}

function onRunStarted(ev) {
  const why = writtenBy(ev);
  if (why === 'envelope') return;
  if (why === 'queued' && ev.metadata.regenerate && ev.runId) view.regens.add(ev.runId);
  if (!view.done.has(ev.runId)) {
    if (why === 'queued') setStatus('queued', 'waiting for an agent');
    else setStatus('running');
  }
  clearError();
  const run = ev.runId;
  view.run = run;
  if (run && view.users.has(run)) placeAfter({ el: ui.messages.querySelector(`li.msg.user[data-id="${CSS.escape(run)}"]`) });
  if (!run || view.users.has(run) || view.approvals.has(run) || view.regens.has(run)) return;
  // A new turn: the user message that started it has the run's id.
  const local = view.localUsers.shift();
  view.cursor = null;
  if (local) {
    bindUser(local, run);
    return;
  }
  // Sent by another client: read its text from the conversation. The anchor
  // keeps its place; should the read fail, the next reconcile fills it.
  const anchor = h('li', { class: 'anchor', hidden: true, dataset: { run } });
  ui.messages.append(anchor);
  const seq = view.seq;
  api('GET', `/conversations/${encodeURIComponent(view.id)}`).then((data) => {
    if (still(seq)) fillAnchors(data.conversation);
  }, () => {});
}

// fillAnchors puts the user messages of turns started elsewhere in place.
function fillAnchors(conv) {
  for (const m of (conv && conv.messages) || []) {
    if (m.role !== 'user' || view.users.has(m.id)) continue;
    const anchor = ui.messages.querySelector(`li.anchor[data-run="${CSS.escape(m.id)}"]`);
    if (anchor) anchor.replaceWith(userItem(m.content, m.id));
  }
}

function onRunFinished(ev) {
  if (writtenBy(ev) === 'envelope') return;
  const outcome = ev.outcome && ev.outcome.type;
  if (outcome === 'interrupt') setStatus('waiting_approval');
  else if (outcome === 'cancelled') setStatus('idle', 'cancelled');
  else setStatus('idle');
  hideSpeaking();
  finishOpenTexts();
  reconcileSoon();
  refreshListSoon();
}

function onRunError(ev) {
  // The stream resumes by itself (a stream token's end: with a fresh one).
  if (ev.code === 'SLOW_CONSUMER' || ev.code === 'TOKEN_EXPIRED') return;
  hideSpeaking();
  finishOpenTexts();
  if (ev.code === 'WAITING_APPROVAL') setStatus('waiting_approval');
  else setStatus('error', ev.message || ev.code);
  reconcileSoon();
  refreshListSoon();
}

function onCustom(ev) {
  const v = ev.value || {};
  switch (ev.name) {
    case 'approval_requested':
      if (v.uuid) view.approvals.add(v.uuid);
      showApproval(v);
      return;
    case 'approval_decided': {
      if (view.approval && view.approval.uuid === v.uuid) hideApproval();
      const card = view.tools.get(v.tool_call_id);
      if (card && card.dataset.status === 'pending') {
        const ok = v.status === 'approved' || (v.decision && v.decision.approved);
        card.dataset.approval = ok ? 'approved' : 'rejected';
        renderToolStatus(card);
      }
      return;
    }
    case 'run_queued':
      // The message waits for an agent; the run's first events of its own
      // follow when one takes it.
      if (v.regenerate && v.runId) view.regens.add(v.runId);
      // (Not the replay of a run applied before the read: see onRunStarted.)
      if (view.status !== 'running' && !view.done.has(v.runId)) setStatus('queued', 'waiting for an agent');
      return;
    case 'feedback':
      if (v.by === me && v.messageId) showRating(v.messageId, v.rating);
      return;
    case 'run_retried':
      // The next attempt sends its messages again under the same ids:
      // startText and addToolCall start them over.
      return;
    case 'speaker_selected':
      if (!view.group) view.group = { name: '' };
      if (view.status === 'running' && v.speaker) showSpeaking(v);
      return;
    case 'speaker_skipped':
      placeNotice(h('li', { class: 'group-event skipped', dataset: { member: v.member || '', reason: v.reason || '' } },
        h('span', { class: 'group-event-text' },
          h('strong', { text: v.member || 'a member' }), ' was skipped', v.reason ? `: ${v.reason}` : '')));
      return;
    case 'group_ended':
      hideSpeaking();
      addEnded(v, [view.run]);
      return;
    default:
  }
}

// ---------------------------------------------------------------- group chats

// showSpeaking shows who speaks now and why (v: speaker_selected's value);
// null says the group is choosing the next speaker.
function showSpeaking(v) {
  if (!view) return;
  view.speaker = v;
  const el = ui.speaking;
  if (!v) {
    el.dataset.speaker = '';
    delete el.dataset.tone;
    el.replaceChildren(h('span', { class: 'speaking-dots', 'aria-hidden': 'true' }), h('span', { class: 'speaking-text', text: 'choosing the next speaker…' }));
  } else {
    el.dataset.speaker = v.speaker;
    el.dataset.tone = tone(v.speaker);
    const why = [v.strategy && strategyLabel(v.strategy), v.reason].filter(Boolean).join(': ');
    el.replaceChildren(
      memberAvatar(v.speaker),
      h('span', { class: 'speaking-text' },
        h('strong', { text: v.speaker }), ' is speaking',
        why ? h('span', { class: 'speaking-why', text: ` · ${why}` }) : null));
  }
  el.hidden = false;
  scrollToEnd();
}

function hideSpeaking() {
  if (view) view.speaker = null;
  ui.speaking.hidden = true;
  ui.speaking.dataset.speaker = '';
  delete ui.speaking.dataset.tone;
  ui.speaking.replaceChildren();
}

// addEnded shows why a round ended (v: group_ended's value), once per
// round: keys are its runs, and a group_ended replayed for a round the
// history already ended completes that notice instead.
function addEnded(v, keys) {
  let detail = v.detail || '';
  if (!detail && v.turns) detail = `${v.turns} ${v.turns === 1 ? 'turn' : 'turns'}`;
  const text = h('span', { class: 'group-event-text', title: v.reason || '' },
    h('strong', { text: 'Group chat ended' }), `: ${endLabel(v.reason)}${detail ? ` (${detail})` : ''}.`);
  const known = keys.map((k) => view.ended.get(k)).find(Boolean);
  if (known) {
    if (detail) {
      known.replaceChildren(text);
      known.dataset.detail = detail;
    }
    view.cursor = known;
    return;
  }
  const li = h('li', { class: 'group-event ended', dataset: { reason: v.reason || '', detail } }, text);
  for (const k of keys) if (k) view.ended.set(k, li);
  placeNotice(li);
}

// placeAfter marks the element of a replayed event (t.el) as the place for
// the notices that follow it.
function placeAfter(t) {
  if (t && t.el && t.el.isConnected) view.cursor = t.el;
}

// placeNotice adds li after the last replayed element, else at the end.
function placeNotice(li) {
  if (view.cursor && view.cursor.isConnected) view.cursor.after(li);
  else ui.messages.append(li);
  view.cursor = li;
  updateWelcome();
  scrollToEnd();
}

function finishOpenTexts() {
  for (const t of view.texts.values()) if (t.el.dataset.streaming === 'true') t.el.dataset.streaming = 'false';
}

// reconcileSoon re-reads the conversation after a run: it marks notices
// (messages meant for people, which the event stream does not flag) and
// corrects the text of user messages this page guessed.
function reconcileSoon() {
  const seq = view.seq;
  clearTimeout(view.reconcileTimer);
  view.reconcileTimer = setTimeout(async () => {
    if (!still(seq)) return;
    let conv;
    try {
      conv = (await api('GET', `/conversations/${encodeURIComponent(view.id)}`)).conversation;
    } catch {
      return;
    }
    if (!still(seq)) return;
    setHeader(conv);
    fillAnchors(conv);
    loadBranches();
    for (const m of conv.messages || []) {
      if (m.role === 'assistant' && m.notice) {
        const t = view.texts.get(m.id);
        if (t) t.el.classList.add('notice');
      } else if (m.role === 'user') {
        const el = ui.messages.querySelector(`li.msg.user[data-id="${CSS.escape(m.id)}"] .bubble`);
        if (el && el.textContent !== m.content) el.textContent = m.content;
      } else if (m.role === 'tool' && m.is_error) {
        const card = view.tools.get(m.tool_call_id);
        if (card) {
          card.dataset.status = 'failed';
          renderToolStatus(card);
        }
      }
    }
    markAnswers(conv);
    // The approval box and the run status follow the events only: a read
    // that raced a newer run must not hide what that run asked for.
  }, 150);
}

// ---------------------------------------------------------------- rendering messages

function userItem(text, id, at) {
  const li = h('li', { class: 'msg user', dataset: id ? { id } : { pending: 'true' } },
    h('div', { class: 'bubble', text }), userActions());
  stamp(li, at);
  if (id) view.users.add(id);
  return li;
}

// stamp shows when a message was written (at: its created_at or event
// timestamp; now when unknown) as the bubble's small print: the time in
// data-time-label, drawn by the style sheet so that the message's text
// stays its own, the full date as its title, and data-time in ISO form.
function stamp(li, at) {
  const d = at ? new Date(at) : new Date();
  if (Number.isNaN(d.getTime()) || d.getTime() <= 0) return;
  const bubble = li.querySelector('.bubble');
  li.dataset.time = d.toISOString();
  bubble.dataset.timeLabel = d.toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' });
  bubble.title = d.toLocaleString();
}

function addUser(text, id, at) {
  const li = userItem(text, id, at);
  ui.messages.append(li);
  view.cursor = null;
  updateWelcome();
  scrollToEnd(true);
  return li;
}

function bindUser(li, id) {
  li.dataset.id = id;
  delete li.dataset.pending;
  view.users.add(id);
}

function avatar() {
  return h('div', { class: 'avatar', 'aria-hidden': 'true' }, h('img', { src: '/web/icon.svg', alt: '', width: 28, height: 28 }));
}

// memberAvatar is a group member's initial in its colour.
function memberAvatar(name) {
  return h('div', { class: 'avatar member', 'aria-hidden': 'true', dataset: { tone: tone(name) }, text: (name[0] || '?').toUpperCase() });
}

function addText(id, text, { notice = false, source = 'stream', name = '', role = 'assistant', at } = {}) {
  const body = h('div', { class: 'body' });
  body.append(text || '');
  const member = !!(name && view.group);
  const bubble = h('div', { class: 'bubble' }, name ? h('div', { class: 'author', dataset: member ? { tone: tone(name) } : {}, text: name }) : null, body);
  const li = h('li', {
    class: `msg ${role === 'user' ? 'user' : 'assistant'}${notice ? ' notice' : ''}`,
    dataset: { id, source, streaming: source === 'stream' ? 'true' : 'false', chunks: '0', author: name || null },
  }, member ? memberAvatar(name) : avatar(), bubble);
  if (role !== 'user' && !notice) bubble.append(answerActions(id));
  stamp(li, at);
  ui.messages.append(li);
  if (source === 'stream') view.cursor = null;
  const t = { el: li, body, chunks: 0 };
  view.texts.set(id, t);
  updateWelcome();
  scrollToEnd(source === 'history');
  return t;
}

function startText(id, role, name, at) {
  const t = view.texts.get(id);
  if (t) {
    // A retried attempt sends the message again: start it over.
    t.body.textContent = '';
    t.chunks = 0;
    t.el.dataset.streaming = 'true';
    return;
  }
  addText(id, '', { source: 'stream', role: role || 'assistant', name, at });
}

// addReasoning shows a model's reasoning before the answer it led to,
// collapsed: a "Reasoning" disclosure the reader opens.
function addReasoning(id, text, source) {
  let r = view.reasoning.get(id);
  if (r) {
    r.body.textContent = text; // a retried attempt starts it over
    return r;
  }
  const body = h('div', { class: 'reasoning-body', text });
  const el = h('li', { class: 'reasoning', dataset: { messageId: id, source } },
    h('details', {}, h('summary', { text: 'Reasoning' }), body));
  r = { el, body };
  view.reasoning.set(id, r);
  ui.messages.append(el);
  scrollToEnd(source === 'history');
  return r;
}

function addToolCall(id, name, args, source, author = '') {
  let card = view.tools.get(id);
  if (card) {
    // A retried attempt: start the arguments over.
    card._args = args;
    renderArgs(card);
    return card;
  }
  const summaryArgs = h('span', { class: 'tool-summary-args' });
  const status = h('span', { class: 'tool-status' });
  const argsPre = h('pre', { class: 'tool-args' });
  const resultPre = h('pre', { class: 'tool-result' });
  const resultBlock = h('div', { class: 'tool-section result-section', hidden: true },
    h('div', { class: 'tool-label', text: 'Result' }), resultPre);
  card = h('li', { class: 'tool-call', dataset: { toolCallId: id, name: name || 'tool', status: 'pending', source, author: author || null } },
    h('details', {},
      h('summary', {},
        h('span', { class: 'tool-icon', 'aria-hidden': 'true' }),
        author && view.group ? h('span', { class: 'tool-author', dataset: { tone: tone(author) }, text: author }) : null,
        h('span', { class: 'tool-name', text: name || 'tool' }),
        summaryArgs,
        status),
      h('div', { class: 'tool-body' },
        h('div', { class: 'tool-section' }, h('div', { class: 'tool-label', text: 'Arguments' }), argsPre),
        resultBlock)));
  card._args = args || '';
  card._parts = { summaryArgs, status, argsPre, resultPre, resultBlock };
  view.tools.set(id, card);
  ui.messages.append(card);
  if (source === 'stream') view.cursor = null;
  renderArgs(card);
  renderToolStatus(card);
  updateWelcome();
  scrollToEnd(source === 'history');
  return card;
}

function renderArgs(card) {
  const { summaryArgs, argsPre } = card._parts;
  let parsed;
  try {
    parsed = card._args ? JSON.parse(card._args) : {};
  } catch {
    parsed = undefined;
  }
  if (parsed === undefined) {
    argsPre.textContent = card._args;
    summaryArgs.textContent = '';
    return;
  }
  argsPre.textContent = JSON.stringify(parsed, null, 2);
  summaryArgs.textContent = compactArgs(parsed);
}

function compactArgs(args) {
  if (!args || typeof args !== 'object') return '';
  const parts = Object.entries(args).map(([k, v]) => `${k}=${typeof v === 'string' ? JSON.stringify(v) : JSON.stringify(v)}`);
  const s = parts.join(', ');
  return s.length > 60 ? `${s.slice(0, 57)}…` : s;
}

function setToolResult(toolCallId, content, isError, toolName) {
  let card = view.tools.get(toolCallId);
  if (!card) card = addToolCall(toolCallId, toolName || 'tool', '', 'history');
  const text = content || '';
  const failed = !!isError || /^(error|rejected):/i.test(text.trimStart());
  card.dataset.status = failed ? 'failed' : 'success';
  const { resultPre, resultBlock } = card._parts;
  resultPre.textContent = prettyJSON(text);
  resultBlock.hidden = false;
  renderToolStatus(card);
  scrollToEnd();
}

function prettyJSON(text) {
  try {
    const v = JSON.parse(text);
    if (v && typeof v === 'object') return JSON.stringify(v, null, 2);
  } catch {
    // not JSON: shown as it is
  }
  return text;
}

function renderToolStatus(card) {
  const s = card.dataset.status;
  let label = { pending: 'running…', success: 'done', failed: 'failed' }[s] || s;
  if (s === 'pending' && card.dataset.approval === 'pending') label = 'awaiting approval';
  if (s === 'pending' && card.dataset.approval === 'approved') label = 'approved · running…';
  if (s === 'pending' && card.dataset.approval === 'rejected') label = 'rejected';
  if (s === 'failed' && card.dataset.approval === 'rejected') label = 'rejected';
  card._parts.status.textContent = label;
}

function scrollToEnd(force = false) {
  const c = ui.chat;
  const near = c.scrollHeight - c.scrollTop - c.clientHeight < 160;
  if (force || near) requestAnimationFrame(() => { c.scrollTop = c.scrollHeight; });
}

// ---------------------------------------------------------------- state and status

function setState(state, quiet = false) {
  if (view) view.state = state;
  const keys = state && typeof state === 'object' ? Object.keys(state).length : 0;
  ui.state.textContent = JSON.stringify(state, null, 2);
  ui.stateSummary.textContent = keys === 1 ? '1 key' : `${keys} keys`;
  ui.statePanel.hidden = !view;
  if (!quiet && keys > 0) ui.statePanel.classList.add('has-state');
  else if (keys === 0) ui.statePanel.classList.remove('has-state');
}

function setStatus(status, detail) {
  if (view) view.status = status;
  const labels = { queued: 'queued', running: 'running', waiting_approval: 'waiting approval', idle: 'idle', error: 'error' };
  ui.runStatus.dataset.status = status;
  ui.runStatus.textContent = labels[status] || status;
  ui.runStatus.title = detail || '';
  if (detail && status !== 'idle') ui.runStatus.textContent += ` · ${detail}`;
  ui.cancel.hidden = !(view && (status === 'running' || status === 'queued'));
  updateComposer();
  updateRegenerate();
  // The list shows the open conversation's status as it changes.
  const item = view && ui.convList.querySelector(`.conv-item[data-id="${CSS.escape(view.id)}"]`);
  if (item) {
    const s = status === 'error' ? 'active' : status === 'idle' ? 'active' : status;
    const pill = item.querySelector('.pill');
    item.dataset.status = s;
    pill.className = `pill ${s}`;
    pill.textContent = statusLabel(s);
  }
}

function updateComposer() {
  const busy = !!(view && (view.sending || view.status === 'running' || view.status === 'queued'));
  const waiting = !!(view && view.status === 'waiting_approval');
  ui.send.disabled = busy || waiting;
  ui.input.setAttribute('aria-busy', busy ? 'true' : 'false');
  ui.hint.textContent = waiting ? 'Approve or reject the pending action to go on.'
    : busy && view.status === 'queued' ? 'The message waits for an agent to take it up…'
      : busy ? `The ${view.group ? 'group' : 'agent'} is working…` : 'Enter to send · Shift+Enter for a new line';
  ui.hint.classList.toggle('default', !waiting && !busy);
}

// ---------------------------------------------------------------- user actions

function setMe(name) {
  me = name || 'anonymous';
}

// answerActions are an answer's buttons: like, dislike, Copy, and
// Regenerate (shown on the last answer only, by updateRegenerate).
function answerActions(id) {
  const rate = (rating) => h('button', {
    type: 'button', class: `feedback ${rating}`, title: rating === 'like' ? 'Good answer' : 'Bad answer',
    'aria-pressed': 'false', dataset: { rating },
    onclick: () => giveFeedback(id, rating),
  }, rating === 'like' ? '▲ Like' : '▼ Dislike');
  return h('div', { class: 'msg-actions' },
    rate('like'), rate('dislike'),
    h('button', { type: 'button', class: 'copy', title: 'Copy the answer', onclick: (e) => copyAnswer(id, e.currentTarget), text: '⧉ Copy' }),
    h('button', { type: 'button', class: 'regenerate', hidden: true, title: 'Answer the last message again', onclick: regenerate, text: '↻ Regenerate' }));
}

// copyAnswer puts the text of answer id on the clipboard; the button says
// whether it could (the clipboard needs a secure context: https or
// localhost).
async function copyAnswer(id, button) {
  const t = view && view.texts.get(id);
  if (!t) return;
  try {
    await navigator.clipboard.writeText(t.body.textContent);
    button.dataset.copied = 'true';
    button.textContent = '✓ Copied';
  } catch (err) {
    button.dataset.copied = 'false';
    showError(`Could not copy the answer: ${describeError(err)}`);
  }
}

// showRating shows the caller's rating of message id.
function showRating(id, rating) {
  const t = view && view.texts.get(id);
  if (!t) return;
  for (const b of t.el.querySelectorAll('button.feedback')) b.setAttribute('aria-pressed', String(b.dataset.rating === rating));
  t.el.dataset.rating = rating;
}

async function giveFeedback(id, rating) {
  if (!view) return;
  const v = view;
  clearError();
  try {
    const out = await api('POST', `/conversations/${encodeURIComponent(v.id)}/messages/${encodeURIComponent(id)}/feedback`, { rating });
    if (v === view) showRating(id, out.feedback.rating);
  } catch (err) {
    if (v === view) showError(`Could not record the feedback: ${describeError(err)}`);
  }
}

// lastAnswer is the element of the last answer shown: the last assistant
// text after the last user message, not superseded.
function lastAnswer() {
  const items = [...ui.messages.querySelectorAll('li.msg')];
  let last = null;
  for (const li of items) {
    if (li.classList.contains('user')) last = null;
    else if (!li.classList.contains('notice') && !li.classList.contains('superseded')) last = li;
  }
  return last;
}

// updateRegenerate shows Regenerate on the last answer while nothing runs
// (never in a group chat: its rounds are not regenerated).
function updateRegenerate() {
  for (const b of ui.messages.querySelectorAll('button.regenerate')) b.hidden = true;
  if (!view || view.group || view.status === 'running' || view.status === 'queued' || view.status === 'waiting_approval') return;
  const li = lastAnswer();
  const b = li && li.querySelector('button.regenerate');
  if (b) b.hidden = false;
}

async function regenerate() {
  if (!view || view.sending) return;
  const v = view;
  clearError();
  v.sending = true;
  // The answer after the last user message is superseded: dimmed at once,
  // as the next read of the conversation will say.
  const items = [...ui.messages.children];
  const u = items.map((li) => li.classList.contains('user')).lastIndexOf(true);
  const old = items.slice(u + 1).filter((li) => li.matches('li.msg, li.tool-call'));
  for (const li of old) li.classList.add('superseded');
  setStatus('queued', 'regenerating');
  try {
    await api('POST', `/conversations/${encodeURIComponent(v.id)}/regenerate`, {});
  } catch (err) {
    if (v !== view) return;
    for (const li of old) li.classList.remove('superseded');
    if (err.code === 'waiting_approval') setStatus('waiting_approval');
    else setStatus('idle');
    showError(`Could not regenerate: ${describeError(err)}`);
  } finally {
    v.sending = false;
    if (v === view) {
      updateComposer();
      updateRegenerate();
    }
  }
}

// markAnswers applies what a read of the conversation says of its answers:
// the superseded ones dimmed, the caller's ratings pressed.
function markAnswers(conv) {
  const sup = conv.superseded || {};
  for (const m of conv.messages || []) {
    if (!sup[m.id]) continue;
    const els = [];
    const t = view.texts.get(m.id);
    if (t) els.push(t.el);
    for (const c of m.tool_calls || []) els.push(view.tools.get(c.id));
    if (m.role === 'tool') els.push(view.tools.get(m.tool_call_id));
    for (const el of els) {
      if (!el) continue;
      el.classList.add('superseded');
      el.title = 'Replaced by a regenerated answer';
    }
  }
  for (const [id, list] of Object.entries(conv.feedback || {})) {
    const mine = (list || []).find((f) => f.by === me);
    if (mine) showRating(id, mine.rating);
  }
  updateRegenerate();
}

// ---------------------------------------------------------------- branches

// userActions are a user message's buttons: Edit, and the arrows to the
// other branches where the conversation parts at this message (filled by
// markBranches). Their words are drawn by the style sheet (data-label), so
// that the message's text stays its own; screen readers get aria-labels.
function userActions() {
  return h('div', { class: 'msg-actions user-actions' },
    h('div', { class: 'branch-nav', role: 'group', hidden: true }),
    h('button', {
      type: 'button', class: 'edit', 'aria-label': 'Edit this message', title: 'Edit this message and send it on a new branch; this one stays',
      dataset: { label: '✎ Edit' },
      onclick: (e) => startEdit(e.currentTarget.closest('li.msg.user')),
    }));
}

// startEdit opens the editor of user message li in its place.
function startEdit(li) {
  if (!view || !li || !li.dataset.id || view.forking) return;
  cancelEdit();
  const input = h('textarea', { class: 'edit-input', rows: 1, 'aria-label': 'The message, edited', enterkeyhint: 'send' });
  input.value = li.querySelector('.bubble').textContent;
  const send = h('button', { type: 'submit', class: 'btn small primary send-edit', text: 'Send' });
  const cancel = h('button', { type: 'button', class: 'btn small ghost cancel-edit', text: 'Cancel', onclick: () => cancelEdit(true) });
  const form = h('form', { class: 'editor', 'aria-label': 'Edit the message' }, input,
    h('div', { class: 'editor-actions' },
      h('span', { class: 'muted small', text: 'Sending starts a new branch; this one stays.' }), cancel, send));
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    submitEdit(li, input.value);
  });
  input.addEventListener('keydown', (e) => {
    if (e.key === 'Escape') {
      e.preventDefault();
      e.stopPropagation();
      cancelEdit(true);
    } else if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      form.requestSubmit();
    }
  });
  const grow = () => {
    input.style.height = 'auto';
    input.style.height = `${Math.min(input.scrollHeight, 240)}px`;
  };
  input.addEventListener('input', grow);
  li.classList.add('editing');
  li.append(form);
  view.editing = { li, form, input, send, cancel };
  grow();
  input.focus();
  input.setSelectionRange(input.value.length, input.value.length);
}

// cancelEdit closes the editor, if one is open; refocus puts the focus
// back on the message's Edit button.
function cancelEdit(refocus = false) {
  const ed = view && view.editing;
  if (!ed) return;
  view.editing = null;
  ed.form.remove();
  ed.li.classList.remove('editing');
  if (refocus) ed.li.querySelector('button.edit').focus();
}

// submitEdit forks the conversation before user message li and sends text
// on the branch, which the page opens.
async function submitEdit(li, text) {
  text = text.trim();
  const v = view;
  if (!v || !text || v.forking) return;
  const ed = v.editing;
  v.forking = true;
  if (ed) ed.send.disabled = ed.cancel.disabled = ed.input.disabled = true;
  clearError();
  let branch;
  try {
    branch = await api('POST', `/conversations/${encodeURIComponent(v.id)}/fork`, { before: li.dataset.id });
  } catch (err) {
    if (v === view) showError(`Could not edit the message: ${describeError(err)}`);
    return;
  } finally {
    v.forking = false;
    if (ed) ed.send.disabled = ed.cancel.disabled = ed.input.disabled = false;
  }
  if (v !== view) return;
  cancelEdit();
  const id = branch.id || branch.conversation_id;
  go(id);
  await waitOpen(id);
  if (!view || view.id !== id) return;
  refreshListSoon();
  await send(text);
  loadBranches();
}

// loadBranches reads the open conversation's family and shows it.
async function loadBranches() {
  const v = view;
  if (!v) return;
  let data;
  try {
    data = await api('GET', `/conversations/${encodeURIComponent(v.id)}/branches`);
  } catch {
    return; // the branches stay as they were shown; the conversation itself is what matters
  }
  if (v !== view) return;
  v.family = family(data);
  markBranches();
}

// pendingFocus is the branch arrow a person used to switch, so that the
// same arrow has the focus on the branch it opened.
let pendingFocus = null;

// markBranches shows, on every user message where the conversation parts
// from others of its family, which of them this is and arrows to the
// others; and the family in the header.
function markBranches() {
  showBranches();
  if (!view || !view.family || !view.conv) return;
  const fam = view.family;
  const msgs = view.conv.messages || [];
  const more = !!view.conv.messages_before;
  for (const li of ui.messages.querySelectorAll('li.msg.user[data-id]')) {
    const nav = li.querySelector('.branch-nav');
    if (!nav) continue;
    let point = pointBefore(msgs, li.dataset.id);
    if (point === '' && more) point = null; // the first of a page, not of the conversation
    const sibs = point == null ? [] : siblingsAt(fam, point);
    const at = sibs.length > 1 ? placeOf(fam, sibs, view.id) : -1;
    if (at < 0) {
      nav.hidden = true;
      nav.replaceChildren();
      delete nav.dataset.key;
      delete li.dataset.branch;
      continue;
    }
    li.dataset.branch = `${at + 1}/${sibs.length}`;
    // Drawn again only when it changed: a redraw would drop the focus of
    // a person on its arrows.
    const key = `${point}|${at}|${sibs.map((b) => b.id).join(',')}`;
    if (nav.dataset.key === key && !pendingFocus) continue;
    const focused = nav.contains(document.activeElement) ? document.activeElement.className : '';
    nav.dataset.key = key;
    nav.setAttribute('aria-label', `Branch ${at + 1} of ${sibs.length} at this message`);
    const arrow = (dir) => {
      const to = sibs[at + dir];
      return h('button', {
        type: 'button', class: dir < 0 ? 'branch-prev' : 'branch-next',
        'aria-label': dir < 0 ? 'Previous branch' : 'Next branch',
        title: to ? `${dir < 0 ? 'Previous' : 'Next'} branch: ${to.title || 'untitled'}` : '',
        disabled: !to, dataset: { label: dir < 0 ? '‹' : '›' },
        onclick: () => {
          pendingFocus = { point, dir };
          go(to.id);
        },
      });
    };
    nav.replaceChildren(arrow(-1), h('span', { class: 'branch-at', 'aria-hidden': 'true', dataset: { label: `${at + 1} / ${sibs.length}` } }), arrow(1));
    nav.hidden = false;
    if (focused) {
      const b = nav.querySelector(`button.${focused}`);
      if (b && !b.disabled) b.focus();
    }
    if (pendingFocus && pendingFocus.point === point) {
      const b = nav.querySelector(pendingFocus.dir < 0 ? '.branch-prev' : '.branch-next');
      (b && !b.disabled ? b : nav.querySelector('button:not(:disabled)') || li.querySelector('button.edit')).focus();
      pendingFocus = null;
    }
  }
}

// showBranches lists the open conversation's family in the header:
// "branch 2 of 3", and every branch to switch to.
function showBranches() {
  const fam = view && view.family;
  if (!fam || fam.list.length < 2) {
    ui.branches.hidden = true;
    ui.branches.open = false;
    ui.branchesList.replaceChildren();
    return;
  }
  const at = fam.list.findIndex((b) => b.id === view.id);
  ui.branchesSummary.textContent = at >= 0 ? `branch ${at + 1} of ${fam.list.length}` : `${fam.list.length} branches`;
  ui.branchesList.replaceChildren(...fam.list.map((b, i) => {
    const here = b.id === view.id;
    return h('li', {}, h('button', {
      type: 'button', class: 'branch-item', 'aria-current': here ? 'page' : null, dataset: { id: b.id },
      onclick: () => {
        ui.branches.open = false;
        if (!here) go(b.id);
      },
    },
    h('span', { class: 'branch-title', text: `${i + 1}. ${b.title || 'New conversation'}` }),
    h('span', { class: 'muted small', text: `${b.forked_from ? 'edited' : 'original'} · ${b.message_count || 0} messages · ${ago(b.updated_at || b.created_at)}` })));
  }));
  ui.branches.hidden = false;
}

// ---------------------------------------------------------------- approval

function showApproval(ap) {
  if (!view || !ap || !ap.uuid) return;
  view.approval = ap;
  ui.approval.dataset.uuid = ap.uuid;
  const who = view.group && (ap.agent || (view.speaker && view.speaker.speaker));
  ui.approvalDesc.replaceChildren(
    who ? h('strong', { text: who }) : 'The agent',
    ' wants to run ',
    h('strong', { text: ap.tool_name || 'a tool' }),
    ap.server ? ` on ${ap.server}` : '',
    '.');
  ui.approvalArgs.textContent = JSON.stringify(ap.tool_args || {}, null, 2);
  ui.approve.disabled = false;
  ui.reject.disabled = false;
  ui.approval.hidden = false;
  const card = view.tools.get(ap.tool_call_id);
  if (card && card.dataset.status === 'pending') {
    card.dataset.approval = 'pending';
    renderToolStatus(card);
  }
  scrollToEnd();
}

function hideApproval() {
  if (view) view.approval = null;
  ui.approval.hidden = true;
  delete ui.approval.dataset.uuid;
}

async function decide(approved) {
  if (!view || !view.approval || view.deciding) return;
  const ap = view.approval;
  const seq = view.seq;
  view.deciding = true;
  ui.approve.disabled = true;
  ui.reject.disabled = true;
  clearError();
  try {
    // Answers once the resumed turn ends; the events show its progress.
    // The hash of the arguments shown lets the approver refuse an approval
    // whose arguments changed since.
    const body = { approved, by: 'web' };
    const shown = await argsHash(ap.tool_args || {});
    if (shown) body.args_hash = shown;
    await api('POST', `/approvals/${encodeURIComponent(ap.uuid)}`, body);
    if (still(seq) && view.approval && view.approval.uuid === ap.uuid) hideApproval();
  } catch (err) {
    if (!still(seq)) return;
    if (err.code === 'approval_decided' || err.status === 404) {
      if (view.approval && view.approval.uuid === ap.uuid) hideApproval();
    } else {
      ui.approve.disabled = false;
      ui.reject.disabled = false;
    }
    showError(describeError(err));
  } finally {
    if (still(seq)) view.deciding = false;
  }
}

// ---------------------------------------------------------------- sending

// newConversation creates a conversation with the agent, or a chat of the
// group chosen next to "New conversation".
async function newConversation() {
  const group = target();
  const agent = targetAgent();
  const conv = (await api('POST', '/conversations', group ? { group } : agent ? { agent } : undefined)).conversation;
  // Listed at once, in the list's shape; the next refresh confirms it.
  if (!ui.convList.querySelector(`.conv-item[data-id="${CSS.escape(conv.id)}"]`)) {
    ui.convList.prepend(convItem({ ...conv, title: '', group: conv.group ? conv.group.name : '' }));
    ui.convEmpty.hidden = true;
  }
  return conv.id;
}

async function send(text) {
  text = text.trim();
  if (!text) return;
  clearError();
  if (!view) {
    let id;
    ui.send.disabled = true;
    try {
      id = await newConversation();
    } catch (err) {
      ui.send.disabled = false;
      showError(`Could not start a conversation: ${describeError(err)}`);
      return;
    }
    go(id);
    await waitOpen(id);
    if (!view || view.id !== id) return;
    refreshListSoon();
  }
  const v = view;
  // The button is disabled while a turn runs or waits; the bridge has the
  // last word (409) should this page be behind.
  if (v.sending) return;
  const li = addUser(text, null);
  v.localUsers.push(li);
  if (v.users.size === 0 && v.localUsers.length === 1) setTitle(text);
  v.sending = true;
  ui.input.value = '';
  autosize();
  updateComposer();
  try {
    await api('POST', `/conversations/${encodeURIComponent(v.id)}/messages`, { message: text });
  } catch (err) {
    if (v !== view) return;
    const i = v.localUsers.indexOf(li);
    if (i >= 0) {
      v.localUsers.splice(i, 1);
      li.remove();
      updateWelcome();
      if (!ui.input.value) {
        ui.input.value = text;
        autosize();
      }
    }
    if (err.body && err.body.approval) showApproval(err.body.approval);
    if (err.code === 'waiting_approval') setStatus('waiting_approval');
    showError(describeError(err));
  } finally {
    v.sending = false;
    if (v === view) {
      updateComposer();
      refreshListSoon();
    }
  }
}

// waitOpen resolves once the conversation id is open (its history loaded).
function waitOpen(id) {
  return new Promise((resolve) => {
    const t0 = Date.now();
    const check = () => {
      if ((view && view.id === id && view.es) || Date.now() - t0 > 10000) resolve();
      else setTimeout(check, 20);
    };
    check();
  });
}

function autosize() {
  ui.input.style.height = 'auto';
  ui.input.style.height = `${Math.min(ui.input.scrollHeight, 200)}px`;
}

// ---------------------------------------------------------------- sidebar (narrow screens)

function openSidebar() {
  ui.app.classList.add('sidebar-open');
  ui.scrim.hidden = false;
  ui.menu.setAttribute('aria-expanded', 'true');
  ui.newConv.focus();
}

function closeSidebar() {
  if (!ui.app.classList.contains('sidebar-open')) return;
  ui.app.classList.remove('sidebar-open');
  ui.scrim.hidden = true;
  ui.menu.setAttribute('aria-expanded', 'false');
}

// ---------------------------------------------------------------- wiring

ui.composer.addEventListener('submit', (e) => {
  e.preventDefault();
  if (!ui.send.disabled) send(ui.input.value);
});
ui.input.addEventListener('keydown', (e) => {
  if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) {
    e.preventDefault();
    if (!ui.send.disabled) send(ui.input.value);
  }
});
ui.input.addEventListener('input', autosize);
ui.targetSelect.addEventListener('change', onTargetChange);
ui.newConv.addEventListener('click', async () => {
  ui.newConv.disabled = true;
  clearError();
  try {
    const id = await newConversation();
    closeSidebar();
    go(id);
    refreshListSoon();
  } catch (err) {
    showError(`Could not start a conversation: ${describeError(err)}`);
  } finally {
    ui.newConv.disabled = false;
  }
});
ui.suggestions.addEventListener('click', (e) => {
  const chip = e.target.closest('.chip');
  if (!chip) return;
  ui.input.value = chip.textContent;
  autosize();
  ui.input.focus();
});
ui.approve.addEventListener('click', () => decide(true));
ui.reject.addEventListener('click', () => decide(false));
ui.cancel.addEventListener('click', async () => {
  if (!view) return;
  try {
    await api('POST', `/conversations/${encodeURIComponent(view.id)}/cancel`);
  } catch (err) {
    showError(describeError(err));
  }
});
ui.errorClose.addEventListener('click', clearError);
ui.menu.addEventListener('click', openSidebar);
ui.sidebarClose.addEventListener('click', closeSidebar);
ui.scrim.addEventListener('click', closeSidebar);
ui.brand.addEventListener('click', (e) => {
  e.preventDefault();
  closeSidebar();
  history.pushState(null, '', location.pathname);
  route();
});
document.addEventListener('keydown', (e) => {
  if (e.key !== 'Escape') return;
  closeSidebar();
  if (ui.branches.open) {
    ui.branches.open = false;
    ui.branchesSummary.focus();
  }
});
window.addEventListener('hashchange', route);
ui.opsMenu.addEventListener('click', openSidebar);

// route shows what the address names: #/approvals or #/mesh (the
// operations views), else a conversation by its id, or none.
function route() {
  const hash = location.hash.slice(1);
  if (hash.startsWith('/')) {
    close();
    markActive();
    ui.main.hidden = true;
    ops.show(hash.slice(1));
    return;
  }
  ops.hide();
  ui.main.hidden = false;
  open(hash);
}

// ---------------------------------------------------------------- sign in

// The bridge says whether it wants a token: GET /auth/me answers 401 when
// authentication is on and the page has no good token.
let started = false;
let groupsLoaded = Promise.resolve();

function showSignIn(message) {
  ui.signin.hidden = false;
  ui.app.setAttribute('aria-hidden', 'true');
  ui.signinError.textContent = message || '';
  ui.signinError.hidden = !message;
  ui.signinToken.value = '';
  ui.signinToken.focus();
}

onAuthRequired(() => {
  if (view && view.es) view.es.close();
  ops.stop();
  stopList();
  showSignIn(hasToken() ? 'Your token was not accepted (expired or revoked). Sign in again.' : '');
});

async function boot() {
  let who;
  try {
    who = await api('GET', '/auth/me');
  } catch (err) {
    if (err.status === 401) return; // the sign-in prompt is up
    showError(describeError(err));
    return;
  }
  ui.signin.hidden = true;
  ui.app.removeAttribute('aria-hidden');
  ui.who.hidden = !who.auth;
  ui.whoName.textContent = who.auth && who.principal ? `Signed in as ${who.principal.name}` : '';
  setMe(who.principal ? who.principal.name : '');
  ops.setAccess(who.may || {});
  if (started) {
    watchList();
    route();
    return;
  }
  started = true;
  watchList();
  groupsLoaded = loadGroups();
  setInterval(refreshAgents, 5000);
  route();
  updateComposer();
  // Keep the "… ago" times fresh.
  setInterval(() => {
    if (!document.hidden && ui.signin.hidden) loadList();
  }, 60000);
}

ui.signinForm.addEventListener('submit', (e) => {
  e.preventDefault();
  const t = ui.signinToken.value.trim();
  if (!t) return;
  setToken(t);
  ui.signinError.hidden = true;
  boot();
});
ui.signout.addEventListener('click', () => {
  setToken('');
  if (view && view.es) view.es.close();
  ops.stop();
  stopList();
  showSignIn('');
});

boot();
