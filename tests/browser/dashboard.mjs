// Browser test of the gantry dashboard against a running stack.
//
//   GANTRY_URL=http://127.0.0.1:18080 GANTRY_ADMIN_TOKEN=... GANTRY_TEST_OUT=dir \
//     node tests/browser/dashboard.mjs
//
// Drives Debian's /usr/bin/chromium (override with CHROMIUM) through
// playwright-core; no browser is downloaded. Prints "ok N checks" and exits 0,
// or prints the failing check, saves failure.png and exits 1. Every wait has
// a deadline; there are no fixed sleeps.
import { chromium } from 'playwright-core';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const BASE = (process.env.GANTRY_URL || '').replace(/\/+$/, '');
const ADMIN = process.env.GANTRY_ADMIN_TOKEN || '';
const OUT = process.env.GANTRY_TEST_OUT || path.join(os.tmpdir(), 'gantry-browser');
const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';
const TOTAL_MS = 60000;
const WAIT_MS = 20000;

if (!BASE || !ADMIN) {
    console.error('dashboard.mjs: set GANTRY_URL and GANTRY_ADMIN_TOKEN');
    process.exit(2);
}
fs.mkdirSync(OUT, { recursive: true });

let checks = 0;
let page = null;
let context = null;
const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'gantry-chromium-'));
const pageErrors = [];

async function check(name, fn) {
    try {
        await fn();
    } catch (e) {
        throw Object.assign(new Error(`${name}: ${e && e.message ? e.message.split('\n')[0] : e}`), { check: name });
    }
    checks++;
    console.log(`  ok ${checks} ${name}`);
}

function assert(cond, message) {
    if (!cond) throw new Error(message);
}

async function http(method, urlPath, token, body) {
    const res = await fetch(BASE + urlPath, {
        method,
        headers: { Authorization: `Bearer ${token}`, ...(body ? { 'Content-Type': 'application/json' } : {}) },
        body: body ? JSON.stringify(body) : undefined,
        signal: AbortSignal.timeout(10000),
    });
    const text = await res.text();
    let data = null;
    try { data = text ? JSON.parse(text) : null; } catch { /* not JSON */ }
    if (!res.ok) throw Object.assign(new Error(`${method} ${urlPath} -> ${res.status} ${text.slice(0, 200)}`), { status: res.status });
    return data;
}

const sel = {
    row: (id) => `[data-testid="job-row"][data-job-id="${id}"]`,
};

