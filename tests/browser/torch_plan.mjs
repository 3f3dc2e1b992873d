// Browser test of the plan view on a real PyTorch model's graph (issue 21 part
// 2: "the plan view shows the models' own op names").
//
//   GANTRY_URL=... GANTRY_ADMIN_TOKEN=... GANTRY_TEST_OUT=dir GANTRY_PLAN_GRAPH=graph.json \
//     node tests/browser/torch_plan.mjs
//
// GANTRY_PLAN_GRAPH: a graph tools/torch_export.py wrote (test_browser.py passes
// tests/data/graphs/torch_resnet50.json with devices too small for the whole
// model: one device cannot hold it). As a member: submits a placement job on it,
// waits, opens the plan page, and hovers along every device's op lane: the
// tooltips name the exporter's ops (e.g. layer1_0_conv1), each one an op of the
// graph, on at least two devices. Saves torch-plan.png. Prints "ok N checks" or
// the failing check.
import fs from 'node:fs';
import {
    BASE, assert, check, http, launch, login, pageProblems, requireEnv, run, screenshot, tenantWithMember, waitJob,
} from './lib.mjs';

requireEnv('torch_plan.mjs');
const GRAPH = process.env.GANTRY_PLAN_GRAPH || '';
// gantt.js's layout for up to 8 devices: the time axis, then rows of 50 px whose op lane's middle is 17 px down
const AXIS = 24, ROW = 50, LANE_MIDDLE = 17;

async function main() {
    assert(GRAPH && fs.existsSync(GRAPH), 'set GANTRY_PLAN_GRAPH to an exported graph (JSON)');
    const graph = JSON.parse(fs.readFileSync(GRAPH, 'utf8'));
    const names = new Set(graph.ops.map((o) => o.name));
    let tenant, member, job;
    await check('admin creates a tenant and a member token', async () => {
        ({ tenant, token: member } = await tenantWithMember('torch-plan-team'));
    });
    await check(`member submits a placement job on the exported graph (${graph.ops.length} ops, ${graph.devices.length} devices)`, async () => {
        job = await http('POST', '/v1/jobs', member,
            { type: 'placement', name: 'torch-plan', spec: { graph, algorithms: ['m-topo', 'm-etf', 'm-sct'] } }, 30000);
        job = await waitJob(member, job.id, 60000);
        assert(job.state === 'succeeded', `ended ${job.state}: ${job.error || ''}`);
        assert(job.result.best !== 'single' && job.result.metrics.devices_used >= 2,
            `best ${job.result.best} on ${job.result.metrics.devices_used} device(s): the devices are not small enough`);
        assert(job.result.plan && job.result.plan.schedule, 'the result has no plan.schedule');
    });

    const page = await launch();
    await check('member logs in and opens the plan view', async () => {
        await login(page, member, tenant.name);
        await page.goto(`${BASE}/#/jobs/${encodeURIComponent(job.id)}/plan`);
        await page.waitForFunction(() => Number(document.querySelector('[data-testid="gantt"]')?.dataset.frame || 0) >= 1);
    });
    const seen = new Map(); // op name -> device row
    await check('hovering the op lanes names the exporter\'s ops on every used device', async () => {
        const box = await page.locator('[data-testid="gantt-canvas"]').boundingBox();
        const rows = graph.devices.length;
        for (let d = 0; d < rows; d++) {
            for (let x = box.x + 136; x < box.x + box.width - 14; x += 5) {
                await page.mouse.move(x, box.y + AXIS + d * ROW + LANE_MIDDLE);
                const name = await page.$eval('[data-testid="gantt-tooltip"]', (t) => (t.hidden ? '' : t.firstChild?.textContent || ''));
                if (name && !seen.has(name)) seen.set(name, d);
            }
        }
        await page.mouse.move(0, 0);
        const shown = [...seen.keys()];
        const foreign = shown.filter((n) => !names.has(n));
        assert(shown.length >= 5, `only ${shown.length} op names in the tooltips: ${JSON.stringify(shown)}`);
        assert(foreign.length === 0, `tooltips name ops the graph does not have: ${JSON.stringify(foreign.slice(0, 5))}`);
        assert(new Set(seen.values()).size >= 2, `op names on ${new Set(seen.values()).size} device row(s) only`);
        assert(shown.some((n) => /^layer\d+_\d+_conv\d$/.test(n)), `no ResNet block convolution among ${JSON.stringify(shown.slice(0, 20))}`);
        console.log(`  (${shown.length} op names seen, e.g. ${shown.filter((n) => n.startsWith('layer')).slice(0, 4).join(', ')})`);
    });
    await screenshot('torch-plan.png');
    await check('no uncaught errors or CSP violations in the page', async () => {
        const problems = await pageProblems();
        assert(problems.length === 0, problems.join(' | '));
    });
}

run(main, 150000);
