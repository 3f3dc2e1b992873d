// A hyper-parameter search on its job page (docs/search.md): the search's state
// and best trial, every trial's metric against the budget's resource on one
// chart (stopped, failed and cancelled trials faded, the best one thick, a
// dashed line at each rung), and a table of the trials sortable by any column
// (best first by default). Everything comes from GET /v1/jobs/{id}/trials and
// each trial's GET /v1/jobs/{job_id}/metrics. job.js mounts it for a job whose
// spec has a program and a search, and calls update(job) after each fetch of
// the search job; events of the trials' jobs on the live stream refetch too (at
// most one round per second, one at a time).
import { api, jobPath } from './api.js';
import { h, replace, notice } from './dom.js';
import { loadUplot, widthOf, xMarks } from './charts.js';
import { COUNT_INCRS } from './curves.js';
import { deviceColor } from './colors.js';
import { badge, fmtMetric, isTerminal } from './format.js';

const MIN_REFETCH_MS = 1000;
const METRICS_PARALLEL = 4;      // trials' metrics fetched at once
const POLL_MS = 5000;            // a round this often while a trial runs (events may come before a round knows the job)
const LEGEND_MAX_TRIALS = 24;    // above: no legend under the chart (the table names them)
const DATASET_MAX_X = 2000;      // data-xs and data-series only up to this many x values
export const FADED_ALPHA = 0.3;
export const FADED_STATES = new Set(['stopped', 'failed', 'cancelled']);
const STATE_ORDER = ['running', 'paused', 'succeeded', 'stopped', 'failed', 'cancelled'];

const isNum = (v) => typeof v === 'number' && Number.isFinite(v);
const isObj = (v) => !!v && typeof v === 'object' && !Array.isArray(v);

// A job with a program and a search (the search runs on the server; its trials are jobs).
export const isSearch = (spec) => isObj(spec) && isObj(spec.program) && isObj(spec.search);

// One trial's curve from its job's points (the API's rank-0 points, in the order
// they arrived): [[resource, value], ...] sorted by resource, for the points that
// carry both; at an equal resource the later point wins.
export function trialCurve(points, resource, metric) {
    const at = new Map();
    for (const p of Array.isArray(points) ? points : []) {
        if (!isObj(p) || (isNum(p.rank) && p.rank !== 0)) continue;
        if (isNum(p[resource]) && isNum(p[metric])) at.set(p[resource], p[metric]);
    }
    return [...at.entries()].sort((a, b) => a[0] - b[0]);
}

// The last point of the points that has the metric: {value, resource} (resource
// null when that point has none), as the trials API's "last" says it; null when none.
export function lastReported(points, resource, metric) {
    const pts = Array.isArray(points) ? points : [];
    for (let i = pts.length - 1; i >= 0; i--) {
        const p = pts[i];
        if (!isObj(p) || (isNum(p.rank) && p.rank !== 0) || !isNum(p[metric])) continue;
        return { value: p[metric], resource: isNum(p[resource]) ? p[resource] : null };
    }
    return null;
}

// Curves [[x, y], ...] (one per series) -> uPlot's [xs, ys0, ys1, ...] over the
// union of their x; a series is null where it has no point (drawn across with spanGaps).
export function alignCurves(curves) {
    const all = new Set();
    for (const c of curves) for (const [x] of c) all.add(x);
    const xs = [...all].sort((a, b) => a - b);
    const index = new Map(xs.map((x, i) => [x, i]));
    return [xs, ...curves.map((c) => {
        const ys = new Array(xs.length).fill(null);
        for (const [x, y] of c) ys[index.get(x)] = y;
        return ys;
    })];
}

// A trial's rung decisions: "r0 ✓ r1 ✗" (✓ continued, ✗ stopped), in rung order; a
// search that pauses (data.pause): "r0 ↑ r1 ⏸" (↑ promoted, ⏸ paused there, not promoted).
export function rungText(rungs, pause = false) {
    return (Array.isArray(rungs) ? rungs : []).filter(isObj).slice().sort((a, b) => a.rung - b.rung)
        .map((r) => `r${r.rung} ${r.continued ? (pause ? '↑' : '✓') : (pause ? '⏸' : '✗')}`).join(' ');
}

