// agui-events.mjs reads GET /conversations/{id}/events the way an AG-UI
// client reconnects to a thread: an AbstractAgent of @ag-ui/client whose
// connect() is that stream, run by connectAgent, which applies the client's
// own verifyEvents and builds its messages from the events. Each event is
// also parsed with @ag-ui/core's EventSchemas. The stream is left once it
// has been quiet for QUIET_MS (it never ends by itself).
//
// Environment: MESH_URL, CONVERSATION, QUIET_MS (default 1500), AFTER (a
// Last-Event-ID to start after, optional).
//
// Prints one JSON object: {types, runs: [{runId, mesh, outcome}],
// messages: [{id, role, toolCallIds, toolCallId}], verifyError,
// schemaErrors}.

import { AbstractAgent, runHttpRequest, transformHttpEventStream } from '@ag-ui/client';
import { EventSchemas } from '@ag-ui/core/schemas';
import { EMPTY, tap, timeout } from 'rxjs';

const base = process.env.MESH_URL;
const conv = process.env.CONVERSATION;
if (!base || !conv) {
  console.error('MESH_URL and CONVERSATION are required');
  process.exit(2);
}
const quiet = Number(process.env.QUIET_MS || 1500);

const types = [];
const runs = [];
const schemaErrors = [];
const stop = new AbortController();

class EventsAgent extends AbstractAgent {
  connect() {
    const headers = { Accept: 'text/event-stream' };
    if (process.env.AFTER) headers['Last-Event-ID'] = process.env.AFTER;
    const url = `${base}/conversations/${encodeURIComponent(conv)}/events`;
    return transformHttpEventStream(runHttpRequest(() => fetch(url, { headers, signal: stop.signal }))).pipe(
      tap((ev) => {
        const parsed = EventSchemas.safeParse(ev);
        if (!parsed.success) schemaErrors.push(`${ev.type}: ${parsed.error.message}`);
        types.push(ev.type === 'CUSTOM' ? `CUSTOM:${ev.name}` : ev.type);
        if (ev.type === 'RUN_STARTED') runs.push({ runId: ev.runId, mesh: ev.metadata?.mesh || '' });
        if (ev.type === 'RUN_FINISHED' || ev.type === 'RUN_ERROR') {
          const run = runs[runs.length - 1];
          if (run) run.outcome = ev.type === 'RUN_ERROR' ? `error:${ev.code}` : ev.outcome?.type || 'success';
        }
      }),
      timeout({ each: quiet, with: () => { stop.abort(); return EMPTY; } }),
    );
  }
}

const agent = new EventsAgent({ threadId: conv });
let verifyError = '';
try {
  await agent.connectAgent({}, {});
} catch (err) {
  verifyError = String(err && err.message ? err.message : err);
}
stop.abort();
const messages = agent.messages.map((m) => ({
  id: m.id,
  role: m.role,
  toolCallIds: (m.toolCalls || []).map((c) => c.id),
  toolCallId: m.toolCallId || '',
}));
console.log(JSON.stringify({ types, runs, messages, verifyError, schemaErrors }));
