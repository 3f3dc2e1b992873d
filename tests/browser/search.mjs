// Browser test of a hyper-parameter search's page (web/search.js), every number
// against the API's.
//
//   GANTRY_URL=... GANTRY_ADMIN_TOKEN=... GANTRY_TEST_OUT=dir GANTRY_TOKEN=<member token> \
//     GANTRY_TENANT=<its tenant's name> GANTRY_SEARCH_JOB='<the job as JSON>' node tests/browser/search.mjs
//
// tests/integration/test_search_browser.py gives a tenant a root with
// test_search.py's fake program (no torch) and passes an ASHA search over it.
// As that tenant's member: logs in, submits the search, opens its page and,
// while it runs, waits for a row per trial the API lists with the API's state
// (a trial started after the page opened included: no reload) and a curve;
// once the API says it ended, checks without a reload: the summary's state, a
// row per trial with the API's state, parameters, last value and resource
// (formatted as web/format.js does, and raw in data-*), rung decisions and
// failures, the API's best marked, rows best first for the mode and trials
// without a value last; the chart holds one series per trial that reported,
// exactly the points of its job's GET .../metrics, stopped, failed and
// cancelled trials faded (uPlot's alpha < 1), the best one the widest, dashed
// marks at the API's rungs; clicking the headers sorts by the metric both ways,
// by a parameter and by trial number. After a reload the table is the API's
// again. Saves search.png (search-running.png while it ran).
import { assert, check, http, launch, login, pageProblems, requireEnv, run, screenshot } from './lib.mjs';
import { fmtMetric } from '../../web/format.js';

requireEnv('search.mjs');
const TOKEN = process.env.GANTRY_TOKEN || '';
const TENANT = process.env.GANTRY_TENANT || '';
const JOB = process.env.GANTRY_SEARCH_JOB || '';
const isNum = (v) => typeof v === 'number' && Number.isFinite(v);
const FADED = ['stopped', 'failed', 'cancelled'];

// Polls fn() (true: done; a string: why not yet) until a deadline.
async function until(what, fn, ms = 30000) {
    const end = Date.now() + ms;
    let last = '';
    for (;;) {
        const r = await fn();
        if (r === true) return;
        last = r || last;
        if (Date.now() > end) throw new Error(`${what}: not within ${ms / 1000} s (${last})`);
        await new Promise((res) => setTimeout(res, 200));
    }
}

// What the table shows, row by row in page order.
function readRows(page) {
    return page.$$eval('[data-testid="search-trial-row"]', (rows) => rows.map((r) => ({
        trial: Number(r.dataset.trial), jobId: r.dataset.jobId, state: r.dataset.state, best: r.dataset.best === 'true',
        value: r.dataset.value, resource: r.dataset.resource,
        stateText: r.querySelector('[data-testid="trial-state"]').textContent.trim(),
        valueText: r.querySelector('[data-testid="trial-value"]').textContent.trim(),
        resourceText: r.querySelector('[data-testid="trial-resource"]').textContent.trim(),
        rungsText: r.querySelector('[data-testid="trial-rungs"]').textContent.trim(),
        failuresText: r.querySelector('[data-testid="trial-failures"]').textContent.trim(),
        bestTag: !!r.querySelector('[data-testid="search-best-tag"]'),
        params: [...r.querySelectorAll('[data-testid="trial-param"]')].map((c) => [c.dataset.param, c.dataset.value, c.textContent.trim()]),
    })));
}

// The rows the API's trials must give, in the order asked (key: 'value', 'trial' or
// 'param:NAME'; desc or not), without a value last, ties by trial number.
function expectedOrder(trials, key, desc) {
    const val = (t) => (key === 'value' ? (t.last && isNum(t.last.value) ? t.last.value : null) :
        key === 'trial' ? t.trial : t.params[key.slice(6)] ?? null);
    return trials.slice().sort((a, b) => {
        const va = val(a), vb = val(b);
        if (va === null || vb === null) return va === vb ? a.trial - b.trial : va === null ? 1 : -1;
        return (desc ? vb - va : va - vb) || a.trial - b.trial;
    }).map((t) => t.trial);
}