// The jobs whose metrics make a trial's curve: with pause, every run of the trial in order
// (each resumed from the checkpoint where the last ended); else its current job (a retry
// starts over).
export function curveJobs(t, pause) {
    const jobs = pause && Array.isArray(t.jobs) && t.jobs.length ? t.jobs : [t.job_id];
    return jobs.filter((j) => typeof j === 'string' && j);
}

// The parameter names across the trials, in name order.
export function paramNames(trials) {
    const names = new Set();
    for (const t of Array.isArray(trials) ? trials : []) if (isObj(t.params)) for (const k of Object.keys(t.params)) names.add(k);
    return [...names].sort();
}

// The value a column sorts a trial by; null sorts last whatever the direction.
export function sortValue(t, key) {
    if (key === 'trial') return t.trial;
    if (key === 'value') return isObj(t.last) && isNum(t.last.value) ? t.last.value : null;
    if (key === 'resource') return isObj(t.last) && isNum(t.last.resource) ? t.last.resource : null;
    if (key === 'failures') return isNum(t.failures) ? t.failures : null;
    if (key === 'state') { const i = STATE_ORDER.indexOf(t.state); return i < 0 ? STATE_ORDER.length : i; }
    // how far the trial went through the rungs: 2 per decision, one less when the last stopped it
    if (key === 'rungs') {
        const rs = (Array.isArray(t.rungs) ? t.rungs : []).filter(isObj);
        if (!rs.length) return 0;
        const last = rs.reduce((a, b) => (b.rung > a.rung ? b : a));
        return 2 * rs.length - (last.continued ? 0 : 1);
    }
    if (key.startsWith('param:')) {
        const v = isObj(t.params) ? t.params[key.slice(6)] : undefined;
        return v === undefined || v === null ? null : v;
    }
    return null;
}

function compareValues(a, b) {
    if (isNum(a) && isNum(b)) return a - b;
    if (isNum(a) !== isNum(b)) return isNum(a) ? -1 : 1; // numbers before strings and booleans
    return String(a).localeCompare(String(b), 'en', { numeric: true });
}

// The direction a column sorts in when first clicked: the metric best first (per
// the search's mode), every other column ascending.
export function defaultDir(key, mode) {
    return key === 'value' && mode !== 'min' ? 'desc' : 'asc';
}

// The trials sorted by a column ('trial', 'state', 'value', 'resource', 'rungs',
// 'failures' or 'param:<name>'), dir 'asc' or 'desc'; those without a value last,
// ties by trial number.
export function sortTrials(trials, key, dir) {
    const sign = dir === 'desc' ? -1 : 1;
    return (Array.isArray(trials) ? trials : []).slice().sort((a, b) => {
        const va = sortValue(a, key), vb = sortValue(b, key);
        if (va === null || vb === null) {
            if (va !== vb) return va === null ? 1 : -1;
        } else {
            const c = compareValues(va, vb);
            if (c !== 0) return sign * c;
        }
        return a.trial - b.trial;
    });
}

// How a series is drawn: the best trial full and thick; stopped, failed and
// cancelled ones faded and thin; the rest full.
export function seriesLook(t, best) {
    if (t.trial === best) return { alpha: 1, width: 3 };
    if (FADED_STATES.has(t.state)) return { alpha: FADED_ALPHA, width: 1.25 };
    return { alpha: 1, width: 1.75 };
}

// A parameter's value as shown: numbers as a metric of that name would be, the rest as text.
export function fmtParam(name, v) {
    if (isNum(v)) return fmtMetric(name, v);
    if (v === undefined || v === null) return '—';
    return typeof v === 'string' ? v : JSON.stringify(v);
}

