// Validates the server's OpenAPI document with a real validator (npm:
// @seriousme/openapi-schema-validator, the OpenAPI 3.1 JSON schema).
//
//   GANTRY_URL=http://127.0.0.1:18080 node tests/browser/openapi.test.mjs
//
// Fetches /v1/openapi.json (no token: it is public) and fails with the
// validator's errors when the document does not conform.
import { Validator } from '@seriousme/openapi-schema-validator';

const base = (process.env.GANTRY_URL || '').replace(/\/+$/, '');
if (!base) {
    console.error('openapi.test.mjs: set GANTRY_URL');
    process.exit(2);
}
const res = await fetch(`${base}/v1/openapi.json`);
if (res.status !== 200) {
    console.error(`GET /v1/openapi.json: HTTP ${res.status}`);
    process.exit(1);
}
const doc = await res.json();
const v = new Validator();
const r = await v.validate(doc);
if (!r.valid) {
    console.error(JSON.stringify(r.errors, null, 2).slice(0, 4000));
    process.exit(1);
}
console.log(`ok openapi ${v.version}: ${Object.keys(doc.paths).length} paths valid`);
