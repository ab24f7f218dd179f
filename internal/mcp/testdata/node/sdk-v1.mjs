// TypeScript SDK v1 (@modelcontextprotocol/sdk): the 2025 handshake lane.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { AjvJsonSchemaValidator } from '@modelcontextprotocol/sdk/validation/ajv';
import { env, workerLoop } from './loop.mjs';

const { url, key } = env();
const transport = new StreamableHTTPClientTransport(url, { requestInit: { headers: { Authorization: `Bearer ${key}` } } });
const client = new Client({ name: 'tessera-ts-sdk-v1-interop', version: '1.0.0' });
await client.connect(transport);
if (client.getServerVersion()?.name !== 'tessera') throw new Error(`server ${JSON.stringify(client.getServerVersion())}`);
await workerLoop({ client, label: 'ts-sdk-v1', newValidator: () => new AjvJsonSchemaValidator(), protocolVersion: transport.protocolVersion });
await client.close();
