// Browser test of a program job (the PyTorch example, 2 ranks) on its page and
// on the Cluster page, every number against the API's.
//
//   GANTRY_URL=... GANTRY_ADMIN_TOKEN=... GANTRY_TEST_OUT=dir GANTRY_PYTORCH_ROOT=root \
//     node tests/browser/program.mjs
//
// GANTRY_PYTORCH_ROOT: a directory holding deploy/examples/pytorch as
// "pytorch", with a slice of Fashion-MNIST in pytorch/data (test_browser.py's
// pytorch_root), so that the example's 3 epochs take seconds. As a member of a
// fresh tenant with that root: opens the Cluster page, submits the example's
// job.json (its data dir pointed at the slice) and checks, while both ranks
// run, that slots per tenant are the API's (2 for this tenant) and add up to at
// most the cluster's slots, and that the job's interval is drawn on both
// workers; then on the job page that its progress is the API's (or "—" when
// the API has none, never a false 0%), and at the end that the Loss, Accuracy
// and Throughput charts hold exactly the points GET .../metrics returns,
// against the x its lines carry (epoch, or step); back on the Cluster page,
// that each worker's Busy is its merged intervals' share of the window, never
// above 100%. Saves program.png and program-cluster.png.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { ADMIN, assert, check, http, launch, login, pageProblems, requireEnv, run, screenshot, tenantWithMember, waitJob } from './lib.mjs';

requireEnv('program.mjs');
const ROOT = process.env.GANTRY_PYTORCH_ROOT || '';
const HERE = path.dirname(fileURLToPath(import.meta.url));
const isNum = (v) => typeof v === 'number' && Number.isFinite(v);
const secs = (iso) => Date.parse(iso) / 1000;

// Polls fn() (truthy: done) until a deadline; the last falsy reason in the error.
async function until(what, fn, ms = 30000) {
    const end = Date.now() + ms;
    let last = '';
    for (;;) {
        const r = await fn();
        if (r === true) return;
        last = r || last;
        if (Date.now() > end) throw new Error(`${what}: not within ${ms / 1000} s (${last})`);
        await new Promise((res) => setTimeout(res, 250));
    }
}

// The share of [from, to] the intervals cover, overlaps merged (what Busy must say).
function merged(ivs, from, to) {
    const parts = ivs.map(([s, e]) => [Math.max(s, from), Math.min(e, to)]).filter(([s, e]) => e > s).sort((a, b) => a[0] - b[0]);
    let sum = 0, cs = null, ce = null;
    for (const [s, e] of parts) {
        if (ce !== null && s <= ce) { ce = Math.max(ce, e); continue; }
        if (ce !== null) sum += ce - cs;
        [cs, ce] = [s, e];
    }
    if (ce !== null) sum += ce - cs;
    return sum / (to - from);
}

