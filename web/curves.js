// The curves of a job, from GET /v1/jobs/{id}/metrics: a training job's loss,
// accuracy and throughput by step; an inference job's request rate, p99
// latency against its SLO, and replicas over time. Mounted by job.js for those
// two types; update() re-reads the points (job.js calls it when the stream
// reports an event for the job).
import { api, jobPath } from './api.js';
import { h, replace, notice } from './dom.js';
import { loadUplot, widthOf, clockAxis, CLOCK_INCRS } from './charts.js';
import { fmtAccuracy, fmtLoss, fmtMetric } from './format.js';

const isNum = (v) => typeof v === 'number' && Number.isFinite(v);

// Points [{..}] -> uPlot data [xs, ys...] for the given keys: one x per point
// that has x, in order; a key missing at a point is null there (sparse series
// such as test accuracy are drawn through their points with spanGaps).
export function series(points, xKey, keys, xScale = 1) {
    const pts = (Array.isArray(points) ? points : []).filter((p) => p && isNum(p[xKey]));
    pts.sort((a, b) => a[xKey] - b[xKey]);
    const xs = pts.map((p) => p[xKey] * xScale);
    return [xs, ...keys.map((k) => pts.map((p) => (isNum(p[k]) ? p[k] : null)))];
}

// The latest value of each key among the points (the last point that has it).
export function latest(points, keys) {
    const out = {};
    for (const p of Array.isArray(points) ? points : [])
        for (const k of keys) if (p && isNum(p[k])) out[k] = p[k];
    return out;
}

// The points that mark an event (a resize, an adaptation), newest first, as
// table rows: [step, what, details].
export function eventRows(points) {
    const rows = [];
    for (const p of Array.isArray(points) ? points : []) {
        if (!p || typeof p.event !== 'string') continue;
        const d = [];
        if (isNum(p.workers)) d.push(`${p.workers} worker${p.workers === 1 ? '' : 's'}`);
        if (typeof p.state_from === 'string') d.push(`state from ${p.state_from}${isNum(p.state_bytes) && p.state_bytes > 0 ? ` (${(p.state_bytes / 1e6).toFixed(2)} MB)` : ''}`);
        if (isNum(p.resize_s) && p.resize_s > 0) d.push(`${p.resize_s.toFixed(2)} s after the previous generation stopped`);
        if (typeof p.detail === 'string') d.push(p.detail);
        rows.push([isNum(p.step) ? p.step : null, p.event, d.join(' · ')]);
    }
    return rows.reverse();
}

// Model selection (points with a `config`): the latest point of each
// configuration, as rows [config, params, epoch, test accuracy, test loss,
// train loss], best test accuracy first.
export function configRows(points) {
    const last = new Map();
    for (const p of Array.isArray(points) ? points : [])
        if (p && Number.isInteger(p.config) && (!last.has(p.config) || p.epoch >= last.get(p.config).epoch)) last.set(p.config, p);
    return [...last.values()]
        .sort((a, b) => (b.test_accuracy ?? -1) - (a.test_accuracy ?? -1) || a.config - b.config)
        .map((p) => [p.config, p.params && typeof p.params === 'object' ? Object.entries(p.params).map(([k, v]) => `${k} = ${v}`).join(', ') : '',
            p.epoch, p.test_accuracy, p.test_loss, p.loss]);
}

// Model selection: [epochs, test accuracy of configuration 0, 1, ...] for one chart.
export function configSeries(points) {
    const pts = (Array.isArray(points) ? points : []).filter((p) => p && Number.isInteger(p.config) && isNum(p.epoch));
    const epochs = [...new Set(pts.map((p) => p.epoch))].sort((a, b) => a - b);
    const n = pts.reduce((m, p) => Math.max(m, p.config + 1), 0);
    const ys = Array.from({ length: n }, () => epochs.map(() => null));
    for (const p of pts) if (isNum(p.test_accuracy)) ys[p.config][epochs.indexOf(p.epoch)] = p.test_accuracy;
    return [epochs, ...ys];
}

// A federated job's design (result.design): one row per parallel class, its
// groups as "{a, b, c}" strings.
export function designRows(design) {
    const classes = design && Array.isArray(design.groups) ? design.groups : [];
    return classes.map((cls, i) => [i, (Array.isArray(cls) ? cls : []).map((g) => `{${(Array.isArray(g) ? g : []).join(', ')}}`)]);
}

// Shares of the time split of a training point, in percent.
export function timeSplit(p) {
    const parts = ['compute_s', 'comm_s', 'data_s'].map((k) => (p && isNum(p[k]) ? p[k] : 0));
    const total = parts.reduce((a, b) => a + b, 0);
    return total > 0 ? parts.map((v) => (100 * v) / total) : null;
}

