// The MCP tasks extension's own requester (@modelcontextprotocol/ext-tasks)
// over SDK v2 pinned to 2026-07-28: run_task becomes a task the session
// polls until the Go test's worker submits; a second one is cancelled; a
// third is gated by its worker, and the session's input handler answers
// the elicitation it is shown, which the library sends as tasks/update.
// Prints one JSON line per execution.
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { createApplicationInputHandler, createTaskSessionFromClient } from '@modelcontextprotocol/ext-tasks/client';
import { env } from './loop.mjs';

const { url, key } = env();
const protocolVersion = '2026-07-28';
const clientInfo = { name: 'tessera-ext-tasks-interop', version: '1.0.0' };
const transport = new StreamableHTTPClientTransport(url, { requestInit: { headers: { Authorization: `Bearer ${key}` } } });
const client = new Client(clientInfo, { versionNegotiation: { mode: { pin: protocolVersion } } });
await client.connect(transport);

// The SDK's own codecs do not carry task traffic yet: the extension asks
// the host for a raw request path, here one POST per message, framed as
// JSON-RPC with the revision's routing headers.
let nextId = 1;
const rawDispatch = async (message, options) => {
  const request = { jsonrpc: '2.0', id: nextId++, ...message };
  const headers = {
    'Content-Type': 'application/json', Accept: 'application/json, text/event-stream', Authorization: `Bearer ${key}`,
    'Mcp-Protocol-Version': protocolVersion, 'Mcp-Method': request.method,
  };
  const name = request.method === 'tools/call' ? request.params?.name : request.params?.taskId;
  if (name !== undefined) headers['Mcp-Name'] = name;
  const res = await fetch(url, { method: 'POST', headers, body: JSON.stringify(request), signal: options?.signal });
  return await res.json();
};
// What the application is asked, as the library hands it over, and any
// error the library reports instead of throwing (a handler's failure, an
// answer it refused to send): the Go test wants exactly one elicitation
// and no errors.
const asked = [];
const errors = [];
const unexpected = (kind) => (request) => { throw new Error(`unexpected ${kind} input request: ${JSON.stringify(request)}`); };
const session = createTaskSessionFromClient(client, {
  endpointId: 'tessera-test',
  rawDispatch,
  v2RequestFraming: { protocolVersion, clientInfo, clientCapabilities: { extensions: { 'io.modelcontextprotocol/tasks': {} } } },
  onInputRequest: createApplicationInputHandler({
    elicitation: (request, context) => {
      const { scope, delivery, taskId, inputId } = context;
      asked.push({ kind: request.kind, params: request.params, context: { scope, delivery, taskId, inputId } });
      return { action: 'accept', content: { ok: true } };
    },
    sampling: unexpected('sampling'),
    roots: unexpected('roots'),
  }),
  onError: (error) => errors.push(`${error.name}: ${error.message}`),
});
try {
  const worked = await session.callTool('run_task', { title: 'handed off', queue: 'ext' });
  const { outcome } = await worked.settle();
  console.log(JSON.stringify({ kind: worked.kind, taskId: worked.handle?.taskId, outcome,
    error: outcome.error && `${outcome.error.message}: ${JSON.stringify(outcome.error.cause?.cause?.issues ?? outcome.error.cause?.message)}` }));

  const cancelled = await session.callTool('run_task', { title: 'called off', queue: 'ext-cancel' });
  await cancelled.cancel();
  const { outcome: after } = await cancelled.settle();
  console.log(JSON.stringify({ kind: cancelled.kind, taskId: cancelled.handle?.taskId, status: after.status, task: after.task }));

  // Every task view the execution went through (the library drops
  // repeats), so the test sees input_required was shown, and with what.
  const gated = await session.callTool('run_task', { title: 'needs approval', queue: 'ext-gate' });
  const seen = [];
  const { outcome: approved } = await gated.settle({
    onEvent: (event) => {
      if (event.type === 'task') seen.push({ status: event.task.status, statusMessage: event.task.statusMessage, inputRequests: event.task.raw.inputRequests });
    },
  });
  console.log(JSON.stringify({ kind: gated.kind, taskId: gated.handle?.taskId, seen, asked, errors, outcome: approved,
    error: approved.error && `${approved.error.message}: ${JSON.stringify(approved.error.cause?.cause?.issues ?? approved.error.cause?.message)}` }));
} finally {
  await session.close();
}
