// Browser test: the Gantt chart's labels never overlap, on the transformer
// plan of deploy/examples/placement.json (4 blocks on 3 GPUs).
//
//   GANTRY_URL=... GANTRY_ADMIN_TOKEN=... GANTRY_TEST_OUT=dir node tests/browser/plan_labels.mjs
//
// As a member: submits the example as it ships, waits, opens the plan view and
// reads every label the chart drew (data-labels: [x0, x1, y0, y1, text] in CSS
// px): op names, the makespan and lower bound markers, the time axis. No two
// boxes may intersect, at full view, zoomed into the busiest stretch and at a
// narrow window width; op names are drawn (not all hidden). Saves
// plan-labels.png.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { BASE, assert, check, http, launch, login, pageProblems, requireEnv, run, screenshot, tenantWithMember, waitJob } from './lib.mjs';

requireEnv('plan_labels.mjs');
const HERE = path.dirname(fileURLToPath(import.meta.url));

async function labels(page, afterFrame) {
    await page.waitForFunction((f) => Number(document.querySelector('[data-testid="gantt"]')?.dataset.frame || 0) > f, afterFrame);
    return page.$eval('[data-testid="gantt"]', (g) => ({ frame: Number(g.dataset.frame), labels: JSON.parse(g.dataset.labels || '[]'), hidden: Number(g.dataset.labelsHidden) }));
}

function overlaps(list) {
    const out = [];
    for (let i = 0; i < list.length; i++)
        for (let j = i + 1; j < list.length; j++) {
            const [a, b] = [list[i], list[j]];
            if (a[0] < b[1] && b[0] < a[1] && a[2] < b[3] && b[2] < a[3]) out.push(`"${a[4]}" and "${b[4]}"`);
        }
    return out;
}

async function main() {
    const example = JSON.parse(fs.readFileSync(path.join(HERE, '..', '..', 'deploy', 'examples', 'placement.json'), 'utf8'));
    let tenant, member, job;
    await check('admin creates a tenant and a member token', async () => {
        ({ tenant, token: member } = await tenantWithMember('plan-labels-team'));
    });
    await check('member submits the transformer placement example', async () => {
        job = await http('POST', '/v1/jobs', member, example, 30000);
        job = await waitJob(member, job.id, 60000);
        assert(job.state === 'succeeded', `ended ${job.state}: ${job.error || ''}`);
        assert(job.result.plan && job.result.plan.schedule, 'the result has no plan.schedule');
    });
    const page = await launch();
    let last = 0;
    await check('full view: op names drawn, no two labels overlap', async () => {
        await login(page, member, tenant.name);
        await page.goto(`${BASE}/#/jobs/${encodeURIComponent(job.id)}/plan`);
        const l = await labels(page, 0);
        last = l.frame;
        const ops = new Set(example.spec.graph.ops.map((o) => o.name));
        const opLabels = l.labels.filter(([, , , , t]) => ops.has(t.replace(/…$/, '')) || [...ops].some((n) => t.endsWith('…') && n.startsWith(t.slice(0, -1))));
        assert(opLabels.length >= 3, `only ${opLabels.length} op names drawn of ${l.labels.length} labels`);
        const bad = overlaps(l.labels);
        assert(bad.length === 0, `${bad.length} overlapping: ${bad.slice(0, 5).join('; ')}`);
    });
    await screenshot('plan-labels.png');
    await check('zoomed in (wheel) and at a narrow width: still no overlap', async () => {
        const box = await page.locator('[data-testid="gantt-canvas"]').boundingBox();
        await page.mouse.move(box.x + box.width * 0.4, box.y + 60);
        for (let i = 0; i < 3; i++) {
            await page.mouse.wheel(0, -300);
            const l = await labels(page, last);
            last = l.frame;
            const bad = overlaps(l.labels);
            assert(bad.length === 0, `zoom ${i + 1}: ${bad.length} overlapping: ${bad.slice(0, 5).join('; ')}`);
        }
        await page.setViewportSize({ width: 640, height: 900 });
        const l = await labels(page, last);
        const bad = overlaps(l.labels);
        assert(bad.length === 0, `narrow: ${bad.length} overlapping: ${bad.slice(0, 5).join('; ')}`);
    });
    await check('no uncaught errors or CSP violations in the page', async () => {
        const problems = await pageProblems();
        assert(problems.length === 0, problems.join(' | '));
    });
}

run(main, 120000);
