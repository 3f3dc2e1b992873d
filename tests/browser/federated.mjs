// Browser test of a federated job's page against a running stack whose workers are labelled
// site=s0, s1, s2.
//
//   GANTRY_URL=... GANTRY_ADMIN_TOKEN=... GANTRY_TEST_OUT=dir node tests/browser/federated.mjs
//
// As a member: submits a 3-site SecureD-FL job on Fashion-MNIST split across the sites, opens its
// page, and checks the per-round curves (test accuracy, consensus residual, bytes), the facts,
// and the communication groups of the design once it has finished.  Saves federated.png.
import { assert, check, http, launch, login, pageProblems, requireEnv, run, screenshot, tenantWithMember, waitJob } from './lib.mjs';

requireEnv('federated.mjs');
const MODEL = { input: [1, 28, 28], layers: [{ type: 'flatten' }, { type: 'dense', units: 32 }, { type: 'relu' }, { type: 'dense', units: 10 }] };

async function main() {
    let tenant, member, job;
    await check('admin creates a tenant and a member token', async () => {
        ({ tenant, token: member } = await tenantWithMember('fed-team'));
    });
    await check('the member submits a federated job over three sites', async () => {
        const sites = [0, 1, 2].map((i) => ({ name: `s${i}`, dataset: { name: 'fashion-mnist', partition: { sites: 3, index: i, alpha: 0.5, seed: 1 } } }));
        job = await http('POST', '/v1/jobs', member, {
            type: 'federated', name: 'fed-page',
            spec: { model: MODEL, optimizer: { type: 'adam', lr: 0.002 }, batch_size: 32, local_steps: 30, rounds: 4, seed: 1, sites },
        });
        assert(job && job.id, 'no job id');
    });
    const page = await launch();
    await check('member logs in', async () => { await login(page, member, tenant.name); });
    await check('the job page draws the rounds and the groups', async () => {
        await page.evaluate((id) => { location.hash = `#/jobs/${id}`; }, job.id);
        const done = await waitJob(member, job.id, 180000);
        assert(done.state === 'succeeded', `job ${done.state}: ${done.error || ''}`);
        await page.waitForSelector('[data-testid="curve-test_accuracy"] canvas', { timeout: 30000 });
        await page.waitForSelector('[data-testid="curve-residual"] canvas', { timeout: 30000 });
        await page.waitForFunction(() => (document.querySelector('[data-testid="fact-round"]')?.textContent || '') === '4', null, { timeout: 30000 });
        await page.waitForSelector('[data-testid="design-class"]', { timeout: 30000 });
        const rows = await page.$$eval('[data-testid="design-class"]', (r) => r.map((x) => x.textContent));
        assert(rows.length === done.result.design.classes, `${rows.length} classes shown`);
        assert(/\{s0, s1, s2\}/.test(rows[0]), rows[0]);
    });
    await screenshot('federated.png');
    await check('no uncaught errors or CSP violations in the page', async () => {
        const problems = await pageProblems();
        assert(problems.length === 0, problems.join(' | '));
    });
}

run(main, 240000);
