// Connects one official TypeScript client with the server entry of
// docs/mcp.md's configuration block, as internal/mcp's docs test hands it
// over (its url and headers, the test server's address and a real key
// put in): no other option, as a client reading that block would. Lists
// the tools and prints one JSON line; exits non-zero on any failure.
const sdk = process.argv[2];
const entry = JSON.parse(process.env.TESSERA_MCP_SERVER ?? 'null');
if (!entry || entry.type !== 'http' || !entry.url || !entry.headers) throw new Error(`no server entry: ${process.env.TESSERA_MCP_SERVER}`);
const init = { requestInit: { headers: entry.headers } };

let client, transport, version;
if (sdk === 'v1') {
  const { Client } = await import('@modelcontextprotocol/sdk/client/index.js');
  const { StreamableHTTPClientTransport } = await import('@modelcontextprotocol/sdk/client/streamableHttp.js');
  transport = new StreamableHTTPClientTransport(new URL(entry.url), init);
  client = new Client({ name: 'tessera-docs-config-v1', version: '1.0.0' });
  await client.connect(transport);
  version = transport.protocolVersion;
} else if (sdk === 'v2') {
  const { Client, StreamableHTTPClientTransport } = await import('@modelcontextprotocol/client');
  transport = new StreamableHTTPClientTransport(new URL(entry.url), init);
  client = new Client({ name: 'tessera-docs-config-v2', version: '1.0.0' });
  await client.connect(transport);
  version = client.getNegotiatedProtocolVersion();
} else {
  throw new Error(`usage: node config.mjs v1|v2, not ${sdk}`);
}
const { tools } = await client.listTools();
// A tool that needs the key proves the header went with the call.
const who = await client.callTool({ name: 'whoami', arguments: {} });
if (who.isError) throw new Error(`whoami: ${JSON.stringify(who.structuredContent)}`);
console.log(JSON.stringify({ client: `ts-sdk-${sdk}`, protocolVersion: version, tools: tools.map((t) => t.name), key: who.structuredContent.key_id }));
await client.close();