const rungText = (rungs) => rungs.slice().sort((a, b) => a.rung - b.rung).map((r) => `r${r.rung} ${r.continued ? '✓' : '✗'}`).join(' ');
const paramText = (name, v) => (isNum(v) ? fmtMetric(name, v) : typeof v === 'string' ? v : JSON.stringify(v));

// Every cell of every row against the API's trials; null when they agree, else why not.
function rowsDisagree(rows, api) {
    if (rows.length !== api.trials.length) return `${rows.length} rows, the API has ${api.trials.length} trials`;
    const byTrial = new Map(api.trials.map((t) => [t.trial, t]));
    for (const r of rows) {
        const t = byTrial.get(r.trial);
        if (!t) return `row for trial ${r.trial}, which the API does not list`;
        const want = {
            jobId: t.job_id, state: t.state, stateText: t.state, best: t.trial === api.best, bestTag: t.trial === api.best,
            value: t.last && isNum(t.last.value) ? String(t.last.value) : '', valueText: fmtMetric(api.metric, t.last ? t.last.value : null),
            resource: t.last && isNum(t.last.resource) ? String(t.last.resource) : '', resourceText: fmtMetric(api.resource, t.last ? t.last.resource : null),
            rungsText: rungText(t.rungs) || '—', failuresText: String(t.failures),
        };
        for (const [k, v] of Object.entries(want)) if (r[k] !== v) return `trial ${t.trial}: ${k} page ${JSON.stringify(r[k])}, API ${JSON.stringify(v)}`;
        const names = Object.keys(t.params).sort();
        const got = JSON.stringify(r.params);
        const exp = JSON.stringify(names.map((n) => [n, JSON.stringify(t.params[n]), paramText(n, t.params[n])]));
        if (got !== exp) return `trial ${t.trial}: params page ${got}, API ${exp}`;
    }
    return null;
}