// --- a program job's own metrics lines (spec.program) ---------------------------
// Its lines carry whatever the program writes: a step, an epoch, both or neither,
// and any metric names. Curves are drawn against the step or the epoch, whichever
// more of the points carry (the step on a tie), else against time.

// Keys that say where a point is, not what was measured.
const POSITION_KEYS = new Set(['ts', 'step', 'steps', 'epoch', 'epochs', 'progress', 'rank', 'config', 'round', 'generation']);
const MAX_PROGRAM_CHARTS = 8;
// Whole-number ticks for steps and epochs.
export const COUNT_INCRS = Array.from({ length: 30 }, (_, i) => [1, 2, 5][i % 3] * 10 ** Math.floor(i / 3));
const PALETTE = ['#2356c2', '#c2410c', '#15803d', '#8a5a00', '#7c3aed', '#0e7490', '#be185d', '#4d7c0f'];

// Rank 0's points: a point that names another rank is left out (the API's
// default answer holds rank 0's only; a point without a rank is rank 0's).
export function rankZero(points) {
    return (Array.isArray(points) ? points : []).filter((p) => p && typeof p === 'object' && (!isNum(p.rank) || p.rank === 0));
}

// The x a program's points are drawn against: 'step', 'epoch' or 'ts'.
export function programX(points) {
    let steps = 0, epochs = 0;
    for (const p of rankZero(points)) {
        if (isNum(p.step)) steps++;
        if (isNum(p.epoch)) epochs++;
    }
    if (!steps && !epochs) return 'ts';
    return steps >= epochs ? 'step' : 'epoch';
}

// The charts for a program's points: its losses together, its accuracies
// together, its rates (…_per_s, throughput) together, then one chart per other
// numeric metric, in the order the points first name them.
export function programCharts(points) {
    const keys = [];
    for (const p of rankZero(points))
        for (const [k, v] of Object.entries(p)) if (isNum(v) && !POSITION_KEYS.has(k) && !keys.includes(k)) keys.push(k);
    const groups = [
        { id: 'loss', title: 'Loss', test: (k) => /loss/i.test(k) },
        { id: 'accuracy', title: 'Accuracy', test: (k) => /acc(uracy)?($|_)|accuracy/i.test(k) },
        { id: 'throughput', title: 'Throughput', test: (k) => /(_per_s|_per_sec|per_second|throughput)$/i.test(k) },
    ];
    const charts = [];
    const used = new Set();
    for (const g of groups) {
        const ks = keys.filter((k) => !used.has(k) && g.test(k));
        if (!ks.length) continue;
        ks.forEach((k) => used.add(k));
        charts.push({ id: g.id, title: g.title, keys: ks });
    }
    for (const k of keys) if (!used.has(k)) charts.push({ id: k, title: k, keys: [k] });
    return charts.slice(0, MAX_PROGRAM_CHARTS).map((c) => ({
        ...c, labels: c.keys, colors: c.keys.map((_, i) => PALETTE[i % PALETTE.length]),
    }));
}

// Points merged by x (the later point's values win at the same x), so a line
// for the training loss and one for the test accuracy at the same epoch make
// one point; points without x are left out.
export function mergeByX(points, xKey) {
    const at = new Map();
    for (const p of rankZero(points)) {
        if (!isNum(p[xKey])) continue;
        at.set(p[xKey], { ...(at.get(p[xKey]) || {}), ...p });
    }
    return [...at.values()];
}

