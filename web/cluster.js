// Cluster utilization (#/cluster): every worker as a row on a timeline of the
// last 15 minutes (busy intervals coloured by job type, patterned by tenant,
// idle blank), slots used per tenant against quota, queue depths since the
// page opened, and the workers as a table.
//
// Data: GET /v1/cluster (workers, tenants, queue) and
// GET /v1/cluster/timeline?minutes=15 (busy intervals), polled every 2 s
// while the tab is visible, and again soon after any job event on the live
// stream (at most one request pair in flight). The two answers are tracked
// separately: what each part of the page shows is as old as the last
// successful answer for it, and the page says so once that is older than a
// few polls. Queue depths are not kept by the server as history: the chart
// holds one point per successful poll, and a gap where polls failed.
//
// Charts are uPlot: the timeline is a uPlot chart with a time axis and one
// y band per worker, its intervals drawn in uPlot's draw hook (culled to the
// visible time range); the queue chart is a plain uPlot line chart.
import { api, ApiError, serverNow } from './api.js';
import { h, replace, notice } from './dom.js';
import { badge, fmtTime, fmtSeconds, fmtPct, bar } from './format.js';
import { loadUplot, widthOf, clockAxis, CLOCK_INCRS, coveredFraction } from './charts.js';
import { TYPE_COLORS, OTHER_TYPE_COLOR, typeColor, PATTERNS, makePattern, swatch } from './colors.js';

const PERIOD_MS = 2000;
const WINDOW_MIN = 15;
const STALE_MS = 3 * PERIOD_MS + 1000;
const EVENT_GAP_MS = 500;   // at least this between polls caused by job events
const MAX_POINTS = 5400;    // queue chart: three hours of polls
const ROW_PX = 28;
const AXIS_PX = 66;         // uPlot's x axis and padding, below the rows
const QUEUE_HEIGHT = 200;

const num = (v) => typeof v === 'number' && Number.isFinite(v);
const secs = (iso) => { const t = Date.parse(iso); return Number.isNaN(t) ? null : t / 1000; };

