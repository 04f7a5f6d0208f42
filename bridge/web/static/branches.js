// A conversation's branches as the chat page shows them.
//
// Editing a user message forks the conversation before it
// (POST /conversations/{id}/fork {"before", "message"}): the branch is a
// conversation of its own, with its own id, whose history is the
// original's up to that point. GET /conversations/{id}/branches lists the
// family: the first conversation, then every branch the caller may read,
// each with forked_from {conversation, message} (message: the id of the
// last message the branch kept, '' for none).
//
// Two branches that kept the same last message hold the same history up
// to it and diverge right after: they are the alternatives at that point,
// together with the conversation they were forked from (whose own next
// message is the one that was edited). That is what siblingsAt computes,
// so that the page can show "2 of 3" with arrows on the message where
// the alternatives part.

// family indexes a GET /conversations/{id}/branches answer.
export function family(data) {
  const list = (data && data.branches) || [];
  return { root: (data && data.root) || '', list, byId: new Map(list.map((b) => [b.id, b])) };
}

// siblingsAt lists the conversations of fam that diverge right after the
// message point (its id; '' before the first message), in the order they
// were made: the one the others were forked from first. It is empty when
// there is no alternative there.
export function siblingsAt(fam, point) {
  const forks = fam.list.filter((b) => b.forked_from && (b.forked_from.message || '') === point);
  if (forks.length === 0) return [];
  // The origin: what the forks were forked from, followed up while that
  // was itself forked at the same point (an edit of an edit).
  const parentOf = (b) => fam.byId.get(b.forked_from.conversation);
  const origins = [];
  for (const f of forks) {
    let o = parentOf(f);
    for (let hops = 0; o && o.forked_from && (o.forked_from.message || '') === point && hops < fam.list.length; hops++) o = parentOf(o);
    if (o && !origins.includes(o)) origins.push(o);
  }
  const byTime = (a, b) => String(a.created_at || '').localeCompare(String(b.created_at || ''));
  return [...origins.sort(byTime), ...forks.filter((f) => !origins.includes(f)).sort(byTime)];
}

// placeOf is which of siblings conversation id stands for at their point:
// the sibling itself, or the one id descends from (a branch forked later
// holds its parent's message there).
export function placeOf(fam, siblings, id) {
  let cur = fam.byId.get(id);
  for (let hops = 0; cur && hops <= fam.list.length; hops++) {
    const i = siblings.indexOf(cur);
    if (i >= 0) return i;
    cur = cur.forked_from ? fam.byId.get(cur.forked_from.conversation) : null;
  }
  return -1;
}

// pointBefore is the id of the message before message id in messages (a
// conversation's history), '' when it is the first; null when id is not
// among them.
export function pointBefore(messages, id) {
  const i = (messages || []).findIndex((m) => m.id === id);
  if (i < 0) return null;
  return i === 0 ? '' : messages[i - 1].id;
}