const CHARTS = {
    training: {
        x: 'step', xLabel: 'step',
        charts: [
            { title: 'Loss', keys: ['loss', 'test_loss'], labels: ['train loss', 'test loss'], colors: ['#2356c2', '#c2410c'] },
            { title: 'Accuracy', keys: ['accuracy', 'test_accuracy'], labels: ['train accuracy', 'test accuracy'], colors: ['#2356c2', '#c2410c'] },
            { title: 'Throughput (samples/s)', keys: ['samples_per_s'], labels: ['samples/s'], colors: ['#15803d'] },
        ],
        facts: [['step', 'Step'], ['epoch', 'Epoch'], ['loss', 'Loss'], ['accuracy', 'Accuracy'], ['test_accuracy', 'Test accuracy'],
            ['samples_per_s', 'Samples/s'], ['workers', 'Workers']],
    },
    federated: {
        x: 'round', xLabel: 'round',
        charts: [
            { title: 'Test accuracy of the global model', keys: ['test_accuracy'], labels: ['test accuracy'], colors: ['#c2410c'] },
            { title: 'Consensus residual ‖z − Σ aᵢwᵢ‖ / ‖Σ aᵢwᵢ‖', keys: ['residual'], labels: ['residual'], colors: ['#2356c2'], log: true,
                tick: (v) => v.toExponential(0) },
            { title: 'Sent per site (MB)', keys: ['bytes_sent'], labels: ['bytes'], colors: ['#15803d'], tick: (v) => (v / 1e6).toFixed(2) },
        ],
        facts: [['round', 'Round'], ['test_accuracy', 'Test accuracy'], ['test_loss', 'Test loss'], ['residual', 'Residual'],
            ['sites', 'Sites'], ['round_s', 'Round time (s)']],
    },
    inference: {
        x: 'ts', xLabel: 'time', time: true,
        charts: [
            { title: 'Requests/s', keys: ['rate'], labels: ['rate'], colors: ['#2356c2'] },
            { title: 'Latency p99 vs SLO (ms)', keys: ['p99_ms', 'slo_ms'], labels: ['p99', 'SLO'], colors: ['#c2410c', '#7b8794'] },
            { title: 'Replicas', keys: ['replicas', 'target'], labels: ['replicas', 'target'], colors: ['#15803d', '#8a5a00'] },
        ],
        facts: [['rate', 'Requests/s'], ['p50_ms', 'p50 latency'], ['p99_ms', 'p99 latency'], ['slo_attainment', 'SLO attainment'],
            ['replicas', 'Replicas'], ['drops', 'Drops (last window)']],
    },
};


