// Browser test of an inference job's curves on the job page against a running stack.
//
//   GANTRY_URL=http://127.0.0.1:18080 GANTRY_ADMIN_TOKEN=... GANTRY_TEST_OUT=dir \
//     node tests/browser/inference.mjs
//
// As a member of a fresh tenant: trains a small model, serves it, sends
// predictions for a few seconds, and checks that the job page shows the
// request rate, p99 latency against the SLO and the replica count, filling
// live, and in its summary the replicas and the SLO (with its attainment) the
// API's metrics report, and no progress. Saves inference.png. The job scales to
// zero (replicas.min 0, idle_s 3): the page says so once the API does, and counts
// the cold start of the next request.
import { assert, check, http, launch, login, pageProblems, requireEnv, run, screenshot, tenantWithMember, waitJob } from './lib.mjs';

requireEnv('inference.mjs');

async function main() {
    let tenant, member, serve;
    await check('admin creates a tenant and a member token', async () => {
        ({ tenant, token: member } = await tenantWithMember('inference-team'));
    });
    await check('a training job registers a model', async () => {
        const t = await http('POST', '/v1/jobs', member, {
            type: 'training', name: 'web-mlp',
            spec: {
                model: { input: [1, 28, 28], layers: [{ type: 'flatten' }, { type: 'dense', units: 32 }, { type: 'relu' }, { type: 'dense', units: 10 }] },
                dataset: { name: 'fashion-mnist' }, optimizer: { type: 'adam', lr: 0.001 }, batch_size: 64, steps: 200, seed: 1,
            },
        });
        const done = await waitJob(member, t.id, 120000);
        assert(done.state === 'succeeded', `training ${done.state}: ${done.error || ''}`);
    });
    await check('an inference job serves it', async () => {
        serve = await http('POST', '/v1/jobs', member, {
            type: 'inference', name: 'web-serve',
            // replicas.min 0: scaled to zero 3 s after the predictions stop (checked below)
            spec: { model: 'web-mlp', slo: { latency_ms: 50, percentile: 99 }, replicas: { min: 0, max: 2 }, idle_s: 3 },
        });
        const until = Date.now() + 60000;
        for (;;) {
            try {
                await http('GET', '/v2/models/web-mlp/ready', member);
                break;
            } catch (e) {
                if (Date.now() > until) throw e;
                await new Promise((r) => setTimeout(r, 200));
            }
        }
    });
    const page = await launch();
    await check('member logs in and opens the job page', async () => {
        await login(page, member, tenant.name);
        await page.evaluate((id) => { location.hash = `#/jobs/${id}`; }, serve.id);
        await page.waitForSelector('[data-testid="curves"]');
    });
    await check('predictions for a few seconds fill the rate, p99 and replicas (live)', async () => {
        const body = { inputs: [{ name: 'input', shape: [1, 1, 28, 28], datatype: 'FP32', data: new Array(784).fill(0.5) }] };
        const until = Date.now() + 6000;
        let n = 0;
        while (Date.now() < until) {
            await http('POST', '/v2/models/web-mlp/infer', member, body);
            n++;
        }
        assert(n > 20, `only ${n} predictions`);
        await page.waitForFunction(() => /\d/.test(document.querySelector('[data-testid="fact-rate"]')?.textContent || ''), null, { timeout: 30000 });
        await page.waitForFunction(() => /%/.test(document.querySelector('[data-testid="fact-slo_attainment"]')?.textContent || ''), null, { timeout: 30000 });
        await page.waitForSelector('[data-testid="curve-rate"] canvas');
        await page.waitForSelector('[data-testid="curve-p99_ms"] canvas');
        await page.waitForFunction(() => /\d/.test(document.querySelector('[data-testid="fact-replicas"]')?.textContent || ''), null, { timeout: 30000 });
    });
    await check('the summary shows replicas and the SLO as the API says, no progress', async () => {
        const terms = await page.$$eval('[data-testid="job-summary"] dt', (dts) => dts.map((d) => d.textContent));
        assert(!terms.includes('Progress') && terms.includes('Replicas') && terms.includes('SLO'), `summary terms ${terms.join(', ')}`);
        const end = Date.now() + 20000;
        for (;;) {
            const pts = (await http('GET', `/v1/jobs/${serve.id}/metrics`, member)).points;
            const last = (k) => [...pts].reverse().find((p) => typeof p[k] === 'number');
            const rep = last('replicas'), att = last('slo_attainment');
            const shown = await page.$eval('[data-testid="job-replicas"]', (e) => e.dataset.replicas);
            const slo = await page.$eval('[data-testid="job-slo"]', (e) => ({ text: e.textContent, attainment: e.dataset.attainment }));
            const ok = rep && shown === String(rep.replicas) && slo.text.startsWith('p99 ≤ 50.0 ms') && att && slo.attainment === String(att.slo_attainment);
            if (ok) break;
            if (Date.now() > end) throw new Error(`page replicas ${shown}, SLO "${slo.text}" (${slo.attainment}); API replicas ${rep && rep.replicas}, attainment ${att && att.slo_attainment}`);
            await new Promise((r) => setTimeout(r, 250));
        }
    });
    await screenshot('inference.png');
    await check('idle, the job scales to zero and its page says so (as the API)', async () => {
        const end = Date.now() + 40000;
        for (;;) {
            const pts = (await http('GET', `/v1/jobs/${serve.id}/metrics`, member)).points;
            const rep = [...pts].reverse().find((p) => typeof p.replicas === 'number');
            const cell = await page.$eval('[data-testid="job-replicas"]', (e) => ({ zero: e.dataset.scaledToZero, text: e.textContent }));
            if (rep && rep.replicas === 0 && rep.target === 0 && cell.zero === 'true' && cell.text.includes('scaled to zero')) break;
            if (Date.now() > end) throw new Error(`page "${cell.text}" (${cell.zero}); API replicas ${rep && rep.replicas} target ${rep && rep.target}`);
            await new Promise((r) => setTimeout(r, 250));
        }
    });
    await check('a request wakes it: answered, and the page counts the cold start', async () => {
        // (the page may have opened on a job asleep already: the predictions above woke it once)
        const colds = async () => {
            const pts = (await http('GET', `/v1/jobs/${serve.id}/metrics`, member)).points;
            const p = [...pts].reverse().find((q) => typeof q.cold_starts === 'number');
            return p ? p.cold_starts : 0;
        };
        const before = await colds();
        const body = { inputs: [{ name: 'input', shape: [1, 1, 28, 28], datatype: 'FP32', data: new Array(784).fill(0.5) }] };
        const r = await http('POST', '/v2/models/web-mlp/infer', member, body);
        assert(Array.isArray(r.outputs), `no outputs: ${JSON.stringify(r).slice(0, 200)}`);
        const want = `${before + 1} cold start${before + 1 === 1 ? '' : 's'}`;
        try {
            await page.waitForFunction((w) => (document.querySelector('[data-testid="job-replicas"]')?.textContent || '').includes(w),
                want, { timeout: 30000 });
        } catch (e) {
            const shown = await page.$eval('[data-testid="job-replicas"]', (el) => el.textContent);
            throw new Error(`page "${shown}", want "${want}"; the API counts ${await colds()} (${before} before)`);
        }
        assert(await colds() === before + 1, `the API counts ${await colds()} cold starts, the page ${want}`);
    });
    await check('cancel stops the job', async () => {
        await http('POST', `/v1/jobs/${serve.id}/cancel`, member);
        const j = await waitJob(member, serve.id, 30000);
        assert(j.state === 'cancelled', j.state);
    });
    await check('no uncaught errors or CSP violations in the page', async () => {
        const problems = await pageProblems();
        assert(problems.length === 0, problems.join(' | '));
    });
}

run(main, 240000);