export function mount(root, { me, live, signal, navigate }) {
    const myTenant = me && me.tenant ? me.tenant.id : '';

    // --- state ------------------------------------------------------------
    let cluster = null, timeline = null;    // last good answers
    let clusterAt = 0, timelineAt = 0;      // when they arrived (client ms)
    let clusterErr = '', timelineErr = '';  // last failure, '' after a success
    const queue = { t: [], queued: [], scheduled: [], running: [] };
    const tenantPattern = new Map();        // tenant id -> pattern name, stable
    let rows = [];                          // [{id, worker|null}] in display order
    let intervals = [];                     // [{row, s, e, open, type, tenant, job_id}] (seconds)
    let follow = true;                      // the timeline shows the latest window
    let hovered = null;
    let drawnPerWorker = new Map();         // worker id -> intervals drawn at the last redraw
    let programmatic = false;               // the page, not the user, is moving the timeline
    const patternCache = new Map();         // pattern name @ pixel ratio -> CanvasPattern
    let uPlot = null, tl = null, qc = null; // library, timeline chart, queue chart
    let timer = null, ticker = null, polling = false, again = false, lastPollStart = 0, stopped = false;

    // --- layout -----------------------------------------------------------
    const updated = h('span', { class: 'count muted', 'data-testid': 'cluster-updated' });
    const status = h('div', { class: 'status-area', 'aria-live': 'polite' });
    const followBtn = h('button', { type: 'button', 'data-testid': 'cluster-follow', hidden: true, onclick: () => followLive() },
        `Back to the last ${WINDOW_MIN} minutes`);
    const tlHost = h('div', { class: 'cluster-timeline', 'data-testid': 'cluster-timeline', dataset: { intervals: '0', rows: '0' } });
    const tip = h('div', { class: 'chart-tip', 'data-testid': 'cluster-tooltip', role: 'tooltip', hidden: true });
    const tlWrap = h('div', { class: 'chart-wrap' }, tlHost, tip);
    const tlEmpty = h('p', { class: 'empty', 'data-testid': 'cluster-empty', hidden: true }, 'No workers are registered.');
    const legend = h('div', { class: 'legend', 'data-testid': 'cluster-legend' });
    const tenantsBody = h('tbody');
    const tenantsTable = h('table', { class: 'grid tenants', 'data-testid': 'cluster-tenants' },
        h('caption', { class: 'visually-hidden' }, 'Slots used per tenant against its quota'),
        h('thead', {}, h('tr', {}, ['Tenant', 'Slots used / quota', 'Queued', 'Running', 'Weight']
            .map((t, i) => h('th', { scope: 'col', class: i >= 2 ? 'num' : '' }, t)))),
        tenantsBody);
    const qHost = h('div', { class: 'queue-chart', 'data-testid': 'cluster-queue-chart', dataset: { points: '0' } });
    const queueNow = h('p', { class: 'muted', 'data-testid': 'cluster-queue-now' });
    const workersBody = h('tbody');
    const workersTable = h('table', { class: 'grid workers', 'data-testid': 'cluster-workers' },
        h('caption', { class: 'visually-hidden' }, 'Workers now'),
        h('thead', {}, h('tr', {}, ['Worker', 'Kind', 'Labels', 'State', 'Running', `Busy, last ${WINDOW_MIN} min`, 'Last heartbeat']
            .map((t) => h('th', { scope: 'col' }, t)))),
        workersBody);
    const sections = h('div', { class: 'cluster-body', hidden: true },
        h('section', { 'aria-labelledby': 'sec-tl' },
            h('div', { class: 'section-head' }, h('h2', { id: 'sec-tl' }, `Workers, last ${WINDOW_MIN} minutes`), followBtn),
            h('p', { class: 'help' }, 'Each row is a worker; bars are jobs running on it, coloured by job type and patterned by tenant; blank is idle. Hover a bar for details, click one of your jobs to open it, drag to zoom, double-click to return.'),
            tlWrap, tlEmpty, legend),
        h('section', { 'aria-labelledby': 'sec-tenants' },
            h('h2', { id: 'sec-tenants' }, 'Slots per tenant'),
            h('div', { class: 'table-scroll' }, tenantsTable)),
        h('section', { 'aria-labelledby': 'sec-queue' },
            h('h2', { id: 'sec-queue' }, 'Queue depth since this page opened'),
            queueNow, qHost),
        h('section', { 'aria-labelledby': 'sec-workers' },
            h('h2', { id: 'sec-workers' }, 'Workers now'),
            h('div', { class: 'table-scroll' }, workersTable)));
    replace(root, h('div', { class: 'page-head' }, h('h1', {}, 'Cluster'), updated), status, sections);
    replace(status, notice('loading', 'Loading the cluster…', 'cluster-loading'));

    // --- lifecycle ----------------------------------------------------------
    const offJob = live ? live.on('job', () => soon()) : () => {};
    const offOpen = live ? live.on('open', () => soon()) : () => {};
    const onVisibility = () => {
        clearTimeout(timer);
        if (document.visibilityState === 'visible') poll();
    };
    document.addEventListener('visibilitychange', onVisibility);
    ticker = setInterval(() => { renderStatus(); renderAges(); }, 1000);
    const ro = new ResizeObserver(() => {
        if (tl) tl.setSize({ width: widthOf(tlHost), height: tlHeight() });
        if (qc) qc.setSize({ width: widthOf(qHost), height: QUEUE_HEIGHT });
    });
    ro.observe(sections);
    loadUplot().then((u) => { if (!stopped) { uPlot = u; render(); } }, (e) => {
        if (stopped) return;
        replace(tlHost, notice('error', `No timeline chart: ${e.message}.`, 'cluster-chart-error'));
        replace(qHost, notice('error', `No queue chart: ${e.message}.`, 'cluster-chart-error'));
    });
    poll();

    return () => {
        stopped = true;
        clearTimeout(timer);
        clearInterval(ticker);
        offJob();
        offOpen();
        document.removeEventListener('visibilitychange', onVisibility);
        ro.disconnect();
        if (tl) tl.destroy();
        if (qc) qc.destroy();
    };

    // A poll soon, for a job event: now, or EVENT_GAP_MS after the last one.
    function soon() {
        if (stopped || document.visibilityState !== 'visible') return;
        const wait = lastPollStart + EVENT_GAP_MS - performance.now();
        clearTimeout(timer);
        timer = setTimeout(poll, Math.max(0, wait));
    }

    async function poll() {
        clearTimeout(timer);
        if (stopped) return;
        if (polling) { again = true; return; }
        polling = true;
        lastPollStart = performance.now();
        const [c, t] = await Promise.allSettled([
            api('/v1/cluster', { signal }),
            api(`/v1/cluster/timeline?minutes=${WINDOW_MIN}`, { signal }),
        ]);
        polling = false;
        if (stopped || signal.aborted) return;
        const why = (r) => (r.reason instanceof ApiError ? r.reason.describe() : (r.reason && r.reason.message) || String(r.reason));
        if (c.status === 'fulfilled' && c.value && typeof c.value === 'object') {
            cluster = c.value;
            clusterAt = Date.now();
            clusterErr = '';
            pushQueue(cluster);
        } else {
            clusterErr = c.status === 'rejected' ? why(c) : 'the answer is not an object';
        }
        if (t.status === 'fulfilled' && t.value && typeof t.value === 'object') {
            timeline = t.value;
            timelineAt = Date.now();
            timelineErr = '';
        } else {
            timelineErr = t.status === 'rejected' ? why(t) : 'the answer is not an object';
        }
        render();
        if (again) { again = false; timer = setTimeout(poll, 0); return; }
        if (document.visibilityState === 'visible') timer = setTimeout(poll, PERIOD_MS);
    }

    // --- data ---------------------------------------------------------------

    function pushQueue(c) {
        const q = c.queue && typeof c.queue === 'object' ? c.queue : {};
        const t = secs(c.now) ?? serverNow() / 1000;
        const n = queue.t.length;
        const val = (k) => (num(q[k]) ? q[k] : null);
        if (n && t <= queue.t[n - 1]) { // same instant (or a clock step back): replace
            if (t < queue.t[n - 1]) return;
            queue.queued[n - 1] = val('queued'); queue.scheduled[n - 1] = val('scheduled'); queue.running[n - 1] = val('running');
            return;
        }
        // Polls missed (hidden tab, errors): a null point breaks the line.
        if (n && t - queue.t[n - 1] > STALE_MS / 1000) {
            queue.t.push(queue.t[n - 1] + PERIOD_MS / 1000);
            queue.queued.push(null); queue.scheduled.push(null); queue.running.push(null);
        }
        queue.t.push(t);
        queue.queued.push(val('queued'));
        queue.scheduled.push(val('scheduled'));
        queue.running.push(val('running'));
        while (queue.t.length > MAX_POINTS) for (const k of Object.keys(queue)) queue[k].shift();
    }

    function tenantList() {
        return cluster && Array.isArray(cluster.tenants) ? cluster.tenants.filter((t) => t && typeof t === 'object') : [];
    }

    function tenantName(id) {
        if (id === 'other') return 'other tenants';
        const t = tenantList().find((x) => x.id === id);
        return t && t.name ? t.name : id || '?';
    }

    // Own tenant first, then the others by name, the "other tenants" row last;
    // patterns are handed out in that order and never change afterwards.
    function assignPatterns() {
        const ids = tenantList().map((t) => t.id).filter((x) => typeof x === 'string');
        const rank = (id) => (id === myTenant ? 0 : id === 'other' ? 2 : 1);
        ids.sort((a, b) => rank(a) - rank(b) || tenantName(a).localeCompare(tenantName(b)) || a.localeCompare(b));
        for (const iv of intervals) if (!ids.includes(iv.tenant)) ids.push(iv.tenant);
        for (const id of ids) if (!tenantPattern.has(id)) tenantPattern.set(id, PATTERNS[tenantPattern.size % PATTERNS.length]);
    }

    function buildRows() {
        const ws = cluster && Array.isArray(cluster.workers) ? cluster.workers.filter((w) => w && typeof w.id === 'string') : [];
        const byId = new Map(ws.map((w) => [w.id, w]));
        const ids = [...byId.keys()];
        const raw = timeline && Array.isArray(timeline.intervals) ? timeline.intervals : [];
        for (const iv of raw) if (iv && typeof iv.worker === 'string' && !byId.has(iv.worker) && !ids.includes(iv.worker)) ids.push(iv.worker);
        ids.sort((a, b) => a.localeCompare(b, undefined, { numeric: true }));
        rows = ids.map((id) => ({ id, worker: byId.get(id) || null }));
        const index = new Map(rows.map((r, i) => [r.id, i]));
        const to = timeline ? secs(timeline.to) : null;
        intervals = [];
        for (const iv of raw) {
            if (!iv || !index.has(iv.worker)) continue;
            const s = secs(iv.start);
            const open = iv.end === null || iv.end === undefined;
            const e = open ? to : secs(iv.end);
            if (s === null || e === null) continue;
            intervals.push({
                row: index.get(iv.worker), s, e: Math.max(s, e), open,
                type: typeof iv.type === 'string' ? iv.type : '?',
                tenant: typeof iv.tenant === 'string' ? iv.tenant : '?',
                job_id: typeof iv.job_id === 'string' ? iv.job_id : null,
            });
        }
    }

    // --- rendering ----------------------------------------------------------

    function render() {
        if (!cluster && !timeline) { renderStatus(); return; }
        buildRows();
        assignPatterns();
        sections.hidden = false;
        renderStatus();
        renderTimeline();
        renderLegend();
        renderTenants();
        renderQueue();
        renderWorkers();
    }

    function renderStatus() {
        if (!cluster && !timeline) {
            if (clusterErr || timelineErr) {
                replace(status, notice('error', `Could not load the cluster: ${clusterErr || timelineErr}`, 'cluster-error'),
                    h('button', { type: 'button', onclick: () => poll() }, 'Retry'));
            }
            return;
        }
        const now = Date.now();
        const parts = [];
        const errs = [];
        if (clusterErr) errs.push(`cluster state: ${clusterErr}`);
        if (timelineErr && timelineErr !== clusterErr) errs.push(`timeline: ${timelineErr}`);
        else if (timelineErr) errs[0] = `cluster state and timeline: ${clusterErr}`;
        if (errs.length) parts.push(notice('error', `Refresh failed (${errs.join('; ')}).`, 'cluster-error'));
        const stale = [];
        const age = (at) => fmtSeconds((now - at) / 1000);
        if (!cluster) stale.push('cluster state: never loaded');
        else if (now - clusterAt > STALE_MS) stale.push(`workers, tenants and queue are from ${fmtTime(new Date(clusterAt).toISOString())} (${age(clusterAt)} ago)`);
        if (!timeline) stale.push('timeline: never loaded');
        else if (now - timelineAt > STALE_MS) stale.push(`the timeline is from ${fmtTime(new Date(timelineAt).toISOString())} (${age(timelineAt)} ago)`);
        if (stale.length) parts.push(notice('error', `Stale data: ${stale.join('; ')}.`, 'cluster-stale'));
        replace(status, parts);
        sections.classList.toggle('is-stale', stale.length > 0);
        sections.dataset.stale = stale.length ? 'true' : 'false';
        const last = Math.max(clusterAt, timelineAt);
        updated.textContent = last ? `updated ${fmtTime(new Date(last).toISOString())}, every ${PERIOD_MS / 1000} s` +
            (document.visibilityState === 'visible' ? '' : ' (paused while the tab is hidden)') : '';
    }

    function tlHeight() { return AXIS_PX + Math.max(1, rows.length) * ROW_PX + 8; }

    function renderTimeline() {
        tlHost.dataset.rows = String(rows.length);
        tlEmpty.hidden = rows.length > 0;
        tlWrap.hidden = rows.length === 0;
        if (!uPlot || !timeline) return;
        const from = secs(timeline.from), to = secs(timeline.to);
        if (from === null || to === null || !(to > from)) return;
        const data = [[from, to], [null, null]];
        if (!tl) {
            tl = makeTimeline(data);
            return;
        }
        tl.setData(data, false);
        const n = Math.max(1, rows.length);
        if (tl.height !== tlHeight()) tl.setSize({ width: widthOf(tlHost), height: tlHeight() });
        if (tl.scales.y.max !== n) tl.setScale('y', { min: 0, max: n });
        if (follow) setX(from, to);
        else tl.redraw(false);
    }

    function setX(min, max) {
        programmatic = true;
        try { tl.setScale('x', { min, max }); } finally { programmatic = false; }
    }

    function followLive() {
        follow = true;
        followBtn.hidden = true;
        if (tl && timeline) setX(secs(timeline.from), secs(timeline.to));
    }

    function makeTimeline(data) {
        const rowOf = (u) => {
            const yv = u.posToVal(u.cursor.top, 'y');
            return Math.max(1, rows.length) - 1 - Math.floor(yv);
        };
        let downAt = null;
        const u = new uPlot({
            width: widthOf(tlHost),
            height: tlHeight(),
            legend: { show: false },
            cursor: { drag: { x: true, y: false }, points: { show: false }, y: false },
            scales: {
                x: { time: true },
                y: { auto: false, range: () => [0, Math.max(1, rows.length)] },
            },
            axes: [
                { space: 70, incrs: CLOCK_INCRS, values: (self, splits, ai, space, incr) => clockAxis(splits, incr) },
                {
                    size: 150, gap: 6, grid: { show: false }, ticks: { show: false },
                    splits: () => rows.map((_, i) => Math.max(1, rows.length) - i - 0.5),
                    values: (self, splits) => splits.map((v) => {
                        const r = rows[Math.max(1, rows.length) - 1 - Math.floor(v)];
                        if (!r) return '';
                        const id = r.id.length > 16 ? `${r.id.slice(0, 15)}…` : r.id;
                        return r.worker ? id : `${id} (gone)`;
                    }),
                },
            ],
            series: [{}, { label: 'busy', paths: () => null, points: { show: false } }],
            hooks: {
                draw: [drawIntervals],
                setScale: [(self, key) => {
                    if (key !== 'x' || programmatic || !timeline) return;
                    const from = secs(timeline.from), to = secs(timeline.to);
                    const atLive = Math.abs(self.scales.x.min - from) < 1 && Math.abs(self.scales.x.max - to) < 1;
                    follow = atLive;
                    followBtn.hidden = atLive;
                }],
                setCursor: [(self) => {
                    const { left, top } = self.cursor;
                    let hv = null;
                    if (left >= 0 && top >= 0) {
                        const row = rowOf(self);
                        const t = self.posToVal(left, 'x');
                        const tol = (3 * (self.scales.x.max - self.scales.x.min)) / Math.max(1, self.over.clientWidth);
                        let bestD = Infinity;
                        for (const iv of intervals) {
                            if (iv.row !== row || t < iv.s - tol || t > iv.e + tol) continue;
                            const d = t < iv.s ? iv.s - t : t > iv.e ? t - iv.e : 0;
                            if (d < bestD) { bestD = d; hv = iv; }
                        }
                    }
                    if (hv !== hovered) { hovered = hv; self.redraw(false); }
                    if (hv) showTip(self, hv); else tip.hidden = true;
                    self.over.style.cursor = hv && hv.job_id ? 'pointer' : '';
                }],
            },
        }, data, tlHost);
        u.over.addEventListener('mousedown', (e) => { downAt = [e.clientX, e.clientY]; });
        u.over.addEventListener('click', (e) => {
            const still = downAt && Math.abs(e.clientX - downAt[0]) < 3 && Math.abs(e.clientY - downAt[1]) < 3;
            if (still && hovered && hovered.job_id) navigate(`#/jobs/${encodeURIComponent(hovered.job_id)}`);
        });
        u.over.addEventListener('mouseleave', () => { tip.hidden = true; });
        return u;
    }

    function patternFor(ctx, tenant) {
        const name = tenantPattern.get(tenant) || 'solid';
        const dpr = window.devicePixelRatio || 1;
        const key = `${name}@${dpr}`;
        if (!patternCache.has(key)) patternCache.set(key, makePattern(ctx, name, dpr));
        return patternCache.get(key);
    }

    // uPlot draw hook: the intervals in the visible range, in canvas pixels.
    function drawIntervals(u) {
        const ctx = u.ctx;
        const { left, top, width, height } = u.bbox;
        const n = Math.max(1, rows.length);
        const band = height / n;
        const dpr = window.devicePixelRatio || 1;
        const pad = Math.min(4 * dpr, band * 0.15);
        const xmin = u.scales.x.min, xmax = u.scales.x.max;
        ctx.save();
        ctx.beginPath();
        ctx.rect(left, top, width, height);
        ctx.clip();
        ctx.strokeStyle = '#e6e9ed';
        ctx.lineWidth = 1;
        for (let i = 1; i < n; i++) {
            const y = Math.round(top + i * band) + 0.5;
            ctx.beginPath();
            ctx.moveTo(left, y);
            ctx.lineTo(left + width, y);
            ctx.stroke();
        }
        let count = 0;
        const perRow = new Array(rows.length).fill(0);
        for (const iv of intervals) {
            if (iv.e < xmin || iv.s > xmax) continue;
            const x0 = Math.max(left - 2, u.valToPos(iv.s, 'x', true));
            const x1 = Math.min(left + width + 2, Math.max(x0 + dpr, u.valToPos(iv.e, 'x', true)));
            const y0 = top + iv.row * band + pad;
            const bh = band - 2 * pad;
            ctx.fillStyle = typeColor(iv.type);
            ctx.fillRect(x0, y0, x1 - x0, bh);
            const p = patternFor(ctx, iv.tenant);
            if (p) { ctx.fillStyle = p; ctx.fillRect(x0, y0, x1 - x0, bh); }
            if (iv.open) { // still running: a dark edge at "now"
                ctx.fillStyle = 'rgba(28, 34, 40, 0.75)';
                ctx.fillRect(x1 - 2 * dpr, y0, 2 * dpr, bh);
            }
            if (iv === hovered) {
                ctx.strokeStyle = '#1c2228';
                ctx.lineWidth = 1.5 * dpr;
                ctx.strokeRect(x0, y0, x1 - x0, bh);
                ctx.strokeStyle = '#e6e9ed';
                ctx.lineWidth = 1;
            }
            count++;
            perRow[iv.row]++;
        }
        ctx.restore();
        tlHost.dataset.intervals = String(count);
        tlHost.dataset.rows = String(rows.length);
        drawnPerWorker = new Map(rows.map((r, i) => [r.id, perRow[i]]));
        for (const tr of workersBody.children) tr.dataset.intervals = String(drawnPerWorker.get(tr.dataset.workerId) || 0);
    }

    function showTip(u, iv) {
        const r = rows[iv.row];
        const mine = iv.tenant === myTenant;
        const iso = (s) => new Date(s * 1000).toISOString();
        const lines = [
            ['strong', `${iv.type} on ${r ? r.id : '?'}`],
            ['', `tenant ${tenantName(iv.tenant)}${mine ? ' (yours)' : ''}`],
            ['', iv.job_id ? `job ${iv.job_id}` : "another tenant's job"],
            ['', `from ${fmtTime(iso(iv.s))}`],
            ['', iv.open ? `still running at ${fmtTime(iso(iv.e))}` : `to ${fmtTime(iso(iv.e))}`],
            ['', `${iv.open ? 'so far ' : ''}${fmtSeconds(iv.e - iv.s)}`],
        ];
        if (iv.job_id) lines.push(['muted', 'click to open the job']);
        tip.replaceChildren(...lines.map(([cls, text]) => h('div', { class: cls }, text)));
        tip.hidden = false;
        const over = u.over.getBoundingClientRect(), host = tlWrap.getBoundingClientRect();
        const x = over.left - host.left + u.cursor.left, y = over.top - host.top + u.cursor.top;
        const tw = tip.offsetWidth;
        tip.style.left = `${x + 14 + tw > host.width ? Math.max(0, x - 14 - tw) : x + 14}px`;
        tip.style.top = `${y + 14}px`;
    }

    function renderLegend() {
        const types = Object.keys(TYPE_COLORS);
        for (const iv of intervals) if (!types.includes(iv.type)) types.push(iv.type);
        const items = types.map((t) => h('span', { class: 'legend-item', dataset: { type: t } }, swatch(typeColor(t)), t));
        const tenants = [...tenantPattern.keys()].filter((id) => tenantList().some((t) => t.id === id) || intervals.some((iv) => iv.tenant === id));
        replace(legend,
            h('span', { class: 'legend-group' }, h('span', { class: 'legend-title' }, 'Job type'), items),
            h('span', { class: 'legend-group' }, h('span', { class: 'legend-title' }, 'Tenant'),
                tenants.map((id) => h('span', { class: 'legend-item', dataset: { tenant: id } },
                    swatch(OTHER_TYPE_COLOR, tenantPattern.get(id)), tenantName(id), id === myTenant ? ' (yours)' : ''))),
            h('span', { class: 'legend-group' },
                h('span', { class: 'legend-item' }, h('span', { class: 'running-key' }), 'dark right edge: still running'),
                h('span', { class: 'legend-item' }, h('span', { class: 'idle-key' }), 'blank: idle')));
    }

    function renderTenants() {
        const list = tenantList();
        const slots = rows.reduce((n, r) => n + (r.worker ? (num(r.worker.slots) && r.worker.slots > 0 ? r.worker.slots : 1) : 0), 0);
        tenantsTable.dataset.clusterSlots = String(slots);
        replace(tenantsBody, list.length ? list.map((t) => {
            const used = num(t.slots_used) ? t.slots_used : null;
            const quota = num(t.max_slots) ? t.max_slots : null;
            const frac = used === null ? null : quota ? used / quota : slots ? used / slots : null;
            const label = used === null ? '—' : quota !== null ? `${used} of ${quota}` : `${used} (no quota; the cluster has ${slots} slot${slots === 1 ? '' : 's'})`;
            return h('tr', { 'data-testid': 'cluster-tenant-row', dataset: { tenantId: t.id || '', slotsUsed: used ?? '' } },
                h('th', { scope: 'row' }, swatch(OTHER_TYPE_COLOR, tenantPattern.get(t.id)), ' ',
                    h('span', { 'data-testid': 'cluster-tenant-name' }, t.name || t.id || '?'),
                    t.id === myTenant ? h('span', { class: 'tag' }, 'yours') : null),
                h('td', { class: 'wide-bar' }, bar(frac, label, { over: quota !== null && used > quota, title: quota === null ? 'no quota' : `quota ${quota} slots` })),
                h('td', { class: 'num' }, num(t.queued) ? String(t.queued) : '—'),
                h('td', { class: 'num' }, num(t.running) ? String(t.running) : '—'),
                h('td', { class: 'num' }, num(t.weight) ? String(t.weight) : '—'));
        }) : h('tr', {}, h('td', { colspan: 5, class: 'muted' }, 'No tenants in the answer.')));
    }

    function renderQueue() {
        const q = cluster && cluster.queue && typeof cluster.queue === 'object' ? cluster.queue : {};
        queueNow.textContent = `Now: ${num(q.queued) ? q.queued : '—'} queued, ${num(q.scheduled) ? q.scheduled : '—'} scheduled, ` +
            `${num(q.running) ? q.running : '—'} running (one point per poll; the server keeps no history of these).`;
        qHost.dataset.points = String(queue.t.length);
        if (!uPlot || queue.t.length === 0) return;
        const data = [queue.t, queue.queued, queue.scheduled, queue.running];
        if (!qc) {
            const line = (label, color) => ({ label, stroke: color, width: 2, points: { show: false }, value: (u, v) => (v === null || v === undefined ? '—' : String(v)) });
            qc = new uPlot({
                width: widthOf(qHost),
                height: QUEUE_HEIGHT,
                cursor: { drag: { x: false, y: false } },
                scales: { x: { time: true }, y: { range: (u, min, max) => [0, Math.max(4, Math.ceil((max || 0) * 1.2))] } },
                axes: [{ space: 90, incrs: CLOCK_INCRS, values: (u, splits, ai, space, incr) => clockAxis(splits, incr) }, { size: 50, values: (u, splits) => splits.map((v) => (Number.isInteger(v) ? String(v) : '')) }],
                series: [{ label: 'time', value: (u, v) => (v === null || v === undefined ? '—' : clockAxis([v], 1)[0]) }, line('queued', '#8a5a00'), line('scheduled', '#7b8794'), line('running', '#2356c2')],
            }, data, qHost);
        } else {
            qc.setData(data);
        }
    }

    function renderWorkers() {
        const from = timeline ? secs(timeline.from) : null, to = timeline ? secs(timeline.to) : null;
        const focused = workersBody.contains(document.activeElement) ? document.activeElement.getAttribute('href') : null;
        replace(workersBody, rows.map((r, i) => {
            const w = r.worker || {};
            const run = w.running && typeof w.running === 'object' ? w.running : null;
            const labels = w.labels && typeof w.labels === 'object' ? Object.entries(w.labels) : [];
            // overlapping intervals are merged: a worker is busy or not, never 142% busy
            const busy = from !== null && to > from ? coveredFraction(intervals.filter((iv) => iv.row === i).map((iv) => [iv.s, iv.e]), from, to) : null;
            const state = r.worker ? w.state || '?' : 'gone';
            return h('tr', { 'data-testid': 'cluster-worker-row', dataset: { workerId: r.id, state, intervals: String(drawnPerWorker.get(r.id) || 0) } },
                h('th', { scope: 'row', class: 'mono' }, r.id),
                h('td', {}, w.kind || '—'),
                h('td', {}, labels.length ? labels.map(([k, v]) => h('span', { class: 'chip' }, `${k}=${v}`)) : h('span', { class: 'muted' }, '—')),
                h('td', { 'data-testid': 'cluster-worker-state' }, r.worker ? badge(state, `worker-${state}`) :
                    h('span', { class: 'muted', title: 'in the timeline but no longer registered' }, 'gone')),
                h('td', {}, run ? [swatch(typeColor(run.type), tenantPattern.get(run.tenant)), ' ', run.type || '?', ' · ',
                    run.job_id ? h('a', { href: `#/jobs/${encodeURIComponent(run.job_id)}`, class: 'mono' }, run.job_id) :
                        h('span', { class: 'muted' }, tenantName(run.tenant))] : h('span', { class: 'muted' }, '—')),
                h('td', { class: 'num', 'data-testid': 'cluster-worker-busy', dataset: { busy: busy === null ? '' : String(busy) } },
                    busy === null ? '—' : bar(busy, fmtPct(busy))),
                h('td', { class: 'time', dataset: { heartbeat: w.last_heartbeat || '' } }));
        }));
        renderAges();
        if (focused) {
            const a = [...workersBody.querySelectorAll('a')].find((x) => x.getAttribute('href') === focused);
            if (a) a.focus({ preventScroll: true });
        }
    }

    // Heartbeat ages tick every second between polls.
    function renderAges() {
        const now = serverNow();
        for (const td of workersBody.querySelectorAll('td[data-heartbeat]')) {
            const hb = td.dataset.heartbeat;
            const t = Date.parse(hb);
            if (!hb || Number.isNaN(t)) { td.textContent = '—'; continue; }
            const age = Math.max(0, (now - t) / 1000);
            td.replaceChildren(h('time', { datetime: hb, title: hb }, fmtTime(hb)),
                h('span', { class: `age${age > 30 ? ' stale-age' : ''}` }, ` (${fmtSeconds(age)} ago)`));
        }
    }
}
