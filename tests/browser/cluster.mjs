// Browser test of the cluster page (#/cluster) against a running stack.
//
//   GANTRY_URL=http://127.0.0.1:18080 GANTRY_ADMIN_TOKEN=... GANTRY_TEST_OUT=dir \
//     node tests/browser/cluster.mjs
//
// As a member of a fresh tenant: the page lists the workers, shows the
// tenant's slot bar (and other tenants only folded into "other tenants"),
// and once a few placement jobs have run, draws their busy intervals on the
// timeline without a reload. Saves cluster.png. Prints "ok N checks" or the
// failing check (and failure.png), exit 0 or 1.
import {
    ADMIN, assert, check, http, launch, login, pageProblems, requireEnv, run, screenshot, tenantWithMember, waitJob,
} from './lib.mjs';
import { layeredGraph } from './graphs.mjs';

requireEnv('cluster.mjs');
const JOBS = 4;

async function main() {
    let tenant, member;
    await check('admin creates a tenant and a member token', async () => {
        ({ tenant, token: member } = await tenantWithMember('cluster-team'));
    });
    let workers;
    await check('GET /v1/cluster answers with workers', async () => {
        const c = await http('GET', '/v1/cluster', ADMIN);
        workers = Array.isArray(c.workers) ? c.workers : [];
        assert(workers.length >= 1, `no workers in ${JSON.stringify(c).slice(0, 200)}`);
    });

    const page = await launch();
    await check('member logs in', async () => { await login(page, member, tenant.name); });
    await check('the Cluster link opens the cluster page', async () => {
        await page.click('[data-testid="nav-cluster"]');
        await page.waitForSelector('[data-testid="cluster-workers"]');
        await page.waitForSelector('[data-testid="cluster-loading"]', { state: 'detached' });
    });
    await check('every registered worker has a row', async () => {
        await page.waitForFunction((n) => document.querySelectorAll('[data-testid="cluster-worker-row"]').length >= n, workers.length);
        const ids = await page.$$eval('[data-testid="cluster-worker-row"]', (rows) => rows.map((r) => r.dataset.workerId));
        for (const w of workers) assert(ids.includes(w.id), `no row for ${w.id}; rows: ${ids.join(', ')}`);
    });
    await check('the timeline chart has a row per worker', async () => {
        await page.waitForSelector('[data-testid="cluster-timeline"] canvas');
        const rows = Number(await page.getAttribute('[data-testid="cluster-timeline"]', 'data-rows'));
        assert(rows >= workers.length, `data-rows=${rows}, ${workers.length} workers`);
    });
    await check("the tenant's slot bar is shown, other tenants only as 'other tenants'", async () => {
        await page.waitForSelector(`[data-testid="cluster-tenant-row"][data-tenant-id="${tenant.id}"]`);
        const name = await page.textContent(`[data-testid="cluster-tenant-row"][data-tenant-id="${tenant.id}"] [data-testid="cluster-tenant-name"]`);
        assert(name.trim() === tenant.name, `row shows "${name}"`);
        const ids = await page.$$eval('[data-testid="cluster-tenant-row"]', (rows) => rows.map((r) => r.dataset.tenantId));
        assert(ids.every((id) => id === tenant.id || id === 'other'), `member sees tenant rows ${ids.join(', ')}`);
    });

    const jobs = [];
    await check(`member submits ${JOBS} placement jobs`, async () => {
        const graph = layeredGraph({ layers: 20, width: 20, devices: 2 });
        for (let i = 0; i < JOBS; i++) {
            const j = await http('POST', '/v1/jobs', member, { type: 'placement', name: `cluster-${i}`, spec: { graph } });
            assert(j && j.id, 'no job id');
            jobs.push(j.id);
        }
    });
    await check('the jobs succeed', async () => {
        for (const id of jobs) {
            const j = await waitJob(member, id, 40000);
            assert(j.state === 'succeeded', `${id} ended ${j.state}: ${j.error || ''}`);
        }
    });
    await check('their busy intervals are drawn on the timeline, live', async () => {
        await page.waitForFunction((n) => Number(document.querySelector('[data-testid="cluster-timeline"]')?.dataset.intervals || 0) >= n,
            JOBS, { timeout: 15000 }).catch(async () => {
            const n = await page.getAttribute('[data-testid="cluster-timeline"]', 'data-intervals');
            throw new Error(`data-intervals=${n}, expected at least ${JOBS}`);
        });
        const perRow = await page.$$eval('[data-testid="cluster-worker-row"]', (rows) => rows.map((r) => Number(r.dataset.intervals || 0)));
        assert(perRow.some((n) => n >= 1), `no worker row reports a drawn interval: ${perRow.join(', ')}`);
    });
    await check('the API timeline holds the jobs with their ids (own tenant)', async () => {
        const t = await http('GET', '/v1/cluster/timeline?minutes=15', member);
        const seen = new Set(t.intervals.map((i) => i.job_id));
        for (const id of jobs) assert(seen.has(id), `job ${id} is not in the timeline`);
        assert(t.intervals.every((i) => i.tenant === tenant.id || (i.tenant === 'other' && i.job_id === null)),
            'another tenant is visible by id');
    });
    await check('the legend names the tenant and the job types', async () => {
        const text = await page.textContent('[data-testid="cluster-legend"]');
        assert(text.includes(tenant.name) && text.includes('placement'), `legend: "${text}"`);
    });
    await check('the queue chart has points from several polls', async () => {
        await page.waitForFunction(() => Number(document.querySelector('[data-testid="cluster-queue-chart"]')?.dataset.points || 0) >= 3);
        await page.waitForSelector('[data-testid="cluster-queue-chart"] canvas');
    });
    await check('the page says when it was updated and reports no error or stale data', async () => {
        const upd = await page.textContent('[data-testid="cluster-updated"]');
        assert(/updated \d{4}-\d\d-\d\d \d\d:\d\d:\d\d/.test(upd), `updated text "${upd}"`);
        assert(await page.$('[data-testid="cluster-error"]') === null, 'an error notice is shown');
        assert(await page.$('[data-testid="cluster-stale"]') === null, 'a stale-data notice is shown');
    });
    await check('hovering a busy interval shows its job', async () => {
        // Walk the timeline's rows at the right edge (the recent jobs) until the tooltip appears.
        const box = await page.locator('[data-testid="cluster-timeline"] .u-over').boundingBox();
        assert(box, 'no plot area');
        const rows = Number(await page.getAttribute('[data-testid="cluster-timeline"]', 'data-rows'));
        let text = '';
        for (let r = 0; r < rows && !text; r++) {
            const y = box.y + ((r + 0.5) * box.height) / rows;
            for (let x = box.x + box.width - 2; x > box.x + box.width - 60 && !text; x -= 2) {
                await page.mouse.move(x, y);
                if (await page.isVisible('[data-testid="cluster-tooltip"]')) text = await page.textContent('[data-testid="cluster-tooltip"]');
            }
        }
        assert(text, 'no tooltip near the right edge of any row');
        assert(/tenant/.test(text) && /(job j_|another tenant's job)/.test(text), `tooltip "${text}"`);
        await page.mouse.move(0, 0);
    });
    await screenshot('cluster.png');
    await check('no uncaught errors or CSP violations in the page', async () => {
        const problems = await pageProblems();
        assert(problems.length === 0, problems.join(' | '));
    });
}

run(main, 90000);
