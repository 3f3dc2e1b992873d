// Browser test of the training page for adaptive and model-selection jobs.
//
//   GANTRY_URL=http://127.0.0.1:18080 GANTRY_ADMIN_TOKEN=... GANTRY_TEST_OUT=dir \
//     node tests/browser/selection.mjs
//
// As a member of a fresh tenant, on a stack with 2 workers: a 2-worker job whose
// global batch adapts to the gradient noise scale shows its adaptations under
// "Resizes and adaptations"; a grid search run by model hopping shows one row
// per configuration (best first) and a chart of test accuracy per
// configuration.  Saves selection.png.
import { assert, check, http, launch, login, pageProblems, requireEnv, run, screenshot, tenantWithMember, waitJob } from './lib.mjs';

requireEnv('selection.mjs');

const MODEL = { input: [1, 28, 28], layers: [{ type: 'flatten' }, { type: 'dense', units: 32 }, { type: 'relu' }, { type: 'dense', units: 10 }] };
const BASE = { model: MODEL, dataset: { name: 'fashion-mnist' }, optimizer: { type: 'adam', lr: 0.001 }, seed: 1, workers: 2 };

async function main() {
    let tenant, member, adapt, search;
    await check('admin creates a tenant and a member token', async () => {
        ({ tenant, token: member } = await tenantWithMember('selection-team'));
    });
    await check('the member submits an adaptive job and a grid search', async () => {
        adapt = await http('POST', '/v1/jobs', member, {
            type: 'training', name: 'adaptive',
            spec: { ...BASE, batch_size: 32, steps: 400, progress_every_steps: 20,
                policies: [{ name: 'adaptive_batch', min: 16, max: 512, every_steps: 50, warmup_steps: 50 }] },
        });
        search = await http('POST', '/v1/jobs', member, {
            type: 'training', name: 'search',
            spec: { ...BASE, batch_size: 64, epochs: 1, search: { type: 'grid', params: { 'optimizer.lr': [0.0003, 0.003], 'model.layers.1.units': [16, 32] } } },
        });
        assert(adapt && adapt.id && search && search.id, 'no job ids');
    });
    const page = await launch();
    await check('member logs in', async () => { await login(page, member, tenant.name); });
    await check('the adaptive job lists its batch-size changes', async () => {
        const done = await waitJob(member, adapt.id, 180000);
        assert(done.state === 'succeeded', `job ${done.state}: ${done.error || ''}`);
        await page.evaluate((id) => { location.hash = `#/jobs/${id}`; }, adapt.id);
        await page.waitForSelector('[data-testid="curve-event"]', { timeout: 30000 });
        const rows = await page.$$eval('[data-testid="curve-event"]', (r) => r.map((x) => x.textContent));
        assert(rows.some((t) => /batch_size/.test(t) && /global batch 32 -> /.test(t)), rows.join(' | '));
    });
    await check('the grid search shows a row per configuration, best first, and its chart', async () => {
        const done = await waitJob(member, search.id, 180000);
        assert(done.state === 'succeeded', `job ${done.state}: ${done.error || ''}`);
        await page.evaluate((id) => { location.hash = `#/jobs/${id}`; }, search.id);
        await page.waitForSelector('[data-testid="config-row"]', { timeout: 30000 });
        await page.waitForSelector('[data-testid="curve-configs"] canvas', { timeout: 30000 });
        const rows = await page.$$eval('[data-testid="config-row"]', (r) => r.map((x) => [...x.children].map((c) => c.textContent)));
        assert(rows.length === 4, `${rows.length} rows`);
        const accs = rows.map((r) => Number(r[3].replace('%', '')));
        assert(accs.every((a, i) => i === 0 || a <= accs[i - 1]), `not best first: ${accs}`);
        assert(/optimizer\.lr = /.test(rows[0][1]), rows[0][1]);
        assert(Number(rows[0][0]) === done.result.metrics.best, `best ${done.result.metrics.best}, first row ${rows[0][0]}`);
    });
    await screenshot('selection.png');
    await check('no uncaught errors or CSP violations in the page', async () => {
        const problems = await pageProblems();
        assert(problems.length === 0, problems.join(' | '));
    });
}

run(main, 400000);
