// JSON Patch (RFC 6902), as STATE_DELTA events carry it.

// applyPatch applies an RFC 6902 JSON Patch to a copy of doc.
export function applyPatch(doc, ops) {
  let root = structuredClone(doc === undefined ? {} : doc);
  for (const op of ops || []) {
    const path = pointer(op.path);
    switch (op.op) {
      case 'add': root = patchAdd(root, path, structuredClone(op.value)); break;
      case 'remove': root = patchRemove(root, path); break;
      case 'replace': root = patchReplace(root, path, structuredClone(op.value)); break;
      case 'move': {
        const from = pointer(op.from);
        const v = patchGet(root, from);
        root = patchAdd(patchRemove(root, from), path, v);
        break;
      }
      case 'copy': root = patchAdd(root, path, structuredClone(patchGet(root, pointer(op.from)))); break;
      case 'test':
        if (JSON.stringify(patchGet(root, path)) !== JSON.stringify(op.value)) throw new Error(`test failed at ${op.path}`);
        break;
      default: throw new Error(`unknown patch op ${op.op}`);
    }
  }
  return root;
}

function pointer(p) {
  if (p === '' || p == null) return [];
  if (p[0] !== '/') throw new Error(`bad JSON pointer ${p}`);
  return p.slice(1).split('/').map((t) => t.replace(/~1/g, '/').replace(/~0/g, '~'));
}

function patchGet(root, path) {
  let cur = root;
  for (const t of path) {
    if (cur == null || typeof cur !== 'object' || !(t in cur)) throw new Error(`no value at /${path.join('/')}`);
    cur = cur[t];
  }
  return cur;
}

function patchParent(root, path) {
  const parent = patchGet(root, path.slice(0, -1));
  if (parent == null || typeof parent !== 'object') throw new Error(`no container at /${path.join('/')}`);
  return [parent, path[path.length - 1]];
}

function arrayIndex(arr, key, forAdd) {
  if (forAdd && key === '-') return arr.length;
  const i = Number(key);
  if (!/^(0|[1-9][0-9]*)$/.test(key) || i > arr.length || (!forAdd && i === arr.length)) throw new Error(`bad array index ${key}`);
  return i;
}

function patchAdd(root, path, value) {
  if (path.length === 0) return value;
  const [parent, key] = patchParent(root, path);
  if (Array.isArray(parent)) parent.splice(arrayIndex(parent, key, true), 0, value);
  else parent[key] = value;
  return root;
}

function patchRemove(root, path) {
  if (path.length === 0) return undefined;
  const [parent, key] = patchParent(root, path);
  if (Array.isArray(parent)) parent.splice(arrayIndex(parent, key, false), 1);
  else if (key in parent) delete parent[key];
  else throw new Error(`no value at /${path.join('/')}`);
  return root;
}

function patchReplace(root, path, value) {
  if (path.length === 0) return value;
  const [parent, key] = patchParent(root, path);
  if (Array.isArray(parent)) parent[arrayIndex(parent, key, false)] = value;
  else if (key in parent) parent[key] = value;
  else throw new Error(`no value at /${path.join('/')}`);
  return root;
}
