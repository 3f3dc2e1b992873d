// Validates the server's OpenAPI document with a real validator (npm:
// @seriousme/openapi-schema-validator, the OpenAPI 3.1 JSON schema).
//
//   GANTRY_URL=http://127.0.0.1:18080 node tests/browser/openapi.test.mjs
//
// Fetches /v1/openapi.json (no token: it is public) and fails with the
// validator's errors when the document does not conform.  Then compiles the
// job submission schema with Ajv (JSON Schema 2020-12, as OpenAPI 3.1 uses)
// and checks that the job examples in deploy/examples (and GANTRY_JOBS, a
// JSON array of jobs the server accepted) are valid, and that broken ones are not.
import { Validator } from '@seriousme/openapi-schema-validator';
import Ajv2020 from 'ajv/dist/2020.js';
import { readFileSync, readdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

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

// strict: false, since the document's own keywords (openapi, paths) are not JSON Schema's
const ajv = new Ajv2020({ strict: false, allErrors: true });
ajv.addSchema(doc, 'api');
const job = ajv.getSchema('api#/components/schemas/JobSubmission');
if (!job) {
    console.error('no components.schemas.JobSubmission');
    process.exit(1);
}
const examples = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'deploy', 'examples');
const good = readdirSync(examples).filter((f) => f.endsWith('.json')).map((f) => [f, JSON.parse(readFileSync(join(examples, f)))]);
for (const [i, j] of JSON.parse(process.env.GANTRY_JOBS || '[]').entries()) good.push([`GANTRY_JOBS[${i}]`, j]);
let failed = 0;
for (const [name, j] of good) {
    if (!job(j)) {
        console.error(`${name}: refused by the schema: ${JSON.stringify(job.errors).slice(0, 800)}`);
        failed++;
    }
    const broken = structuredClone(j);
    broken.spec.no_such_field = 1; // every spec is a closed object
    if (job(broken)) {
        console.error(`${name}: an unknown spec field passed the schema`);
        failed++;
    }
}
if (failed) process.exit(1);
console.log(`ok job schemas: ${good.length} jobs valid, their broken copies not`);
