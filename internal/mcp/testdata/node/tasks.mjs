// The MCP tasks extension's own requester (@modelcontextprotocol/ext-tasks)
// over SDK v2 pinned to 2026-07-28: run_task becomes a task the session
// polls until the Go test's worker submits; a second one is cancelled.
// Prints one JSON line per execution.
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { createTaskSessionFromClient } from '@modelcontextprotocol/ext-tasks/client';
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
const session = createTaskSessionFromClient(client, {
  endpointId: 'tessera-test',
  rawDispatch,
  v2RequestFraming: { protocolVersion, clientInfo, clientCapabilities: { extensions: { 'io.modelcontextprotocol/tasks': {} } } },
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
} finally {
  await session.close();
}
