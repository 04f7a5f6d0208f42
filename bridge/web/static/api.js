// The bridge's REST API as the page uses it: JSON in and out, errors as
// ApiError with the bridge's {"error", "code"} body. When the bridge has
// authentication on, every request carries the token the person signed in
// with (kept in sessionStorage: gone with the tab), and a 401 calls the
// handler given to onAuthRequired, which asks for a token again.

const TOKEN_KEY = 'agentmesh.token';
let token = sessionStorage.getItem(TOKEN_KEY) || '';
let authRequired = () => {};

// setToken keeps the bearer token for this tab; '' forgets it.
export function setToken(t) {
  token = t;
  if (t) sessionStorage.setItem(TOKEN_KEY, t);
  else sessionStorage.removeItem(TOKEN_KEY);
}

export function hasToken() {
  return token !== '';
}

// onAuthRequired sets what a 401 answer does.
export function onAuthRequired(fn) {
  authRequired = fn;
}

export class ApiError extends Error {
  constructor(status, body) {
    super((body && body.error) || `HTTP ${status}`);
    this.status = status;
    this.code = body && body.code;
    this.body = body;
  }
}

export async function api(method, path, body) {
  const init = { method, headers: { Accept: 'application/json' } };
  if (token) init.headers.Authorization = `Bearer ${token}`;
  if (body !== undefined) {
    init.headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  let res;
  try {
    res = await fetch(path, init);
  } catch (err) {
    throw new ApiError(0, { error: `the mesh cannot be reached (${err.message})`, code: 'network' });
  }
  let data = null;
  try {
    data = await res.json();
  } catch {
    data = null;
  }
  if (res.status === 401) authRequired(data);
  if (!res.ok) throw new ApiError(res.status, data);
  return data;
}

// streamURL is path with a fresh stream token (valid about a minute, for
// opening the stream) when the page has a token: an EventSource cannot send
// headers, so it carries the token in its URL.
export async function streamURL(path) {
  if (!token) return path;
  const st = await api('POST', '/auth/stream-token');
  return `${path}${path.includes('?') ? '&' : '?'}${st.param}=${encodeURIComponent(st.token)}`;
}

// follow opens an EventSource on path, with a fresh stream token, and hands
// each event's JSON to onData; onState hears 'open' and 'reconnecting'. A
// stream refused (an expired stream token, 503) or ended (the bridge ends
// one when its token expires) opens again after 2 s with a new token: the
// browser's own retry would send the old one. close() ends it for good.
export function follow(path, onData, onState = () => {}) {
  let es = null;
  let retry = 0;
  let closed = false;
  async function open() {
    let url = path;
    try {
      url = await streamURL(path);
    } catch {
      // Unreachable or signed out: retried below like a refused stream.
    }
    if (closed) return;
    const source = new EventSource(url);
    es = source;
    source.onopen = () => onState('open');
    source.onmessage = (e) => {
      if (es !== source) return;
      let data;
      try {
        data = JSON.parse(e.data);
      } catch {
        return;
      }
      try {
        onData(data);
      } catch (err) {
        console.error('stream event', path, data, err);
      }
    };
    source.onerror = () => {
      if (es !== source) return;
      onState('reconnecting');
      source.close();
      clearTimeout(retry);
      retry = setTimeout(() => {
        if (!closed && es === source) open();
      }, 2000);
    };
  }
  open();
  return {
    close() {
      closed = true;
      clearTimeout(retry);
      if (es) es.close();
      es = null;
    },
  };
}

// describeError says what went wrong in words for people.
export function describeError(err) {
  if (!(err instanceof ApiError)) return String(err && err.message ? err.message : err);
  switch (err.code) {
    case 'turn_in_progress':
      return 'The agent is still working on this conversation. Wait for it to finish, then send again.';
    case 'waiting_approval':
      return 'This conversation is waiting for an approval: approve or reject it before sending a message.';
    case 'approval_decided':
      return 'This approval was already decided.';
    case 'unauthorized':
      return 'Sign in again: the bridge did not accept your token.';
    case 'forbidden':
      return `Your roles do not allow this: ${err.message}`;
  }
  if (err.status === 409) return `Conflict: ${err.message}`;
  if (err.status === 0) return err.message;
  return `${err.message}${err.code ? ` (${err.code})` : ''}`;
}
