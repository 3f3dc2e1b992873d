// Shared plumbing of the browser tests (cluster.mjs, plan.mjs): environment,
// named checks, the REST helper, Chromium through playwright-core, login,
// and the exit protocol ("ok N checks" and 0, or "FAIL: ..." with
// failure.png and 1). Every wait has a deadline; there are no fixed sleeps.
import { chromium } from 'playwright-core';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

export const BASE = (process.env.GANTRY_URL || '').replace(/\/+$/, '');
export const ADMIN = process.env.GANTRY_ADMIN_TOKEN || '';
export const OUT = process.env.GANTRY_TEST_OUT || path.join(os.tmpdir(), 'gantry-browser');
const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';
export const WAIT_MS = 20000;

export function requireEnv(script) {
    if (!BASE || !ADMIN) {
        console.error(`${script}: set GANTRY_URL and GANTRY_ADMIN_TOKEN`);
        process.exit(2);
    }
    fs.mkdirSync(OUT, { recursive: true });
}

export const state = { checks: 0, page: null, context: null, pageErrors: [] };

export async function check(name, fn) {
    try {
        await fn();
    } catch (e) {
        throw Object.assign(new Error(`${name}: ${e && e.message ? e.message.split('\n')[0] : e}`), { check: name });
    }
    state.checks++;
    console.log(`  ok ${state.checks} ${name}`);
}

export function assert(cond, message) {
    if (!cond) throw new Error(message);
}

export async function http(method, urlPath, token, body, timeoutMs = 15000) {
    const res = await fetch(BASE + urlPath, {
        method,
        headers: { Authorization: `Bearer ${token}`, ...(body ? { 'Content-Type': 'application/json' } : {}) },
        body: body ? JSON.stringify(body) : undefined,
        signal: AbortSignal.timeout(timeoutMs),
    });
    const text = await res.text();
    let data = null;
    try { data = text ? JSON.parse(text) : null; } catch { /* not JSON */ }
    if (!res.ok) throw Object.assign(new Error(`${method} ${urlPath} -> ${res.status} ${text.slice(0, 200)}`), { status: res.status });
    return data;
}

// A fresh tenant named prefix (or prefix-<time> when taken) and a member token.
export async function tenantWithMember(prefix) {
    let tenant;
    try {
        tenant = await http('POST', '/v1/tenants', ADMIN, { name: prefix });
    } catch (e) {
        if (e.status !== 409) throw e;
        tenant = await http('POST', '/v1/tenants', ADMIN, { name: `${prefix}-${Date.now().toString(36)}` });
    }
    assert(tenant && tenant.id, `no tenant id in ${JSON.stringify(tenant)}`);
    const t = await http('POST', `/v1/tenants/${encodeURIComponent(tenant.id)}/tokens`, ADMIN, { role: 'member', name: 'browser' });
    assert(t && t.token, 'no token in the answer');
    return { tenant, token: t.token };
}

// Polls GET /v1/jobs/{id} until the job is terminal; returns it.
export async function waitJob(token, id, timeoutMs) {
    const until = Date.now() + timeoutMs;
    for (;;) {
        const j = await http('GET', `/v1/jobs/${encodeURIComponent(id)}`, token);
        if (['succeeded', 'failed', 'cancelled'].includes(j.state)) return j;
        if (Date.now() > until) throw new Error(`job ${id} still ${j.state} after ${timeoutMs / 1000} s`);
        await new Promise((r) => setTimeout(r, 200));
    }
}

export async function launch(viewport = { width: 1280, height: 900 }) {
    const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'gantry-chromium-'));
    state.profile = profile;
    state.context = await chromium.launchPersistentContext(profile, {
        executablePath: CHROMIUM,
        headless: true,
        args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run',
            '--disable-background-networking', '--disable-component-update', '--disable-sync', '--disable-quic'],
        viewport,
    });
    state.context.setDefaultTimeout(WAIT_MS);
    state.page = state.context.pages()[0] || await state.context.newPage();
    state.page.on('pageerror', (e) => state.pageErrors.push(e.message));
    // Content-Security-Policy violations count as page errors.
    await state.context.addInitScript(() => {
        document.addEventListener('securitypolicyviolation', (e) => {
            (window.__csp = window.__csp || []).push(`${e.violatedDirective} ${e.blockedURI}`);
        });
    });
    return state.page;
}

// Logs in through the form and waits for the header to show the tenant.
export async function login(page, token, tenantName) {
    await page.goto(`${BASE}/`, { waitUntil: 'domcontentloaded' });
    await page.fill('[data-testid="token"]', token);
    await page.click('[data-testid="login"]');
    await page.waitForFunction((n) => (document.querySelector('[data-testid="whoami"]')?.textContent || '').includes(n), tenantName);
}

// Uncaught errors and CSP violations seen so far (the latter in this document).
export async function pageProblems() {
    const csp = state.page ? await state.page.evaluate(() => window.__csp || []).catch(() => []) : [];
    return [...state.pageErrors, ...csp.map((v) => `CSP violation: ${v}`)];
}

export function screenshot(name) {
    return state.page.screenshot({ path: path.join(OUT, name), fullPage: true });
}

async function finish(code, message) {
    if (message) console.log(message);
    if (code !== 0 && state.page) await screenshot('failure.png').catch(() => {});
    if (state.context) await state.context.close().catch(() => {});
    if (state.profile) fs.rmSync(state.profile, { recursive: true, force: true });
    process.exit(code);
}

// Runs main() under an overall deadline and exits with the protocol above.
export function run(main, totalMs) {
    const deadline = setTimeout(() => {
        finish(1, `FAIL: overall deadline of ${totalMs / 1000} s passed after ${state.checks} checks`);
    }, totalMs);
    main().then(
        () => { clearTimeout(deadline); return finish(0, `ok ${state.checks} checks`); },
        (e) => { clearTimeout(deadline); return finish(1, `FAIL: ${e.message}`); },
    );
}
