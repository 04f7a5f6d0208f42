// The mesh's hash of a call's arguments (mesh.ArgsHash), which a decision
// sends so that the approver refuses one whose arguments changed since they
// were shown.

// argsHash is "sha256:" and the hex SHA-256 of the arguments' canonical JSON
// (mesh.CanonicalJSON: no whitespace, object keys sorted by code point,
// numbers as JSON.stringify writes them, U+2028 and U+2029 escaped). Null
// where the browser has no WebCrypto (a page not served from a secure
// context): the decision then goes without it.
export async function argsHash(args) {
  if (!(window.crypto && crypto.subtle)) return null;
  const digest = await crypto.subtle.digest('SHA-256', new TextEncoder().encode(canonicalJSON(args)));
  return 'sha256:' + Array.from(new Uint8Array(digest), (b) => b.toString(16).padStart(2, '0')).join('');
}

export function canonicalJSON(v) {
  if (Array.isArray(v)) return '[' + v.map(canonicalJSON).join(',') + ']';
  if (v && typeof v === 'object') {
    return '{' + Object.keys(v).sort(byCodePoint).map((k) => jsonString(k) + ':' + canonicalJSON(v[k])).join(',') + '}';
  }
  if (typeof v === 'string') return jsonString(v);
  if (Object.is(v, -0)) return '-0';
  return JSON.stringify(v);
}

function jsonString(s) {
  return JSON.stringify(s).replace(/\u2028/g, '\\u2028').replace(/\u2029/g, '\\u2029');
}

function byCodePoint(a, b) {
  const x = Array.from(a, (c) => c.codePointAt(0));
  const y = Array.from(b, (c) => c.codePointAt(0));
  for (let i = 0; i < Math.min(x.length, y.length); i++) {
    if (x[i] !== y[i]) return x[i] - y[i];
  }
  return x.length - y.length;
}