// A job's curves in root. A program job's (program: true) are laid out from
// what its points carry (programX, programCharts), again whenever that changes;
// the other types' are fixed (CHARTS). onPoints(points) hears every answer.
export function mountCurves(root, { id, type, program = false, signal, onPoints }) {
    const fixed = CHARTS[type];
    if (!fixed) return { update() {} };
    const facts = h('dl', { class: 'summary', 'data-testid': 'curve-facts' });
    const split = h('div', { class: 'time-split', 'data-testid': 'time-split' });
    const status = h('div', {});
    const events = h('div', { 'data-testid': 'curve-events' });
    const selection = h('div', { 'data-testid': 'model-selection' });
    const curvesBox = h('div', { class: 'curves' });
    let selectionPlot = null;
    replace(root, status, facts, type === 'training' ? split : '', type === 'training' ? events : '', type === 'training' ? selection : '',
        curvesBox);
    let uPlot = null, plots = [], hosts = [], points = [], busy = false, again = false;
    let conf = null, confKey = '';
    loadUplot().then((u) => { uPlot = u; draw(); }, (e) => replace(status, notice('error', e.message, 'curves-error')));
    update();
    return { update };

    async function update() {
        if (busy) { again = true; return; }
        busy = true;
        try {
            do {
                again = false;
                const m = await api(`${jobPath(id)}/metrics`, { signal });
                points = (m && m.points) || [];
                if (onPoints) onPoints(points);
                draw();
            } while (again && !signal.aborted);
        } catch (e) {
            if (!signal.aborted) replace(status, notice('error', `Could not load the curves: ${e.message}`, 'curves-error'));
        } finally {
            busy = false;
        }
    }

    // The layout for the points: fixed, or a program's from what its points carry.
    function layout() {
        if (!program) return { ...fixed, charts: fixed.charts.map((c) => ({ id: c.keys[0], ...c })) };
        const x = programX(points);
        const charts = programCharts(points);
        const pts = rankZero(points);
        const factKeys = [];
        if (x !== 'ts') factKeys.push([x, x === 'step' ? 'Step' : 'Epoch']);
        if (x !== 'epoch' && pts.some((p) => isNum(p.epoch))) factKeys.push(['epoch', 'Epoch']);
        for (const c of charts) for (const k of c.keys) factKeys.push([k, k]);
        return { x, xLabel: x === 'ts' ? 'time' : x, time: x === 'ts', charts, facts: factKeys };
    }

    // (Re)builds a figure per chart when the layout changed.
    function arrange() {
        const next = layout();
        const key = JSON.stringify([next.x, next.charts.map((c) => [c.id, c.keys])]);
        if (key === confKey) { conf = next; return; }
        for (const p of plots) if (p) p.destroy();
        plots = [];
        conf = next;
        confKey = key;
        hosts = conf.charts.map((c) => h('div', { class: 'curve', 'data-testid': `curve-${c.id}`, dataset: { x: conf.x, keys: c.keys.join(' ') } }));
        replace(curvesBox, conf.charts.map((c, i) => h('figure', {}, h('figcaption', {}, c.title), hosts[i])));
    }

    function draw() {
        arrange();
        const last = latest(rankZero(points), conf.facts.map(([k]) => k));
        if (points.length === 0) replace(status, notice('info', 'No metrics yet.', 'curves-empty'));
        else if (program && conf.charts.length === 0) replace(status, notice('info', 'Its metrics lines carry no numbers to chart yet.', 'curves-empty'));
        else replace(status);
        replace(facts, conf.facts.map(([k, label]) => h('div', {}, h('dt', {}, label), h('dd', { 'data-testid': `fact-${k}` }, fmtMetric(k, last[k])))));
        if (type === 'training') {
            const withSplit = points.filter((p) => timeSplit(p)).pop();
            const s = timeSplit(withSplit);
            replace(split, s ? h('span', {}, `Time split of the last window: compute ${s[0].toFixed(0)}% · communication ${s[1].toFixed(0)}% · data ${s[2].toFixed(0)}%`) : '');
            const rows = eventRows(points);
            replace(events, rows.length ? h('table', { class: 'events' },
                h('caption', {}, 'Resizes and adaptations'),
                h('thead', {}, h('tr', {}, h('th', {}, 'Step'), h('th', {}, 'Event'), h('th', {}, 'Details'))),
                h('tbody', {}, rows.map(([step, what, detail]) => h('tr', { 'data-testid': 'curve-event' },
                    h('td', {}, step === null ? '—' : step.toLocaleString()), h('td', {}, what), h('td', {}, detail))))) : '');
        }
        if (type === 'training' && points.some((p) => p && Number.isInteger(p.config))) {
            facts.hidden = true, curvesBox.hidden = true; /* per-step charts mean nothing here */
            drawSelection();
            return;
        }
        if (!uPlot || points.length === 0) return;
        const pts = program ? mergeByX(points, conf.x) : points;
        conf.charts.forEach((c, i) => {
            const data = series(pts, conf.x, c.keys, conf.time ? 1 / 1000 : 1);
            const ds = hosts[i].dataset;
            ds.points = String(data[0].length);
            if (data[0].length <= 2000) { // what is drawn, for tests and the curious: x values and each series
                ds.xs = JSON.stringify(data[0]);
                ds.series = JSON.stringify(Object.fromEntries(c.keys.map((k, j) => [k, data[j + 1]])));
            }
            if (plots[i]) { plots[i].setData(data); return; }
            plots[i] = new uPlot({
                width: widthOf(hosts[i], 300), height: 180,
                scales: { x: { time: !!conf.time }, ...(c.log ? { y: { distr: 3 } } : {}) },
                axes: [conf.time ? { space: 70, incrs: CLOCK_INCRS, values: (u, splits, ai, space, incr) => clockAxis(splits, incr) } : { label: conf.xLabel, ...(program ? { incrs: COUNT_INCRS } : {}) },
                    c.tick ? { size: 64, values: (u, splits) => splits.map((v) => (v === null ? '' : c.tick(v))) } : { size: 64 }],
                series: [{ label: conf.xLabel }, ...c.keys.map((k, j) => ({ label: c.labels[j], stroke: c.colors[j], width: 2, spanGaps: true, points: { show: data[0].length < 60 },
                    value: (u, v) => fmtMetric(k, v) }))],
            }, data, hosts[i]);
        });
    }

    // a model-selection job: a table of its configurations and their test accuracy by epoch
    function drawSelection() {
        const rows = configRows(points);
        const host = h('div', { class: 'curve', 'data-testid': 'curve-configs' });
        selectionPlot?.destroy();
        selectionPlot = null;
        replace(selection, h('table', { class: 'events' },
            h('caption', {}, `Model selection: ${rows.length} configurations (best first)`),
            h('thead', {}, h('tr', {}, ['#', 'Parameters', 'Epoch', 'Test accuracy', 'Test loss', 'Train loss'].map((t) => h('th', {}, t)))),
            h('tbody', {}, rows.map(([c, params, ep, acc, tl, l]) => h('tr', { 'data-testid': 'config-row' },
                h('td', {}, String(c)), h('td', {}, params), h('td', {}, fmtMetric('epoch', ep)), h('td', {}, fmtAccuracy(acc)), h('td', {}, fmtLoss(tl)), h('td', {}, fmtLoss(l)))))),
        h('figure', {}, h('figcaption', {}, 'Test accuracy per configuration'), host));
        if (!uPlot) return;
        const data = configSeries(points);
        const palette = ['#2356c2', '#c2410c', '#15803d', '#8a5a00', '#7c3aed', '#0e7490', '#be185d', '#4d7c0f'];
        selectionPlot = new uPlot({
            width: widthOf(host, 300), height: 200,
            scales: { x: { time: false } },
            axes: [{ label: 'epoch' }, { size: 64 }],
            series: [{ label: 'epoch' }, ...data.slice(1).map((_, i) => ({ label: `#${i}`, stroke: palette[i % palette.length], width: 2, spanGaps: true,
                value: (u, v) => fmtAccuracy(v) }))],
        }, data, host);
    }
}
