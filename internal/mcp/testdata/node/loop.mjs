// The worker loop both TypeScript clients run against a real Tessera
// server: list tools, enqueue, claim, heartbeat, write a record, submit.
// callTool() validates every structured result against the tool's output
// schema itself (and throws when it does not match); each result is also
// checked here with the validator class the SDK uses by default, and a
// deliberately wrong value must be refused, so the check cannot pass by
// being vacuous. Prints one JSON line; exits non-zero on any failure.

export async function workerLoop({ client, label, newValidator, protocolVersion }) {
  const fail = (msg) => { throw new Error(`${label}: ${msg}`); };
  const { tools } = await client.listTools();
  const want = Number(process.env.TESSERA_TOOLS);
  if (tools.length !== want) fail(`${tools.length} tools listed, want ${want}`);
  const validator = newValidator();
  const schemas = new Map(tools.map((t) => [t.name, t.outputSchema]));
  const validated = [];

  async function callResult(name, args) {
    const res = await client.callTool({ name, arguments: args });
    const check = validator.getValidator(schemas.get(name))(res.structuredContent);
    if (!check.valid) fail(`${name}: ${JSON.stringify(res.structuredContent)} is not valid: ${check.errorMessage}`);
    if (JSON.stringify(JSON.parse(res.content[0].text)) !== JSON.stringify(res.structuredContent)) fail(`${name}: text and structured content differ`);
    validated.push(name);
    return res;
  }
  async function call(name, args) {
    const res = await callResult(name, args);
    if (res.isError) fail(`${name}: ${JSON.stringify(res.structuredContent)}`);
    return res.structuredContent;
  }

  const task = await call('enqueue_task', { title: `${label} task`, brief: 'add the numbers', payload: { numbers: [3, 4] } });
  const claim = await call('claim_task', { lease_seconds: 60 });
  if (!claim.lease || claim.lease.task_id !== task.id) fail(`claimed ${JSON.stringify(claim.lease)}, enqueued ${task.id}`);
  const token = claim.lease.token;
  const hb = await call('heartbeat', { task_id: task.id, lease_token: token, progress: { pct: 50 } });
  if (hb.cancel_requested !== false || !hb.expires_at) fail(`heartbeat: ${JSON.stringify(hb)}`);
  const rec = await call('write_record', { bucket: 'results', key: task.id, value: { sum: 7 }, lease_token: token });
  if (rec.version !== 1 || rec.run_id !== claim.lease.run_id) fail(`record: ${JSON.stringify(rec)}`);
  const done = await call('submit_task', { task_id: task.id, lease_token: token, outcome: 'succeeded', result: { sum: 7 }, idempotency_key: `${label}-submit` });
  if (done.state !== 'succeeded') fail(`submit: ${JSON.stringify(done)}`);
  const empty = await call('claim_task', {});
  if (empty.lease !== null || empty.retry_after !== 5) fail(`empty claim: ${JSON.stringify(empty)}`);
  const lost = await callResult('heartbeat', { task_id: task.id, lease_token: token });
  if (!lost.isError || lost.structuredContent.code !== 'lease_lost' || lost.structuredContent.status !== 409) fail(`heartbeat after submit: ${JSON.stringify(lost.structuredContent)}`);

  if (validator.getValidator(schemas.get('claim_task'))({ lease: 'not a lease' }).valid) fail('the output schema of claim_task accepts anything');

  console.log(JSON.stringify({ client: label, protocolVersion, tools: tools.length, validated, task: task.id, state: done.state }));
}

export function env() {
  const url = process.env.TESSERA_MCP_URL;
  const key = process.env.TESSERA_KEY;
  if (!url || !key) throw new Error('TESSERA_MCP_URL and TESSERA_KEY must be set');
  return { url: new URL(url), key };
}
