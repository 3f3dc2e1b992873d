// Browser test of a program job's log pane and output files on the job page.
//
//   GANTRY_URL=http://127.0.0.1:18080 GANTRY_ADMIN_TOKEN=... GANTRY_REDIS_PORT=6380 GANTRY_TEST_OUT=dir \
//     node tests/browser/logs.mjs
//
// The stack runs no worker: the test writes the job's log entries into Redis
// as a worker does (gantry:logs:<job>: r, g, t / end) and its final event with
// result.outputs. As a member: the pane shows the tail with "[rank R] "
// prefixes, markup and ESC as text; a line written later appears without a
// reload; the rank selector shows one rank; the pane follows the end until the
// user scrolls up, then stays put ("Jump to the end" returns); when the job
// ends the pane says so and the output file downloads with its bytes. Saves
// logs.png.
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { ADMIN, assert, check, http, launch, login, pageProblems, requireEnv, run, screenshot, tenantWithMember } from './lib.mjs';

requireEnv('logs.mjs');
const REDIS_PORT = Number(process.env.GANTRY_REDIS_PORT || 0);

const REDIS_USER = process.env.GANTRY_REDIS_USER || '';
const REDIS_PASSWORD = process.env.GANTRY_REDIS_PASSWORD || '';

const resp = (args) => [`*${args.length}\r\n`, ...args.map((a) => { const b = Buffer.from(String(a)); return Buffer.concat([Buffer.from(`$${b.length}\r\n`), b, Buffer.from('\r\n')]); })];

// one Redis command over RESP (binary-safe enough for text), its reply as a string; AUTH first when the
// harness gave credentials (its Redis has ACL users, the default user off), its "+OK" dropped
function redis(...args) {
    const auth = REDIS_PASSWORD ? resp(['AUTH', ...(REDIS_USER ? [REDIS_USER] : []), REDIS_PASSWORD]) : [];
    const parts = [...auth, ...resp(args)];
    return new Promise((resolve, reject) => {
        const sock = net.createConnection(REDIS_PORT, '127.0.0.1');
        let got = '';
        let ok = auth.length > 0;
        sock.on('data', (d) => {
            got += d;
            if (ok && got.startsWith('+OK\r\n')) { got = got.slice(5); ok = false; }
            if (got.startsWith('-')) { sock.end(); reject(new Error(got)); }
            if (got.split('\r\n').length > 2) { sock.end(); resolve(got); }
        });
        sock.on('error', reject);
        sock.write(Buffer.concat(parts.map((p) => (Buffer.isBuffer(p) ? p : Buffer.from(p)))));
    });
}
const xadd = (job, rank, field, value) => redis('XADD', `gantry:logs:${job}`, '*', 'r', rank, 'g', 0, field, value);