// The view in root; update(job) refetches (throttled) with the search job's latest state.
export function mountSearch(root, { id, live, signal }) {
    const summary = h('div', { class: 'search-summary', 'data-testid': 'search-summary' });
    const status = h('div', {});
    const chartNote = h('div', {});
    const host = h('div', { class: 'curve search-chart', 'data-testid': 'search-chart' });
    const figure = h('figure', { class: 'search-figure', hidden: true },
        h('figcaption', {}, 'Every trial\'s metric against the resource'), host,
        h('p', { class: 'muted legend-note' },
            'Faded: stopped, failed or cancelled. Thick: the best trial. Dashed lines: the rungs (r0, r1, …).'));
    const tableBox = h('div', { class: 'table-scroll' });
    replace(root, status, summary, chartNote, figure, h('h3', {}, 'Trials'), tableBox);

    let job = null, data = null;            // the search job (from job.js), the last trials answer
    const curves = new Map();               // trial -> {key, curve, last, rechecked}
    let sort = null;                        // {key, dir}; null: the metric, best first
    let uPlot = null, plot = null, plotKey = '', dataKey = '';
    let inflight = false, dirty = false, lastStart = 0, timer = null, poll = null;
    let trialJobs = new Set();

    loadUplot().then((u) => { uPlot = u; draw(); },
        (e) => replace(chartNote, notice('error', e.message, 'search-chart-error')));
    const off = live ? live.on('job', (ev) => { if (trialJobs.has(ev.job_id)) refresh(); }) : () => {};
    signal.addEventListener('abort', () => { off(); clearTimeout(timer); clearTimeout(poll); if (plot) plot.destroy(); plot = null; });
    return { update };

    // the summary shows the job's state with the trials of the round after it (never
    // a finished search beside trials still running from an older answer)
    function update(j) {
        job = j;
        refresh();
    }

    // One round at a time, rounds at least MIN_REFETCH_MS apart; calls during a
    // round cause exactly one more.
    async function refresh() {
        if (inflight) { dirty = true; return; }
        inflight = true;
        try {
            do {
                dirty = false;
                const wait = lastStart + MIN_REFETCH_MS - performance.now();
                if (wait > 0) await new Promise((r) => { timer = setTimeout(r, wait); });
                if (signal.aborted) return;
                lastStart = performance.now();
                await round();
            } while (dirty && !signal.aborted);
            replace(status);
        } catch (e) {
            if (signal.aborted) return;
            replace(status, notice('error', `Could not load the trials (${e && e.describe ? e.describe() : e.message})${data ? '; showing older data' : ''}.`,
                'search-error'));
        } finally {
            inflight = false;
            // while a trial runs, a round every POLL_MS whatever the stream says: an event of a trial's job
            // that came before a round had seen the job (a short trial) is not lost for good
            clearTimeout(poll);
            const live = data && Array.isArray(data.trials) && data.trials.some((t) => t.state === 'running' || t.state === 'paused');
            if (live && !signal.aborted) poll = setTimeout(refresh, POLL_MS);
        }
    }

    async function round() {
        const d = await api(`${jobPath(id)}/trials`, { signal });
        const trials = Array.isArray(d.trials) ? d.trials : [];
        trialJobs = new Set(trials.flatMap((t) => [t.job_id, ...(Array.isArray(t.jobs) ? t.jobs : [])]).filter(Boolean));
        // a trial's metrics are read again when what the trials API says of it changed
        // (its job, state, last value or rung decisions: a point with the metric changes
        // its last value in the transaction that stores the point)
        const stale = trials.filter((t) => t.job_id && (!curves.has(t.trial) || curves.get(t.trial).key !== trialKey(t)));
        let next = 0;
        const worker = async () => {
            while (next < stale.length) {
                const t = stale[next++];
                const pts = [];
                for (const j of curveJobs(t, d.pause)) {
                    const m = await api(`${jobPath(j)}/metrics`, { signal });
                    pts.push(...((m && m.points) || []));
                }
                curves.set(t.trial, {
                    key: trialKey(t), curve: trialCurve(pts, d.resource, d.metric), last: lastReported(pts, d.resource, d.metric), rechecked: false,
                });
            }
        };
        await Promise.all(Array.from({ length: Math.min(METRICS_PARALLEL, stale.length) }, worker));
        data = d;
        renderSummary();
        renderTable();
        draw();
        // a running trial's points may have moved on between the two answers: read the
        // trials once more (once per answer about it) so that the table catches up with the chart
        for (const t of trials) {
            const c = curves.get(t.trial);
            if (!c || t.state !== 'running' || c.rechecked || sameLast(c.last, t.last)) continue;
            c.rechecked = true;
            dirty = true;
        }
    }

    function renderSummary() {
        if (!data) return;
        const trials = Array.isArray(data.trials) ? data.trials : [];
        const counts = {};
        for (const t of trials) counts[t.state] = (counts[t.state] || 0) + 1;
        const order = [...STATE_ORDER, ...Object.keys(counts).filter((s) => !STATE_ORDER.includes(s))].filter((s) => counts[s]);
        const rungs = Array.isArray(data.rungs) ? data.rungs : [];
        const state = job ? job.state : '';
        const best = trials.find((t) => t.trial === data.best);
        summary.dataset.state = state || '';
        summary.dataset.started = String(trials.length);
        summary.dataset.counts = JSON.stringify(counts);
        replace(summary,
            h('p', {},
                'Search ', badge(state || '—'), ' · ',
                h('span', { class: 'mono' }, data.algorithm || '—'), ' on ',
                h('span', { class: 'mono' }, data.metric || '—'), ` (${data.mode === 'min' ? 'lower' : 'higher'} is better)`,
                rungs.length ? ` · rungs at ${data.resource} ${rungs.map((r) => fmtMetric(data.resource, r)).join(', ')}` : '',
                ' · ', h('span', { 'data-testid': 'search-started' }, `${trials.length} of ${data.max_trials} trials started`),
                `, ${data.parallel} at a time`,
                order.length ? ` · ${order.map((s) => `${counts[s]} ${s}`).join(', ')}` : ''),
            h('p', { 'data-testid': 'search-best', dataset: { trial: best ? String(best.trial) : '' } },
                best ? [
                    isTerminal(state) ? 'Best: ' : 'Best so far: ',
                    h('strong', {}, `trial ${best.trial}`), ' · ',
                    `${data.metric} ${fmtMetric(data.metric, best.last.value)}`,
                    isNum(best.last.resource) ? ` at ${data.resource} ${fmtMetric(data.resource, best.last.resource)}` : '',
                    isObj(best.params) && Object.keys(best.params).length
                        ? h('span', { class: 'muted' }, ` · ${Object.entries(best.params).map(([k, v]) => `${k} = ${fmtParam(k, v)}`).join(', ')}`) : '',
                ] : h('span', { class: 'muted' }, `No trial has reported ${data.metric} yet.`)),
            registered(job && job.result));
    }

    // what the finished search registered (result.registered), or why nothing (result.unregistered)
    function registered(r) {
        if (!isObj(r) || !('registered' in r)) return null;
        const g = r.registered;
        return h('p', { 'data-testid': 'search-registered', dataset: { model: isObj(g) ? String(g.model) : '', version: isObj(g) ? String(g.version) : '' } },
            isObj(g) ? ['Registered ', h('span', { class: 'mono' }, `${g.model} version ${g.version}`), ` from trial ${g.trial}`]
                : h('span', { class: 'muted' }, `Nothing registered${typeof r.unregistered === 'string' ? `: ${r.unregistered}` : ''}.`));
    }

    function renderTable() {
        const trials = Array.isArray(data.trials) ? data.trials : [];
        if (!trials.length) {
            replace(tableBox, h('p', { class: 'muted', 'data-testid': 'search-trials-empty' }, 'No trial has started yet.'));
            return;
        }
        const names = paramNames(trials);
        const s = sort || { key: 'value', dir: defaultDir('value', data.mode) };
        const focused = tableBox.contains(document.activeElement) ? document.activeElement.dataset.sort : null;
        const head = (key, label, cls = '') => {
            const on = s.key === key;
            return h('th', { scope: 'col', class: cls, 'aria-sort': on ? (s.dir === 'asc' ? 'ascending' : 'descending') : undefined },
                h('button', {
                    type: 'button', class: 'sort', 'data-testid': 'search-sort', dataset: { sort: key },
                    onclick: () => {
                        sort = on ? { key, dir: s.dir === 'asc' ? 'desc' : 'asc' } : { key, dir: defaultDir(key, data.mode) };
                        renderTable();
                    },
                }, label, h('span', { class: 'sort-mark', 'aria-hidden': 'true' }, on ? (s.dir === 'asc' ? ' ▲' : ' ▼') : '')));
        };
        const rows = sortTrials(trials, s.key, s.dir).map((t) => {
            const best = t.trial === data.best;
            const last = isObj(t.last) ? t.last : {};
            return h('tr', {
                'data-testid': 'search-trial-row',
                class: `${best ? 'best-row' : ''}${FADED_STATES.has(t.state) ? ' faded-row' : ''}`.trim() || undefined,
                dataset: {
                    trial: String(t.trial), jobId: t.job_id || '', state: t.state || '', best: best ? 'true' : 'false',
                    value: isNum(last.value) ? String(last.value) : '', resource: isNum(last.resource) ? String(last.resource) : '',
                },
            },
            h('th', { scope: 'row', class: 'num' },
                t.job_id ? h('a', { href: `#/jobs/${encodeURIComponent(t.job_id)}`, title: `job ${t.job_id}` }, String(t.trial)) : String(t.trial),
                best ? h('span', { class: 'tag', 'data-testid': 'search-best-tag' }, 'best') : null),
            h('td', { 'data-testid': 'trial-state', title: t.reason || undefined }, badge(t.state)),
            names.map((n) => {
                const v = isObj(t.params) ? t.params[n] : undefined;
                return h('td', {
                    class: isNum(v) ? 'num' : 'mono', 'data-testid': 'trial-param',
                    dataset: { param: n, value: v === undefined ? '' : JSON.stringify(v) }, title: v === undefined ? undefined : JSON.stringify(v),
                }, fmtParam(n, v));
            }),
            h('td', { class: 'num', 'data-testid': 'trial-value', title: isNum(last.value) ? String(last.value) : undefined },
                fmtMetric(data.metric, last.value)),
            h('td', { class: 'num', 'data-testid': 'trial-resource' }, fmtMetric(data.resource, last.resource)),
            h('td', { class: 'mono', 'data-testid': 'trial-rungs', title: rungTitle(t.rungs) || undefined }, rungText(t.rungs, data.pause) || '—'),
            h('td', {
                class: 'num', 'data-testid': 'trial-failures',
                title: t.failures > 0 ? `${t.failures} failed run${t.failures === 1 ? '' : 's'}, jobs ${(t.jobs || []).join(', ')}: ${t.reason || ''}` : undefined,
            }, isNum(t.failures) ? String(t.failures) : '—'));
        });
        replace(tableBox, h('table', { class: 'grid search-trials', 'data-testid': 'search-trials', dataset: { sort: s.key, dir: s.dir } },
            h('caption', { class: 'visually-hidden' }, `Trials of the search, sorted by ${s.key} (${s.dir === 'asc' ? 'ascending' : 'descending'}); the best is marked`),
            h('thead', {}, h('tr', {},
                head('trial', 'Trial', 'num'), head('state', 'State'),
                names.map((n) => head(`param:${n}`, n, trials.every((t) => !isObj(t.params) || !(n in t.params) || isNum(t.params[n])) ? 'num mono' : 'mono')),
                head('value', data.metric, 'num mono'), head('resource', data.resource, 'num mono'),
                head('rungs', 'Rungs'), head('failures', 'Failures', 'num'))),
            h('tbody', {}, rows)));
        if (focused) tableBox.querySelector(`button[data-sort="${CSS.escape(focused)}"]`)?.focus();
        function rungTitle(rungs) {
            return (Array.isArray(rungs) ? rungs : []).filter(isObj).map((r) =>
                `rung ${r.rung} (${data.resource} ${fmtMetric(data.resource, r.resource)}): ${data.metric} ${fmtMetric(data.metric, r.value)}, ${r.continued ? (data.pause ? 'promoted' : 'continued') : (data.pause ? 'paused, not promoted' : 'stopped')}`).join('\n');
        }
    }

    function draw() {
        if (!data) return;
        const trials = (Array.isArray(data.trials) ? data.trials : []).filter((t) => curves.has(t.trial) && curves.get(t.trial).curve.length);
        if (!trials.length) {
            if (plot) { plot.destroy(); plot = null; plotKey = ''; dataKey = ''; }
            figure.hidden = true;
            replace(chartNote, notice('info', `No trial has reported ${data.metric} with ${data.resource} yet.`, 'search-chart-empty'));
            return;
        }
        replace(chartNote);
        figure.hidden = false;
        // drawn in this order: faded trials first, the best last (on top)
        const rank = (t) => (t.trial === data.best ? 2 : FADED_STATES.has(t.state) ? 0 : 1);
        trials.sort((a, b) => rank(a) - rank(b) || a.trial - b.trial);
        const aligned = alignCurves(trials.map((t) => curves.get(t.trial).curve));
        const rungs = (Array.isArray(data.rungs) ? data.rungs : []).filter(isNum);
        const ds = host.dataset;
        ds.metric = data.metric;
        ds.resource = data.resource;
        ds.rungs = JSON.stringify(rungs);
        ds.points = String(aligned[0].length);
        if (aligned[0].length <= DATASET_MAX_X) { // what is drawn, for tests and the curious
            ds.xs = JSON.stringify(aligned[0]);
            ds.series = JSON.stringify(Object.fromEntries(trials.map((t, i) => [t.trial, aligned[i + 1]])));
        } else {
            delete ds.xs;
            delete ds.series;
        }
        if (!uPlot) return;
        const looks = trials.map((t) => seriesLook(t, data.best));
        const key = JSON.stringify([data.metric, data.resource, rungs, trials.map((t, i) => [t.trial, looks[i]])]);
        const dKey = JSON.stringify(aligned);
        if (plot && key === plotKey) {
            if (dKey !== dataKey) plot.setData(aligned);
            dataKey = dKey;
        } else {
            newPlot(trials, aligned, rungs, looks, key, dKey);
        }
        // how uPlot draws each series, read back from it, with the state of this round (a trial that went from
        // running to succeeded looks the same and keeps its plot, but is no longer running)
        ds.trials = JSON.stringify(plot.series.slice(1).map((s, i) => ({
            trial: trials[i].trial, state: trials[i].state, best: trials[i].trial === data.best, alpha: s.alpha, width: s.width,
        })));
    }

    function newPlot(trials, aligned, rungs, looks, key, dKey) {
        if (plot) plot.destroy();
        plotKey = key;
        dataKey = dKey;
        const budget = isObj(job && job.spec && job.spec.search && job.spec.search.budget) ? job.spec.search.budget : {};
        const metric = data.metric, resource = data.resource;
        plot = new uPlot({
            width: widthOf(host, 320), height: 280,
            legend: { show: trials.length <= LEGEND_MAX_TRIALS },
            scales: {
                x: {
                    time: false,
                    range: (u, min, max) => {
                        const lo = Math.min(min, ...rungs);
                        const hi = Math.max(max, ...rungs, isNum(budget.max) ? budget.max : max);
                        return lo < hi ? [lo, hi] : [lo - 1, hi + 1];
                    },
                },
            },
            // whole-number ticks for a resource counted in whole numbers (epochs, steps)
            axes: [{ label: resource, ...(aligned[0].every(Number.isInteger) && rungs.every(Number.isInteger) ? { incrs: COUNT_INCRS } : {}) }, { label: metric, size: 64, values: (u, splits) => splits.map((v) => (isNum(v) ? fmtMetric(metric, v) : '')) }],
            series: [{ label: resource, value: (u, v) => fmtMetric(resource, v) }, ...trials.map((t, i) => ({
                label: `trial ${t.trial}${t.trial === data.best ? ' (best)' : ''}`,
                stroke: deviceColor(t.trial), width: looks[i].width, alpha: looks[i].alpha,
                spanGaps: true, points: { show: aligned[0].length < 40 },
                value: (u, v) => fmtMetric(metric, v),
            }))],
            plugins: [xMarks(() => rungs.map((x, k) => ({ x, label: `r${k}` })), {
                onDraw: (xs) => { host.dataset.rungsDrawn = JSON.stringify(xs); },
            })],
        }, aligned, host);
    }
}

// What the trials API says of a trial that its metrics depend on.
function trialKey(t) {
    return JSON.stringify([t.job_id, t.state, t.last, Array.isArray(t.rungs) ? t.rungs.length : 0]);
}

function sameLast(a, b) {
    if (!a || !isObj(b)) return !a && !isObj(b);
    return a.value === b.value && (a.resource === null ? b.resource === null || b.resource === undefined : a.resource === b.resource);
}
