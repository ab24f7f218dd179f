// TypeScript SDK v2 (@modelcontextprotocol/client), pinned to the
// stateless 2026-07-28 revision: server/discover, per-request _meta.
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { AjvJsonSchemaValidator } from '@modelcontextprotocol/client/validators/ajv';
import { env, workerLoop } from './loop.mjs';

const { url, key } = env();
const transport = new StreamableHTTPClientTransport(url, { requestInit: { headers: { Authorization: `Bearer ${key}` } } });
const client = new Client({ name: 'tessera-ts-sdk-v2-interop', version: '1.0.0' }, { versionNegotiation: { mode: { pin: '2026-07-28' } } });
await client.connect(transport);
const version = client.getNegotiatedProtocolVersion();
if (version !== '2026-07-28' || client.getProtocolEra() !== 'modern') throw new Error(`negotiated ${version} (${client.getProtocolEra()})`);
if (client.getServerVersion()?.name !== 'tessera') throw new Error(`server ${JSON.stringify(client.getServerVersion())}`);
await workerLoop({ client, label: 'ts-sdk-v2', newValidator: () => new AjvJsonSchemaValidator(), protocolVersion: version });
await client.close();
