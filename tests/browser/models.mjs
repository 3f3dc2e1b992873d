// Browser test of the Models page (#/models) and an inference job's served
// version, against a running stack with no worker (the serving job stays
// queued; its alias still rolls it).
//
//   GANTRY_URL=... GANTRY_ADMIN_TOKEN=... GANTRY_TEST_OUT=dir GANTRY_MODEL_DIR=dir \
//     node tests/browser/models.mjs
//
// GANTRY_MODEL_DIR holds mlp_v1.pt and mlp_v2.pt (tests/integration/torch_models.py make DIR).
// As a member: uploads both versions (multipart), points the alias production at v1,
// submits an inference job on mlp@production, moves the alias to v2. Then checks
// that the Models page (opened from the navigation) shows mlp's versions with the
// API's format, size, sha256 prefix and description, and its alias; that the job's
// page says it serves mlp v2 through the alias, and lists the alias move among its
// events. Saves models.png and models-job.png. Prints "ok N checks" or the failing check.
import fs from 'node:fs';
import path from 'node:path';
import {
    BASE, assert, check, http, launch, login, pageProblems, requireEnv, run, screenshot, tenantWithMember,
} from './lib.mjs';

requireEnv('models.mjs');
const DIR = process.env.GANTRY_MODEL_DIR || '';
const META = {
    inputs: [{ name: 'x', datatype: 'FP32', shape: [-1, 4] }],
    outputs: [{ name: 'logits', datatype: 'FP32', shape: [-1, 3] }],
};

async function upload(token, name, file, description) {
    const form = new FormData();
    form.append('metadata', new Blob([JSON.stringify({ ...META, description })], { type: 'application/json' }));
    form.append('file', new Blob([fs.readFileSync(file)]), path.basename(file));
    const res = await fetch(`${BASE}/v1/models/${name}/versions`, {
        method: 'POST', headers: { Authorization: `Bearer ${token}` }, body: form, signal: AbortSignal.timeout(60000),
    });
    const text = await res.text();
    assert(res.status === 201, `upload ${file}: ${res.status} ${text.slice(0, 200)}`);
    return JSON.parse(text);
}

async function main() {
    assert(DIR && fs.existsSync(path.join(DIR, 'mlp_v2.pt')), 'set GANTRY_MODEL_DIR to a directory with mlp_v1.pt and mlp_v2.pt');
    let tenant, member;
    await check('admin creates a tenant and a member token', async () => {
        ({ tenant, token: member } = await tenantWithMember('models-team'));
    });
    let job, moved;
    await check('member uploads two versions, aliases v1, serves the alias, moves it to v2', async () => {
        await upload(member, 'mlp', path.join(DIR, 'mlp_v1.pt'), 'first weights');
        await upload(member, 'mlp', path.join(DIR, 'mlp_v2.pt'), 'second weights');
        await http('PUT', '/v1/models/mlp/aliases/production', member, { version: 1 });
        job = await http('POST', '/v1/jobs', member, {
            type: 'inference', name: 'serve-mlp',
            spec: { model: 'mlp@production', slo: { latency_ms: 500, percentile: 99 }, replicas: 1 },
        });
        moved = await http('PUT', '/v1/models/mlp/aliases/production', member, { version: 2 });
        assert(moved.rolled.includes(job.id), `the alias move rolled ${JSON.stringify(moved.rolled)}, not ${job.id}`);
    });
    const model = await http('GET', '/v1/models/mlp', member);

    const page = await launch();
    await check('member logs in and opens Models from the navigation', async () => {
        await login(page, member, tenant.name);
        await page.click('[data-testid="nav-models"]');
        await page.waitForSelector('[data-testid="model"][data-model="mlp"] [data-testid="model-version"]');
    });
    await check('each version shows the API\'s format, size, sha256 prefix and description', async () => {
        const rows = await page.$$eval('[data-testid="model"][data-model="mlp"] [data-testid="model-version"]', (trs) => trs.map((t) => ({
            ...t.dataset,
            sha: t.querySelector('[data-testid="version-sha256"]').textContent.trim(),
            format: t.querySelector('[data-testid="version-format"]').textContent.trim(),
            description: t.querySelector('[data-testid="version-description"]').textContent.trim(),
            sizeTitle: t.querySelector('[data-testid="version-size"]').title,
        })));
        assert(rows.length === model.versions.length, `${rows.length} rows, the API lists ${model.versions.length} versions`);
        model.versions.forEach((v, i) => {
            const r = rows[i];
            assert(r.version === String(v.version), `row ${i} is v${r.version}, the API's v${v.version}`);
            assert(r.format === v.format && v.format === 'torchscript', `v${v.version}: format "${r.format}", API "${v.format}"`);
            assert(r.bytes === String(v.size_bytes) && r.sizeTitle === `${v.size_bytes} bytes`, `v${v.version}: size ${r.bytes}, API ${v.size_bytes}`);
            assert(r.sha === v.sha256.slice(0, 12), `v${v.version}: sha256 "${r.sha}", API ${v.sha256}`);
            assert(r.description === v.description, `v${v.version}: description "${r.description}", API "${v.description}"`);
        });
    });
    await check('the alias shows the version it names', async () => {
        const aliases = await page.$$eval('[data-testid="model"][data-model="mlp"] [data-testid="model-alias"]',
            (els) => els.map((e) => [e.dataset.alias, e.dataset.version]));
        assert(JSON.stringify(aliases) === JSON.stringify(Object.entries(model.aliases).map(([a, v]) => [a, String(v)])),
            `page ${JSON.stringify(aliases)}, API ${JSON.stringify(model.aliases)}`);
    });
    await screenshot('models.png');

    await check('the job page says it serves mlp v2 through the alias production', async () => {
        await page.goto(`${BASE}/#/jobs/${encodeURIComponent(job.id)}`);
        await page.waitForSelector('[data-testid="job-model"]');
        const d = await page.$eval('[data-testid="job-model"]', (e) => ({ ...e.dataset, text: e.textContent }));
        const api = await http('GET', `/v1/jobs/${encodeURIComponent(job.id)}`, member);
        const r = api.spec.resolved;
        assert(d.model === r.name && d.version === String(r.version) && d.alias === r.alias, `page ${JSON.stringify(d)}, API ${JSON.stringify(r)}`);
        assert(r.version === 2 && d.text === 'mlp v2 (alias production)', `shows "${d.text}"`);
    });
    await check('the alias move is among the job\'s events', async () => {
        const events = (await http('GET', `/v1/jobs/${encodeURIComponent(job.id)}/events`, member)).events;
        const note = events.find((e) => /production moved from version 1 to 2/.test(e.reason || ''));
        assert(note, `no alias-move event in ${JSON.stringify(events.map((e) => e.reason))}`);
        await page.waitForFunction((reason) => [...document.querySelectorAll('[data-testid="event-row"]')]
            .some((tr) => tr.textContent.includes(reason)), note.reason);
    });
    await screenshot('models-job.png');
    await check('no uncaught errors or CSP violations in the page', async () => {
        const problems = await pageProblems();
        assert(problems.length === 0, problems.join(' | '));
    });
}

run(main, 90000);
