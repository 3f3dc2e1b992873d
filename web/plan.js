// Plan view (#/jobs/<id>/plan) of a placement job's result: a Gantt chart of
// the simulated schedule (gantt.js, own canvas), memory over time per device
// against its capacity (uPlot), the chosen plan's devices and the algorithm
// comparison. The Gantt chart and the memory chart share one time window:
// zooming either moves the other.
import { api, ApiError, jobPath } from './api.js';
import { h, append, replace, notice } from './dom.js';
import { badge, fmtBytes, fmtMicros, isTerminal, microsAxis } from './format.js';
import { Gantt } from './gantt.js';
import { candidatesTable, devicesTable } from './placement.js';
import { loadUplot, alignSteps, BYTE_INCRS, widthOf } from './charts.js';
import { deviceColor, swatch } from './colors.js';

const MEMORY_HEIGHT = 280;
const MEMORY_MAX_SERIES = 12;
const isNum = (v) => typeof v === 'number' && Number.isFinite(v);

export function mount(root, { live, params, signal }) {
    const id = params[0];
    const title = h('h1', {}, 'Plan');
    const stateBadge = h('span', {});
    const status = h('div', { class: 'status-area', 'aria-live': 'polite' });
    const body = h('div', { 'data-testid': 'plan', hidden: true });
    replace(root,
        h('p', { class: 'crumbs' }, h('a', { href: `#/jobs/${encodeURIComponent(id)}`, 'data-testid': 'plan-back' }, `← Job ${id}`)),
        h('div', { class: 'page-head', 'data-testid': 'plan-page', dataset: { jobId: id } }, title, stateBadge),
        status, body);
    replace(status, notice('loading', 'Loading the plan…', 'plan-loading'));

    const cleanups = [];
    let rendered = false, inflight = false, dirty = false;
    const offJob = live ? live.on('job', (ev) => { if (ev.job_id === id && !rendered) refresh(); }) : () => {};
    const offOpen = live ? live.on('open', () => { if (!rendered) refresh(); }) : () => {};
    refresh();
    return () => {
        offJob();
        offOpen();
        for (const fn of cleanups) { try { fn(); } catch (e) { console.error(e); } }
    };

    async function refresh() {
        if (inflight) { dirty = true; return; }
        inflight = true;
        try {
            do {
                dirty = false;
                const job = await api(jobPath(id), { signal });
                if (signal.aborted) return;
                show(job);
            } while (dirty && !rendered && !signal.aborted);
        } catch (e) {
            if (signal.aborted) return;
            if (e instanceof ApiError && e.status === 404) replace(status, notice('error', 'No such job in your tenant.', 'plan-error'));
            else {
                replace(status, notice('error', `Could not load the job: ${e instanceof ApiError ? e.describe() : e.message}`, 'plan-error'),
                    h('button', { type: 'button', onclick: () => refresh() }, 'Retry'));
            }
        } finally {
            inflight = false;
        }
    }

    function show(job) {
        title.textContent = `Plan · ${job.name || job.id}`;
        document.title = `Plan · ${job.name || job.id} · gantry`;
        replace(stateBadge, badge(job.state));
        if (job.type !== 'placement') {
            replace(status, notice('info', `This is a ${job.type} job; only placement jobs have a plan.`, 'plan-error'));
            return;
        }
        const r = job.result;
        if (!r || typeof r !== 'object') {
            const text = job.state === 'failed' ? `The job failed, so there is no plan${job.error ? `: ${job.error}` : '.'}` :
                job.state === 'cancelled' ? 'The job was cancelled, so there is no plan.' :
                isTerminal(job.state) ? 'The job has no result.' :
                    `No plan yet: the job is ${job.state}. This page updates when it finishes.`;
            replace(status, notice(isTerminal(job.state) ? 'error' : 'loading', text, 'plan-pending'));
            return;
        }
        rendered = true;
        replace(status);
        render(r);
        body.hidden = false;
    }

    function render(r) {
        const plan = r.plan && typeof r.plan === 'object' ? r.plan : {};
        const sched = plan.schedule && typeof plan.schedule === 'object' ? plan.schedule : null;
        const devices = Array.isArray(plan.devices) ? plan.devices : [];
        const candidates = Array.isArray(r.candidates) ? r.candidates : [];
        const best = candidates.find((c) => c.algorithm === r.best) || {};
        const makespan = isNum(r.metrics && r.metrics.makespan_us) ? r.metrics.makespan_us : best.makespan_us;
        const lower = isNum(r.lower_bound_us) ? r.lower_bound_us : null;
        const ratio = isNum(best.makespan_over_lower_bound) ? best.makespan_over_lower_bound :
            lower && isNum(makespan) ? makespan / lower : null;

        const facts = [
            ['Plan from', h('span', { class: 'mono', 'data-testid': 'plan-algorithm' }, plan.algorithm || r.best || '—')],
            // the graph it was placed as: plain, fused, co-placed (docs/placement.md, "Graph variants")
            ['Graph variant', h('span', { class: 'mono', 'data-testid': 'plan-variant' }, plan.variant || r.variant || '—')],
            ['Makespan', fmtMicros(makespan)],
            ['Lower bound', lower === null ? '—' : fmtMicros(lower)],
            ['Makespan / lower bound', ratio === null ? '—' : `${ratio.toFixed(2)}×`],
            ['Devices', String(devices.length || '—')],
        ];
        if (sched) {
            facts.push(['Ops', Array.isArray(sched.ops) ? String(sched.ops.length) : '—'],
                ['Transfers', Array.isArray(sched.transfers) ? String(sched.transfers.length) : '—']);
        }
        const summary = h('dl', { class: 'summary', 'data-testid': 'plan-summary' },
            facts.map(([k, v]) => h('div', {}, h('dt', {}, k), h('dd', {}, v))));

        const ganttSection = h('section', { 'aria-labelledby': 'sec-gantt' }, h('h2', { id: 'sec-gantt' }, 'Schedule'));
        const memorySection = h('section', { 'aria-labelledby': 'sec-memory' }, h('h2', { id: 'sec-memory' }, 'Memory over time'));
        const tablesSection = h('section', { 'aria-labelledby': 'sec-algos' },
            h('h2', { id: 'sec-algos' }, 'Algorithms'),
            candidates.length ? h('div', { class: 'table-scroll' }, candidatesTable(r, devices)) :
                h('p', { class: 'muted' }, 'The result lists no candidates.'),
            devices.length ? [h('h3', {}, `Devices${plan.algorithm ? ` (plan from ${plan.algorithm})` : ''}`),
                h('div', { class: 'table-scroll' }, devicesTable(devices))] : null);
        replace(body, summary, ganttSection, memorySection, tablesSection);

        if (!sched) {
            const why = typeof plan.schedule_omitted === 'string' && plan.schedule_omitted ? plan.schedule_omitted : 'this result has no schedule';
            const text = `No schedule to chart: ${why}. The comparison of the algorithms is below.`;
            ganttSection.appendChild(notice('info', text, 'plan-no-schedule'));
            memorySection.appendChild(h('p', { class: 'muted' }, 'Memory over time comes with the schedule.'));
            return;
        }
        const gantt = ganttChart(ganttSection, sched, devices, makespan, lower);
        memoryChart(memorySection, sched, devices, makespan, gantt);
    }

    function ganttChart(section, sched, devices, makespan, lower) {
        const host = h('div', { class: 'gantt', 'data-testid': 'gantt' });
        const windowText = h('span', { class: 'muted', 'data-testid': 'gantt-window' });
        const transfersBox = h('input', { type: 'checkbox', checked: true, 'data-testid': 'gantt-show-transfers' });
        const btn = (testid, text, label, fn) => h('button', { type: 'button', 'data-testid': testid, 'aria-label': label, onclick: fn }, text);
        const gantt = new Gantt(host, {
            schedule: sched, devices, makespan, lowerBound: lower,
            onView: (a, b) => showWindow(a, b),
        });
        cleanups.push(() => gantt.destroy());
        const showWindow = (a, b) => {
            windowText.textContent = `showing ${fmtMicros(a)} – ${fmtMicros(b)} of ${fmtMicros(gantt.fullEnd)}`;
        };
        showWindow(gantt.vs, gantt.ve);
        transfersBox.addEventListener('change', () => gantt.setShowTransfers(transfersBox.checked));

        const legend = h('div', { class: 'legend', 'data-testid': 'gantt-legend' },
            gantt.names.slice(0, 12).map((n, i) => h('span', { class: 'legend-item' }, swatch(deviceColor(i)), n)),
            gantt.names.length > 12 ? h('span', { class: 'legend-item muted' }, `… ${gantt.names.length - 12} more`) : null,
            h('span', { class: 'legend-item muted' }, 'ops on the device row; under it, its send and receive channels, each transfer in the colour of the device at the other end'),
            h('span', { class: 'legend-item' }, h('span', { class: 'line-key makespan' }), 'makespan'),
            lower !== null ? h('span', { class: 'legend-item' }, h('span', { class: 'line-key lower-bound' }), 'lower bound') : null);

        const skipped = Number(host.dataset.skipped || 0);
        const scrollHint = gantt.fullHeight() > gantt.height() ?
            h('p', { class: 'help', 'data-testid': 'gantt-scroll-hint' }, `${gantt.lanes.D} devices: scroll the rows with the wheel over the device names, the scrollbar, or the up and down keys.`) : null;
        append(section, [
            h('div', { class: 'chart-toolbar' },
                btn('gantt-zoom-in', '+', 'Zoom in', () => gantt.zoomBy(0.5)),
                btn('gantt-zoom-out', '−', 'Zoom out', () => gantt.zoomBy(2)),
                btn('gantt-reset', 'Show all', 'Show the whole schedule', () => gantt.reset()),
                h('label', { class: 'toggle' }, transfersBox, ' transfers'),
                windowText),
            h('p', { class: 'help' }, 'Wheel: zoom at the pointer · drag: pan · shift+drag or drag on the time axis: zoom to a range · double-click: show all · hover a bar for its details.'),
            skipped ? notice('error', `${skipped} malformed schedule entries were left out of the chart.`, 'gantt-skipped') : null,
            scrollHint,
            host, legend]);
        return gantt;
    }

    async function memoryChart(section, sched, devices, makespan, gantt) {
        const mem = Array.isArray(sched.memory) ? sched.memory : null;
        if (!mem || mem.length === 0) {
            section.appendChild(h('p', { class: 'muted', 'data-testid': 'memory-none' }, 'This schedule has no memory timeline.'));
            return;
        }
        const host = h('div', { class: 'memory-chart', 'data-testid': 'memory-chart' });
        section.appendChild(host);
        let uPlot;
        try {
            uPlot = await loadUplot();
        } catch (e) {
            if (signal.aborted) return;
            replace(host, notice('error', `No memory chart: ${e.message}.`, 'memory-chart-error'));
            return;
        }
        if (signal.aborted) return;

        // One series per device; beyond MEMORY_MAX_SERIES devices, the ones
        // with the highest peak (the page says which are left out).
        const peakOf = (l) => (Array.isArray(l) ? l.reduce((m, p) => (Array.isArray(p) && isNum(p[1]) && p[1] > m ? p[1] : m), 0) : 0);
        let shown = mem.map((_, i) => i);
        if (shown.length > MEMORY_MAX_SERIES) {
            const peaks = mem.map(peakOf);
            shown = shown.sort((a, b) => peaks[b] - peaks[a] || a - b).slice(0, MEMORY_MAX_SERIES).sort((a, b) => a - b);
            section.insertBefore(notice('info', `${mem.length} devices: the chart shows the ${MEMORY_MAX_SERIES} with the highest peak ` +
                `(${shown.map((i) => gantt.names[i]).join(', ')}); the devices table below has every device's peak.`, 'memory-subset'), host);
        }
        const name = (i) => gantt.names[i] || `device ${i}`;
        const cap = (i) => (devices[i] && isNum(devices[i].memory_bytes) ? devices[i].memory_bytes : null);
        const data = alignSteps(shown.map((i) => mem[i]), [0, isNum(makespan) ? makespan : gantt.fullEnd]);
        const n = data[0].length;
        const series = [{ label: 'time', value: (u, v) => (v === null || v === undefined ? '—' : fmtMicros(v)) }];
        for (const i of shown) {
            series.push({
                label: name(i), stroke: deviceColor(i), width: 1.5,
                paths: uPlot.paths.stepped({ align: 1 }), points: { show: false },
                value: (u, v) => (v === null || v === undefined ? '—' : fmtBytes(v)),
            });
        }
        // Capacity: one line when every device shown has the same, else one per device.
        const caps = shown.map(cap);
        const known = caps.filter((c) => c !== null);
        const same = known.length === caps.length && known.every((c) => c === known[0]);
        const capLines = same && known.length ? [{ label: 'capacity (each device)', cap: known[0], color: '#1c2228' }] :
            shown.map((i) => (cap(i) === null ? null : { label: `${name(i)} capacity`, cap: cap(i), color: deviceColor(i) })).filter(Boolean);
        for (const cl of capLines) {
            series.push({ label: cl.label, stroke: cl.color, width: 1, dash: [6, 4], points: { show: false }, value: () => fmtBytes(cl.cap) });
            data.push(new Array(n).fill(cl.cap));
        }
        let peak = 0, peakUse = 0;
        for (let s = 1; s < data.length; s++) {
            for (const v of data[s]) {
                if (v === null) continue;
                if (v > peak) peak = v;
                if (s <= shown.length && v > peakUse) peakUse = v;
            }
        }
        const fit = h('input', { type: 'checkbox', 'data-testid': 'memory-fit' });
        const yTop = () => ((fit.checked ? peakUse : peak) || 1) * 1.08;

        let syncing = false;
        const u = new uPlot({
            width: widthOf(host),
            height: MEMORY_HEIGHT,
            cursor: { drag: { x: true, y: false }, points: { show: false } },
            scales: { x: { time: false }, y: { range: () => [0, yTop()] } },
            axes: [
                { values: (self, splits, ai, space, incr) => microsAxis(splits, incr), space: 90 },
                { values: (self, splits) => splits.map((v) => fmtBytes(v)), incrs: BYTE_INCRS, size: 84 },
            ],
            series,
            hooks: {
                setScale: [(self, key) => {
                    if (key !== 'x' || syncing) return;
                    const { min, max } = self.scales.x;
                    if (isNum(min) && isNum(max)) gantt.setView(min, max);
                    host.dataset.viewStart = String(min);
                    host.dataset.viewEnd = String(max);
                }],
            },
        }, data, host);
        host.dataset.series = String(series.length - 1);
        host.dataset.points = String(n);
        const showView = () => {
            host.dataset.viewStart = String(u.scales.x.min);
            host.dataset.viewEnd = String(u.scales.x.max);
        };
        const sync = (a, b) => {
            syncing = true;
            try { u.setScale('x', { min: a, max: b }); } finally { syncing = false; }
            showView();
        };
        fit.addEventListener('change', () => u.setScale('y', { min: 0, max: yTop() }));
        const ganttOnView = gantt.onView;
        gantt.onView = (a, b) => { ganttOnView(a, b); sync(a, b); };
        sync(gantt.vs, gantt.ve);
        const ro = new ResizeObserver(() => u.setSize({ width: widthOf(host), height: MEMORY_HEIGHT }));
        ro.observe(host);
        cleanups.push(() => { ro.disconnect(); u.destroy(); });
        section.insertBefore(h('div', { class: 'chart-toolbar' }, h('label', { class: 'toggle' }, fit, ' scale to the peak use rather than the capacity')), host);
        section.appendChild(h('p', { class: 'help' }, 'Drag across the chart to zoom (the schedule follows); double-click to show all. Dashed: capacity.'));
    }
}
