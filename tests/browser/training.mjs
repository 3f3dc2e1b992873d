// Browser test of a training job's curves on the job page against a running stack.
//
//   GANTRY_URL=http://127.0.0.1:18080 GANTRY_ADMIN_TOKEN=... GANTRY_TEST_OUT=dir \
//     node tests/browser/training.mjs
//
// As a member of a fresh tenant: submits a real training job (an MLP on
// Fashion-MNIST), opens its page while it runs, and checks that the loss,
// accuracy and throughput charts fill live from the event stream (the step
// shown grows without a reload), that test accuracy appears, and that at the
// end the page shows the final step. Saves training.png.
import { assert, check, http, launch, login, pageProblems, requireEnv, run, screenshot, tenantWithMember, waitJob } from './lib.mjs';

requireEnv('training.mjs');
const STEPS = 2500;

async function main() {
    let tenant, member, job;
    await check('admin creates a tenant and a member token', async () => {
        ({ tenant, token: member } = await tenantWithMember('training-team'));
    });
    await check('the member submits a training job', async () => {
        job = await http('POST', '/v1/jobs', member, {
            type: 'training', name: 'curves',
            spec: {
                model: { input: [1, 28, 28], layers: [{ type: 'flatten' }, { type: 'dense', units: 64 }, { type: 'relu' }, { type: 'dense', units: 10 }] },
                dataset: { name: 'fashion-mnist' }, optimizer: { type: 'adam', lr: 0.001 },
                batch_size: 64, steps: STEPS, seed: 1, eval_every_steps: 250, progress_every_steps: 25,
            },
        });
        assert(job && job.id, 'no job id');
    });
    const page = await launch();
    await check('member logs in', async () => { await login(page, member, tenant.name); });
    await check('the job page shows the curves section with charts', async () => {
        await page.evaluate((id) => { location.hash = `#/jobs/${id}`; }, job.id);
        await page.waitForSelector('[data-testid="curves"]');
        await page.waitForSelector('[data-testid="curve-loss"] canvas', { timeout: 60000 });
    });
    let first = 0;
    await check('the step shown grows while the job runs (live, no reload)', async () => {
        await page.waitForFunction(() => /\d/.test(document.querySelector('[data-testid="fact-step"]')?.textContent || ''), null, { timeout: 60000 });
        first = Number((await page.textContent('[data-testid="fact-step"]')).replace(/,/g, ''));
        await page.waitForFunction((f) => {
            const t = document.querySelector('[data-testid="fact-step"]')?.textContent || '';
            return Number(t.replace(/,/g, '')) > f;
        }, first, { timeout: 60000 });
    });
    await check('test accuracy and the time split are shown', async () => {
        await page.waitForFunction(() => /%/.test(document.querySelector('[data-testid="fact-test_accuracy"]')?.textContent || ''), null, { timeout: 60000 });
        const split = await page.textContent('[data-testid="time-split"]');
        assert(/compute \d+%/.test(split), `time split "${split}"`);
    });
    await screenshot('training.png');
    await check('at the end the page shows the final step', async () => {
        const done = await waitJob(member, job.id, 120000);
        assert(done.state === 'succeeded', `job ${done.state}: ${done.error || ''}`);
        await page.waitForFunction((n) => (document.querySelector('[data-testid="fact-step"]')?.textContent || '').replace(/,/g, '') === String(n), STEPS, { timeout: 30000 });
        const accs = await page.$$eval('[data-testid="curve-accuracy"] canvas', (c) => c.length);
        assert(accs >= 1, 'no accuracy chart');
    });
    await check('no uncaught errors or CSP violations in the page', async () => {
        const problems = await pageProblems();
        assert(problems.length === 0, problems.join(' | '));
    });
}

run(main, 240000);
