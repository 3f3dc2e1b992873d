// Browser test of the dashboard opened from a link that carries a token in its fragment.
//
//   GANTRY_URL=http://127.0.0.1:18080 GANTRY_ADMIN_TOKEN=... GANTRY_TEST_OUT=dir \
//     node tests/browser/token_link.mjs
//
// http://HOST/#token=TOKEN&to=/jobs/ID opens the job's page logged in, with the token out of the
// address bar at once (history.replaceState) and in no request's URL (a fragment is never sent);
// the token is kept in the tab's session storage as the login form keeps it, so a reload stays
// logged in.  A link with a token the server refuses shows the login form with the 401 message,
// and its token leaves the address bar too (pasted into a tab already open on the dashboard).  Saves token_link.png.
import { assert, check, http, launch, pageProblems, requireEnv, run, screenshot, tenantWithMember, waitJob, BASE, WAIT_MS } from './lib.mjs';

requireEnv('token_link.mjs');

const GRAPH = {
    ops: [{ name: 'a', compute_us: 10, output_bytes: [100] }, { name: 'b', compute_us: 20, output_bytes: [100] }],
    edges: [{ src: 'a', dst: 'b', bytes: 100 }],
    devices: [{ name: 'd0', memory_bytes: 1000000 }],
    comm: { latency_us: 5, bytes_per_us: 100 },
};

async function main() {
    let tenant, member, job;
    await check('admin creates a tenant and a member token; the member runs a job', async () => {
        ({ tenant, token: member } = await tenantWithMember('link-team'));
        job = await http('POST', '/v1/jobs', member, { type: 'placement', name: 'linked', spec: { graph: GRAPH, algorithms: ['m-topo'] } });
        assert((await waitJob(member, job.id, 60000)).state === 'succeeded', 'the job did not succeed');
    });
    const page = await launch();
    const urls = [];
    page.on('request', (r) => urls.push(r.url()));
    await check('a link with the token opens the job page, logged in', async () => {
        await page.goto(`${BASE}/#token=${encodeURIComponent(member)}&to=${encodeURIComponent(`/jobs/${job.id}`)}`);
        await page.waitForFunction((n) => (document.querySelector('[data-testid="whoami"]')?.textContent || '').includes(n), tenant.name);
        await page.waitForFunction((id) => document.body.textContent.includes(id) &&
            [...document.querySelectorAll('h1')].some((x) => x.textContent.includes('linked')), job.id, { timeout: WAIT_MS });
    });
    await check('the token is out of the address bar and of every request URL, kept in session storage', async () => {
        assert(page.url() === `${BASE}/#/jobs/${job.id}`, `address bar: ${page.url()}`);
        assert(urls.length > 0 && urls.every((u) => !u.includes(member)), urls.filter((u) => u.includes(member)).join(' '));
        const kept = await page.evaluate(() => Object.values(sessionStorage));
        assert(kept.includes(member), 'not in session storage');
        assert(await page.evaluate(() => history.length) <= 2, 'a history entry was added');
    });
    await check('a reload stays logged in (the saved token), with the token nowhere in the URL', async () => {
        await page.reload();
        await page.waitForFunction((n) => (document.querySelector('[data-testid="whoami"]')?.textContent || '').includes(n), tenant.name);
        assert(!page.url().includes(member), page.url());
    });
    await screenshot('token_link.png');
    await check('a refused token: the login form says so, and the token leaves the address bar', async () => {
        await page.evaluate(() => sessionStorage.clear());
        await page.goto(`${BASE}/#token=gty_not_a_token_0123`); // pasted into the open tab: a hash change
        try { // (the tab reloads itself with the token: the form comes from the new page)
            await page.waitForSelector('[data-testid="login-error"]', { timeout: 40000 });
        } catch (e) {
            const main = await page.evaluate(() => `${location.href} | ${document.body ? document.body.innerText.slice(0, 300) : ''}`).catch((x) => String(x));
            throw new Error(`${e.message}; the page: ${main}`);
        }
        const text = await page.textContent('[data-testid="login-error"]');
        assert(/401/.test(text), text);
        assert(!page.url().includes('gty_not_a_token'), page.url());
    });
    await check('no uncaught errors or CSP violations in the page', async () => {
        const problems = await pageProblems();
        assert(problems.length === 0, problems.join(' | '));
    });
}

run(main, 120000);