async function main() {
    assert(TOKEN && TENANT && JOB, 'set GANTRY_TOKEN, GANTRY_TENANT and GANTRY_SEARCH_JOB');
    const page = await launch({ width: 1280, height: 1100 });
    await check('member logs in', () => login(page, TOKEN, TENANT));
    let id;
    await check('member submits the ASHA search and opens its page', async () => {
        const job = await http('POST', '/v1/jobs', TOKEN, JSON.parse(JOB));
        assert(job && job.id, 'no job id');
        id = job.id;
        await page.evaluate((jid) => { location.hash = `#/jobs/${jid}`; }, id);
        await page.waitForSelector('[data-testid="search-trials"]');
    });
    const first = (await http('GET', `/v1/jobs/${id}/trials`, TOKEN)).trials.length;

    await check('while it runs: a row per trial the API lists, with its state, a trial started after the page opened among them, and curves', async () => {
        await until('the page shows the running search as the API does', async () => {
            const [job, api] = await Promise.all([http('GET', `/v1/jobs/${id}`, TOKEN), http('GET', `/v1/jobs/${id}/trials`, TOKEN)]);
            if (job.state !== 'running') throw new Error(`the search is ${job.state} before the page was seen to follow it`);
            const rows = await readRows(page);
            if (rows.length <= first) return `${rows.length} rows, ${first} when the page opened`;
            const pageStates = JSON.stringify(rows.map((r) => [r.trial, r.state]).sort((a, b) => a[0] - b[0]));
            const apiStates = JSON.stringify(api.trials.map((t) => [t.trial, t.state]));
            if (pageStates !== apiStates) return `states page ${pageStates}, API ${apiStates}`;
            const shown = await page.getAttribute('[data-testid="search-summary"]', 'data-state');
            if (shown !== 'running') return `summary says ${shown}`;
            const series = await page.getAttribute('[data-testid="search-chart"]', 'data-series');
            if (!series || Object.keys(JSON.parse(series)).length === 0) return 'no curve yet';
            return true;
        }, 90000);
        await screenshot('search-running.png');
    });

    let api;
    await check('the search succeeds with some trials stopped by ASHA', async () => {
        const end = Date.now() + 150000;
        for (;;) {
            const j = await http('GET', `/v1/jobs/${id}`, TOKEN);
            if (['succeeded', 'failed', 'cancelled'].includes(j.state)) {
                assert(j.state === 'succeeded', `search ${j.state}: ${j.error || ''}`);
                break;
            }
            if (Date.now() > end) throw new Error(`search still ${j.state}`);
            await new Promise((r) => setTimeout(r, 250));
        }
        api = await http('GET', `/v1/jobs/${id}/trials`, TOKEN);
        assert(api.trials.length === api.max_trials, `${api.trials.length} trials of ${api.max_trials}`);
        assert(api.trials.some((t) => t.state === 'stopped'), `no trial stopped: ${JSON.stringify(api.trials.map((t) => t.state))}`);
        assert(Number.isInteger(api.best), `no best: ${api.best}`);
    });

    await check('without a reload: the summary says succeeded, every row is the API\'s trial, best first for the mode', async () => {
        await until('the table matches the API', async () => {
            const summary = await page.$eval('[data-testid="search-summary"]', (el) => ({ ...el.dataset }));
            if (summary.state !== 'succeeded') return `summary state ${summary.state}`;
            if (summary.started !== String(api.trials.length)) return `summary started ${summary.started}`;
            const rows = await readRows(page);
            const why = rowsDisagree(rows, api);
            if (why) return why;
            const want = expectedOrder(api.trials, 'value', api.mode === 'max');
            const got = rows.map((r) => r.trial);
            return JSON.stringify(got) === JSON.stringify(want) || `order ${got}, want ${want} (best first, ${api.mode})`;
        });
        const best = await page.getAttribute('[data-testid="search-best"]', 'data-trial');
        assert(best === String(api.best), `best shown ${best}, API ${api.best}`);
        const text = await page.textContent('[data-testid="search-best"]');
        const b = api.trials.find((t) => t.trial === api.best);
        assert(text.includes(`trial ${b.trial}`) && text.includes(fmtMetric(api.metric, b.last.value)), `best line "${text}"`);
    });

    await check('the chart: a series per trial that reported, exactly its job\'s points; stopped ones faded, the best widest; marks at the rungs', async () => {
        const want = {};
        for (const t of api.trials) {
            const pts = (await http('GET', `/v1/jobs/${t.job_id}/metrics`, TOKEN)).points;
            const at = new Map();
            for (const p of pts) if (isNum(p[api.resource]) && isNum(p[api.metric]) && (!isNum(p.rank) || p.rank === 0)) at.set(p[api.resource], p[api.metric]);
            if (at.size) want[t.trial] = at;
        }
        assert(Object.keys(want).length >= 2, `only ${Object.keys(want).length} trials reported`);
        await until('the chart holds the API\'s points', async () => {
            const ds = await page.$eval('[data-testid="search-chart"]', (el) => ({ ...el.dataset }));
            if (!ds.series || !ds.trials) return 'not drawn yet';
            const xs = JSON.parse(ds.xs);
            const series = JSON.parse(ds.series);
            const gotTrials = Object.keys(series).map(Number).sort((a, b) => a - b);
            const wantTrials = Object.keys(want).map(Number).sort((a, b) => a - b);
            if (JSON.stringify(gotTrials) !== JSON.stringify(wantTrials)) return `series for trials ${gotTrials}, reported ${wantTrials}`;
            const allX = [...new Set(Object.values(want).flatMap((m) => [...m.keys()]))].sort((a, b) => a - b);
            if (JSON.stringify(xs) !== JSON.stringify(allX)) return `xs ${ds.xs}, API ${JSON.stringify(allX)}`;
            for (const t of wantTrials) {
                const exp = allX.map((x) => (want[t].has(x) ? want[t].get(x) : null));
                if (JSON.stringify(series[t]) !== JSON.stringify(exp)) return `trial ${t}: page ${JSON.stringify(series[t])}, API ${JSON.stringify(exp)}`;
            }
            const looks = JSON.parse(ds.trials);
            if (JSON.stringify(looks.map((l) => l.trial).sort((a, b) => a - b)) !== JSON.stringify(wantTrials)) return `drawn ${ds.trials}`;
            const byTrial = new Map(api.trials.map((t) => [t.trial, t]));
            const bestLook = looks.find((l) => l.trial === api.best);
            if (!bestLook || bestLook.alpha !== 1) return `the best trial ${api.best} drawn ${JSON.stringify(bestLook)}`;
            for (const l of looks) {
                const st = byTrial.get(l.trial).state;
                if (l.state !== st) return `trial ${l.trial} drawn as ${l.state}, API ${st}`;
                if (l.trial === api.best) continue;
                if (FADED.includes(st) ? !(l.alpha < 1) : l.alpha !== 1) return `trial ${l.trial} (${st}) drawn with alpha ${l.alpha}`;
                if (!(l.width < bestLook.width)) return `trial ${l.trial} as wide as the best (${l.width})`;
            }
            if (!looks.some((l) => l.alpha < 1)) return 'no faded series';
            if (ds.rungs !== JSON.stringify(api.rungs) || ds.rungsDrawn !== JSON.stringify(api.rungs)) return `rungs ${ds.rungs}, drawn ${ds.rungsDrawn}, API ${JSON.stringify(api.rungs)}`;
            return true;
        });
        assert(await page.$('[data-testid="search-chart"] canvas'), 'no canvas');
    });
    await screenshot('search.png');

    await check('sorting: the metric header flips to worst first and back, then a parameter and the trial number, trials without a value last', async () => {
        const sortBy = async (key, desc, what) => {
            await page.click(`[data-testid="search-sort"][data-sort="${key}"]`);
            const want = expectedOrder(api.trials, key, desc);
            await until(what, async () => {
                const got = (await readRows(page)).map((r) => r.trial);
                const aria = await page.$eval(`[data-testid="search-sort"][data-sort="${key}"]`, (b) => b.parentElement.getAttribute('aria-sort'));
                return (JSON.stringify(got) === JSON.stringify(want) && aria === (desc ? 'descending' : 'ascending')) ||
                    `order ${got} (aria-sort ${aria}), want ${want}`;
            }, 5000);
        };
        const bestFirst = api.mode === 'max';
        await sortBy('value', !bestFirst, 'worst first');
        await sortBy('value', bestFirst, 'best first again');
        const name = Object.keys(api.trials[0].params).sort()[0];
        await sortBy(`param:${name}`, false, `by ${name}`);
        await sortBy('trial', false, 'by trial number');
        await sortBy('trial', true, 'by trial number, descending');
        const focused = await page.evaluate(() => document.activeElement?.dataset?.sort);
        assert(focused === 'trial', `focus on ${focused} after the re-render`);
    });

    await check('after a reload: the table is the API\'s, best first', async () => {
        await page.reload({ waitUntil: 'domcontentloaded' });
        await page.waitForSelector('[data-testid="search-trial-row"]');
        await until('the table matches the API after the reload', async () => {
            const rows = await readRows(page);
            const why = rowsDisagree(rows, api);
            if (why) return why;
            const got = rows.map((r) => r.trial);
            const want = expectedOrder(api.trials, 'value', api.mode === 'max');
            return JSON.stringify(got) === JSON.stringify(want) || `order ${got}, want ${want}`;
        });
        assert(!(await page.$('[data-testid="logs-pane"] [data-testid="logs"]')), 'a search shows a log pane of its own');
    });
    await check('no uncaught errors or CSP violations in the page', async () => {
        const problems = await pageProblems();
        assert(problems.length === 0, problems.join(' | '));
    });
}

run(main, 280000);