async function main() {
    assert(ROOT && fs.existsSync(path.join(ROOT, 'pytorch', 'train.py')), 'set GANTRY_PYTORCH_ROOT to a root holding pytorch/train.py');
    let tenant, member, job;
    await check('admin creates a tenant with the root and a member token', async () => {
        ({ tenant, token: member } = await tenantWithMember('program-team'));
        await http('PATCH', `/v1/tenants/${encodeURIComponent(tenant.id)}`, ADMIN, { roots: [ROOT] });
    });
    const page = await launch({ width: 1280, height: 1000 });
    await check('member logs in and opens the Cluster page', async () => {
        await login(page, member, tenant.name);
        await page.evaluate(() => { location.hash = '#/cluster'; });
        await page.waitForSelector('[data-testid="cluster-worker-row"]');
    });
    await check("member submits the PyTorch example's job.json (2 ranks) on the data slice", async () => {
        const spec = JSON.parse(fs.readFileSync(path.join(HERE, '..', '..', 'deploy', 'examples', 'pytorch', 'job.json'), 'utf8'));
        spec.name = 'pytorch-slice';
        spec.spec.program.env = { ...(spec.spec.program.env || {}), FASHION_MNIST_DIR: 'data' };
        spec.spec.model_name = 'fashion-cnn-slice';
        job = await http('POST', '/v1/jobs', member, spec);
        assert(job && job.id, 'no job id');
    });

    await check('while both ranks run: slots per tenant as the API says, at most the cluster\'s, the job on both workers', async () => {
        await until('the API shows 2 slots in use by the tenant', async () => {
            const c = await http('GET', '/v1/cluster', member);
            const mine = c.tenants.find((t) => t.id === tenant.id);
            const j = await http('GET', `/v1/jobs/${job.id}`, member);
            if (['succeeded', 'failed', 'cancelled'].includes(j.state)) throw new Error(`the job ended (${j.state}) before both ranks were seen`);
            return (mine && mine.slots_used === 2) || `slots_used ${mine && mine.slots_used}`;
        }, 90000);
        await until('the page shows the API\'s slots per tenant', async () => {
            const api = await http('GET', '/v1/cluster', member);
            const want = Object.fromEntries(api.tenants.map((t) => [t.id, t.slots_used]));
            const shown = await page.$$eval('[data-testid="cluster-tenant-row"]', (rows) => rows.map((r) => [r.dataset.tenantId, Number(r.dataset.slotsUsed)]));
            const total = Number(await page.getAttribute('[data-testid="cluster-tenants"]', 'data-cluster-slots'));
            const sum = shown.reduce((n, [, u]) => n + u, 0);
            if (sum > total) throw new Error(`the tenants use ${sum} slots of the cluster's ${total}`);
            const same = shown.length === Object.keys(want).length && shown.every(([id, u]) => want[id] === u);
            return (same && want[tenant.id] === 2 && total === api.workers.length) || `page ${JSON.stringify(shown)} of ${total}, API ${JSON.stringify(want)}`;
        });
        await until('the timeline draws the job on both workers', async () => {
            const tl = await http('GET', '/v1/cluster/timeline?minutes=15', member);
            const workers = [...new Set(tl.intervals.filter((iv) => iv.job_id === job.id).map((iv) => iv.worker))];
            if (workers.length < 2) return `the API has the job on ${workers.length} worker(s)`;
            const drawn = await page.$$eval('[data-testid="cluster-worker-row"]', (rows) => Object.fromEntries(rows.map((r) => [r.dataset.workerId, Number(r.dataset.intervals)])));
            return workers.every((w) => drawn[w] >= 1) || `drawn per worker ${JSON.stringify(drawn)}`;
        });
        await screenshot('program-cluster.png');
    });

    await check('the job page: progress as the API says ("—" without one, never a false 0%)', async () => {
        await page.evaluate((id) => { location.hash = `#/jobs/${id}`; }, job.id);
        await page.waitForSelector('[data-testid="job-progress"]');
        await until('the page\'s progress matches the API\'s', async () => {
            const j = await http('GET', `/v1/jobs/${job.id}`, member);
            const text = (await page.textContent('[data-testid="job-progress"]')).trim();
            const want = isNum(j.progress) ? `${Math.round(j.progress * 100)}%` : '—';
            return text === want || `page "${text}", API ${j.progress} (${j.state})`;
        });
    });

    let done;
    await check('the job succeeds', async () => {
        done = await waitJob(member, job.id, 180000);
        assert(done.state === 'succeeded', `job ${done.state}: ${done.error || ''}`);
    });
    await check('its Loss, Accuracy and Throughput charts hold the points GET .../metrics returns', async () => {
        const pts = (await http('GET', `/v1/jobs/${job.id}/metrics`, member)).points.filter((p) => !isNum(p.rank) || p.rank === 0);
        assert(pts.length >= 3, `the API has ${pts.length} points`);
        const charts = { loss: 'loss', accuracy: 'test_accuracy', throughput: 'samples_per_s' };
        for (const [id, key] of Object.entries(charts)) {
            await page.waitForSelector(`[data-testid="curve-${id}"] canvas`);
            await until(`the ${id} chart holds every point`, async () => {
                const ds = await page.$eval(`[data-testid="curve-${id}"]`, (el) => ({ ...el.dataset }));
                const x = ds.x;
                if (x !== 'epoch' && x !== 'step') return `drawn against ${x}`;
                const at = new Map();
                for (const p of pts) if (isNum(p[x])) at.set(p[x], { ...(at.get(p[x]) || {}), ...p });
                const xs = [...at.keys()].sort((a, b) => a - b);
                const want = xs.map((v) => (isNum(at.get(v)[key]) ? at.get(v)[key] : null));
                const got = ds.series ? JSON.parse(ds.series)[key] : null;
                return (JSON.stringify(JSON.parse(ds.xs || '[]')) === JSON.stringify(xs) && JSON.stringify(got) === JSON.stringify(want) &&
                    want.some((v) => v !== null)) || `x ${x}: page ${ds.xs} ${JSON.stringify(got)}, API ${JSON.stringify(xs)} ${JSON.stringify(want)}`;
            });
        }
        const last = pts[pts.length - 1];
        const shown = await page.textContent('[data-testid="fact-test_accuracy"]');
        assert(shown === `${(100 * last.test_accuracy).toFixed(2)}%`, `test accuracy shown "${shown}", API ${last.test_accuracy}`);
        await until('the progress shows 100% as the API says', async () => {
            const text = (await page.textContent('[data-testid="job-progress"]')).trim();
            return (done.progress === 1 && text === '100%') || `page "${text}", API ${done.progress}`;
        });
    });
    await screenshot('program.png');

    await check('the Cluster page: each worker\'s Busy is its merged intervals\' share of the window, never above 100%', async () => {
        await page.evaluate(() => { location.hash = '#/cluster'; });
        await page.waitForSelector('[data-testid="cluster-worker-busy"]');
        await until('Busy matches the API\'s intervals', async () => {
            const busy = await page.$$eval('[data-testid="cluster-worker-row"]', (rows) => rows.map((r) => [r.dataset.workerId,
                r.querySelector('[data-testid="cluster-worker-busy"]').dataset.busy]));
            const tl = await http('GET', '/v1/cluster/timeline?minutes=15', member);
            const from = secs(tl.from), to = secs(tl.to);
            const ran = new Set(tl.intervals.filter((iv) => iv.job_id === job.id && iv.end).map((iv) => iv.worker));
            if (ran.size < 2) return `the job's closed intervals are on ${ran.size} worker(s)`;
            for (const [w, b] of busy) {
                const v = Number(b);
                if (!(v >= 0 && v <= 1)) throw new Error(`worker ${w}: Busy ${b}`);
                const ivs = tl.intervals.filter((iv) => iv.worker === w).map((iv) => [secs(iv.start), iv.end ? secs(iv.end) : to]);
                const want = merged(ivs, from, to);
                if (Math.abs(v - want) > 0.01) return `worker ${w}: page ${v}, API ${want}`;
                if (ran.has(w) && !(v > 0)) return `worker ${w} ran the job but shows Busy ${v}`;
            }
            return true;
        });
    });
    await check('no uncaught errors or CSP violations in the page', async () => {
        const problems = await pageProblems();
        assert(problems.length === 0, problems.join(' | '));
    });
}

run(main, 280000);