async function main() {
    assert(REDIS_PORT, 'set GANTRY_REDIS_PORT');
    let tenant, member, job;
    const root = fs.mkdtempSync(path.join(os.tmpdir(), 'gantry-logs-root-'));
    fs.mkdirSync(path.join(root, 'code'));
    await check('a tenant with a root, a member, a program job', async () => {
        ({ tenant, token: member } = await tenantWithMember('logs-team'));
        await http('PATCH', `/v1/tenants/${encodeURIComponent(tenant.id)}`, ADMIN, { roots: [root] });
        job = await http('POST', '/v1/jobs', member, {
            type: 'training', name: 'printer', spec: { program: { command: ['python3', 'train.py'], workdir: 'code' }, workers: 2 },
        });
        assert(job && job.id, 'no job id');
        await xadd(job.id, 0, 't', 'epoch 1\nepoch 2\n');
        await xadd(job.id, 1, 't', '<b>not markup</b> \x1b[31mred\n');
    });
    const page = await launch();
    const lines = () => page.$eval('[data-testid="logs"]', (p) => p.textContent.split('\n').filter(Boolean));
    await check('member logs in and opens the job page: the tail, prefixed, as text', async () => {
        await login(page, member, tenant.name);
        await page.evaluate((id) => { location.hash = `#/jobs/${id}`; }, job.id);
        await page.waitForFunction(() => Number(document.querySelector('[data-testid="logs"]')?.dataset.lines) >= 3);
        const got = await lines();
        assert(got.join('|') === '[rank 0] epoch 1|[rank 0] epoch 2|[rank 1] <b>not markup</b> \\x1b[31mred', `pane: ${JSON.stringify(got)}`);
        assert(await page.$$eval('[data-testid="logs"] b', (b) => b.length) === 0, 'markup from the log became an element');
    });
    await check('a line written now appears without a reload', async () => {
        await xadd(job.id, 0, 't', 'epoch 3\n');
        await page.waitForFunction(() => (document.querySelector('[data-testid="logs"]')?.textContent || '').includes('[rank 0] epoch 3'));
    });
    await check('the rank selector shows one rank, without prefixes', async () => {
        await page.selectOption('[data-testid="logs-rank"]', '0');
        await page.waitForFunction(() => document.querySelector('[data-testid="logs"]')?.textContent === 'epoch 1\nepoch 2\nepoch 3\n');
        await page.selectOption('[data-testid="logs-rank"]', '');
        await page.waitForFunction(() => Number(document.querySelector('[data-testid="logs"]')?.dataset.lines) === 4);
    });
    const atEnd = () => page.$eval('[data-testid="logs"]', (p) => p.scrollTop + p.clientHeight >= p.scrollHeight - 8);
    await check('the pane follows the end until the user scrolls up', async () => {
        await xadd(job.id, 0, 't', Array.from({ length: 200 }, (_, i) => `step ${i}`).join('\n') + '\n');
        await page.waitForFunction(() => Number(document.querySelector('[data-testid="logs"]')?.dataset.lines) === 204);
        assert(await atEnd(), 'not scrolled to the newest line');
        await page.$eval('[data-testid="logs"]', (p) => { p.scrollTop = 0; p.dispatchEvent(new Event('scroll')); });
        await page.waitForSelector('[data-testid="logs-jump"]:not([hidden])');
        await xadd(job.id, 0, 't', 'more\n');
        await page.waitForFunction(() => Number(document.querySelector('[data-testid="logs"]')?.dataset.lines) === 205);
        assert(await page.$eval('[data-testid="logs"]', (p) => p.scrollTop) === 0, 'the pane moved while the user read above');
        await page.click('[data-testid="logs-jump"]');
        assert(await atEnd(), '"Jump to the end" did not');
    });
    await screenshot('logs.png');
    const outdir = fs.mkdtempSync(path.join(os.tmpdir(), 'gantry-logs-out-'));
    const model = Buffer.from(Array.from({ length: 5000 }, (_, i) => i % 251));
    fs.writeFileSync(path.join(outdir, 'model.pt'), model);
    await check('the job ends: the pane says so, the output file downloads', async () => {
        await xadd(job.id, 0, 'end', 'exited with code 0');
        await xadd(job.id, 1, 'end', 'exited with code 0');
        const { createHash } = await import('node:crypto');
        const sha = createHash('sha256').update(model).digest('hex');
        const ev = { id: `e_${Date.now()}`, job_id: job.id, ts: Date.now(), source: 'worker:w_fake', state: 'succeeded', reason: 'done',
            result: { metrics: { world_size: 2 }, outputs: { dir: outdir, files: [{ path: 'model.pt', bytes: model.length, sha256: sha }] } } };
        await redis('XADD', 'gantry:events', '*', 'event', JSON.stringify(ev));
        await page.waitForSelector('[data-testid="logs-status"][data-state="succeeded"]');
        assert(await page.$$eval('[data-testid="logs-end"]', (e) => e.length) === 2, 'no end lines');
        await page.waitForSelector('[data-testid="output-row"][data-path="model.pt"]');
        const [dl] = await Promise.all([page.waitForEvent('download'), page.click('[data-testid="output-download"]')]);
        assert(dl.suggestedFilename() === 'model.pt', `saved as ${dl.suggestedFilename()}`);
        const got = fs.readFileSync(await dl.path());
        assert(Buffer.compare(got, model) === 0, `downloaded ${got.length} bytes, not the file's ${model.length}`);
    });
    await check('no uncaught error and no CSP violation', async () => {
        const problems = await pageProblems();
        assert(problems.length === 0, problems.join('; '));
    });
    fs.rmSync(root, { recursive: true, force: true });
    fs.rmSync(outdir, { recursive: true, force: true });
}

run(main, 120000);