async function main() {
    // (1) A fresh tenant and a member token, as admin.
    let tenant, member;
    let tenantName = 'browser-team';
    await check('admin creates tenant browser-team', async () => {
        try {
            tenant = await http('POST', '/v1/tenants', ADMIN, { name: tenantName });
        } catch (e) {
            if (e.status !== 409) throw e;
            // A second run against the same stack: the name is taken.
            tenantName = `browser-team-${Date.now().toString(36)}`;
            tenant = await http('POST', '/v1/tenants', ADMIN, { name: tenantName });
        }
        assert(tenant && tenant.id, `no tenant id in ${JSON.stringify(tenant)}`);
    });
    await check('admin creates a member token', async () => {
        const t = await http('POST', `/v1/tenants/${encodeURIComponent(tenant.id)}/tokens`, ADMIN, { role: 'member', name: 'browser' });
        assert(t && t.token, 'no token in the answer');
        member = t.token;
    });

    context = await chromium.launchPersistentContext(profile, {
        executablePath: CHROMIUM,
        headless: true,
        args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run',
            '--disable-background-networking', '--disable-component-update', '--disable-sync', '--disable-quic'],
        viewport: { width: 1280, height: 900 },
    });
    context.setDefaultTimeout(WAIT_MS);
    page = context.pages()[0] || await context.newPage();
    page.on('pageerror', (e) => pageErrors.push(e.message));

    // (2) Log in: a bad token is refused with a visible error, the member token works.
    await check('dashboard shows the login form', async () => {
        await page.goto(`${BASE}/`, { waitUntil: 'domcontentloaded' });
        await page.waitForSelector('[data-testid="token"]');
    });
    await check('a wrong token shows a 401 error', async () => {
        await page.fill('[data-testid="token"]', 'not-a-real-token');
        await page.click('[data-testid="login"]');
        const errEl = await page.waitForSelector('[data-testid="login-error"]');
        const text = await errEl.textContent();
        assert(/401|not accepted/i.test(text), `error text was "${text}"`);
    });
    await check('member logs in and sees tenant and role', async () => {
        await page.fill('[data-testid="token"]', member);
        await page.click('[data-testid="login"]');
        await page.waitForFunction((n) => (document.querySelector('[data-testid="whoami"]')?.textContent || '').includes(n), tenantName);
        const who = await page.textContent('[data-testid="whoami"]');
        assert(/member/.test(who), `whoami shows "${who}"`);
    });
    await check('token is kept in sessionStorage, not localStorage', async () => {
        const where = await page.evaluate(() => ({
            session: Object.values(sessionStorage).length, local: Object.values(localStorage).length,
        }));
        assert(where.session === 1 && where.local === 0, JSON.stringify(where));
    });
    await check('jobs list is shown', async () => {
        await page.waitForSelector('[data-testid="jobs-table"]');
        await page.waitForSelector('[data-testid="jobs-loading"]', { state: 'detached' });
    });
    await check('live indicator reports the event stream open', async () => {
        await page.waitForSelector('[data-testid="live"][data-state="open"]');
    });

    // (3) Submit through the API; (4) the row appears and succeeds without a reload.
    await page.evaluate(() => { window.__gantryNoReload = true; });
    let job;
    await check('member submits a placement job through the API', async () => {
        job = await http('POST', '/v1/jobs', member, {
            type: 'placement', name: 'browser-job',
            spec: { graph: {
                ops: [{ name: 'a', compute_us: 10, output_bytes: [100] }, { name: 'b', compute_us: 20, output_bytes: [100] }],
                edges: [{ src: 'a', dst: 'b', bytes: 100 }],
                devices: [{ name: 'd0', memory_bytes: 1000000 }],
                comm: { latency_us: 1, bytes_per_us: 100 },
            } },
        });
        assert(job && job.id, 'no job id in the answer');
    });
    await check('the new job appears in the list live', async () => {
        await page.waitForSelector(sel.row(job.id));
    });
    await check('its state cell reaches "succeeded" live', async () => {
        await page.waitForFunction((s) => document.querySelector(s)?.textContent.trim() === 'succeeded',
            `${sel.row(job.id)} [data-testid="job-state"]`, { timeout: 40000 });
    });
    await check('the page was not reloaded', async () => {
        assert(await page.evaluate(() => window.__gantryNoReload === true), 'window state was lost');
    });
    await page.screenshot({ path: path.join(OUT, 'jobs.png'), fullPage: true });

    // (5) Job detail: timeline and result.
    await check('job detail opens from the row', async () => {
        await page.click(`${sel.row(job.id)} [data-testid="job-link"]`);
        await page.waitForSelector(`[data-testid="job-detail"][data-job-id="${job.id}"]`);
    });
    await check('timeline shows queued, scheduled, running, succeeded', async () => {
        const want = ['queued', 'scheduled', 'running', 'succeeded'];
        await page.waitForFunction((w) => {
            const seen = [...document.querySelectorAll('[data-testid="event-row"] [data-testid="event-state"]')]
                .map((e) => e.textContent.trim());
            return w.every((s) => seen.includes(s));
        }, want).catch(async () => {
            const seen = await page.$$eval('[data-testid="event-state"]', (els) => els.map((e) => e.textContent.trim()));
            throw new Error(`timeline shows [${seen.join(', ')}]`);
        });
    });
    await check('result shows the best algorithm', async () => {
        const api = await http('GET', `/v1/jobs/${encodeURIComponent(job.id)}`, member);
        assert(api.result && api.result.best, 'the API result has no "best"');
        await page.waitForSelector('[data-testid="best-algorithm"]');
        const shown = (await page.textContent('[data-testid="best-algorithm"]')).trim();
        assert(shown === api.result.best, `shows "${shown}", API says "${api.result.best}"`);
    });
    await check('no cancel button on a finished job', async () => {
        assert(await page.$('[data-testid="cancel"]') === null, 'cancel button is shown');
    });
    await page.screenshot({ path: path.join(OUT, 'job.png'), fullPage: true });

    // (6) Workers.
    await check('workers page lists at least one worker', async () => {
        await page.click('[data-testid="nav-workers"]');
        await page.waitForSelector('[data-testid="worker-row"]');
    });
    await page.screenshot({ path: path.join(OUT, 'workers.png'), fullPage: true });

    await check('no uncaught errors in the page', async () => {
        assert(pageErrors.length === 0, pageErrors.join(' | '));
    });
}

async function finish(code, message) {
    if (message) console.log(message);
    if (code !== 0 && page) {
        await page.screenshot({ path: path.join(OUT, 'failure.png'), fullPage: true }).catch(() => {});
    }
    if (context) await context.close().catch(() => {});
    fs.rmSync(profile, { recursive: true, force: true });
    process.exit(code);
}

const deadline = setTimeout(() => {
    finish(1, `FAIL: overall deadline of ${TOTAL_MS / 1000} s passed after ${checks} checks`);
}, TOTAL_MS);

main().then(
    () => { clearTimeout(deadline); return finish(0, `ok ${checks} checks`); },
    (e) => { clearTimeout(deadline); return finish(1, `FAIL: ${e.message}`); },
);
