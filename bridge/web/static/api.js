// The bridge's REST API as the page uses it: JSON in and out, errors as
// ApiError with the bridge's {"error", "code"} body.

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
  if (!res.ok) throw new ApiError(res.status, data);
  return data;
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
  }
  if (err.status === 409) return `Conflict: ${err.message}`;
  if (err.status === 0) return err.message;
  return `${err.message}${err.code ? ` (${err.code})` : ''}`;
}
