// Gantt chart of a simulated placement schedule, drawn on one <canvas>.
//
// One row per device: its ops as bars over simulated time (µs), and under
// them two thin lanes for the device's send and receive channels, where each
// transfer is a bar in the colour of the device at the other end. Each lane
// is kept sorted by start time with a running maximum of end times, so a
// redraw finds the first visible bar by binary search and stops at the first
// bar that starts after the window (culling), whatever the size of the
// schedule. Bars narrower than a few pixels that touch are merged into one
// rectangle, so zoomed out, the cost is bounded by the pixels, not the ops.
//
// Rows are culled too: a schedule taller than MAX_VIEW_PX scrolls inside
// the chart (the canvas stays put, sticky, and draws the rows in view under
// a time axis that stays on top), so hundreds of devices cost what a
// screenful does.
//
// Interaction: wheel zooms around the pointer (shift+wheel or a sideways
// wheel pans; over the device names it scrolls the rows), dragging pans,
// shift+drag or a drag on the time axis zooms to the selected range,
// double-click shows everything; with keyboard focus, + and - zoom, left and
// right pan, up and down scroll the rows, 0 shows everything. Hovering a bar
// shows its name, device, start and end.
//
// The host element gets data attributes for tests and for the curious:
// data-ops / data-transfers (totals), data-ops-drawn / data-transfers-drawn
// (bars in the visible window at the last redraw), data-view-start /
// data-view-end (µs), data-frame (redraws so far), data-render-ms (the last
// redraw's duration).
import { h } from './dom.js';
import { deviceColor, shade } from './colors.js';
import { fmtBytes, fmtMicros, microsAxis, niceStep } from './format.js';

const GUTTER = 132;   // device names, left of the plot
const AXIS = 24;      // time axis, above the rows
const RIGHT = 12;
const FONT = '12px system-ui, -apple-system, "Segoe UI", Roboto, "Noto Sans", "DejaVu Sans", sans-serif';
const SMALL_FONT = '10px system-ui, -apple-system, "Segoe UI", Roboto, "Noto Sans", "DejaVu Sans", sans-serif';
const NARROW_PX = 4;  // bars narrower than this merge with touching neighbours
const LABEL_PX = 48;  // bars at least this wide carry the op name
const MAX_VIEW_PX = 640;  // taller schedules scroll inside the chart

// --- data -----------------------------------------------------------------

// A lane: bars sorted by start; maxEnd[i] = max(end[0..i]) for culling.
function lane(items) {
    items.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
    const n = items.length;
    const l = { n, start: new Float64Array(n), end: new Float64Array(n), maxEnd: new Float64Array(n), ref: new Int32Array(n), peer: new Int32Array(n) };
    let m = -Infinity;
    for (let i = 0; i < n; i++) {
        const [s, e, ref, peer] = items[i];
        l.start[i] = s;
        l.end[i] = e;
        m = Math.max(m, e);
        l.maxEnd[i] = m;
        l.ref[i] = ref;
        l.peer[i] = peer;
    }
    return l;
}

// First index whose bar may reach t or later (maxEnd >= t).
export function firstReaching(l, t) {
    let lo = 0, hi = l.n;
    while (lo < hi) {
        const mid = (lo + hi) >> 1;
        if (l.maxEnd[mid] < t) lo = mid + 1; else hi = mid;
    }
    return lo;
}

// Index of the bar at time t (within tol µs), the nearest when several; -1.
export function barAt(l, t, tol) {
    let lo = 0, hi = l.n; // first start > t + tol
    while (lo < hi) {
        const mid = (lo + hi) >> 1;
        if (l.start[mid] <= t + tol) lo = mid + 1; else hi = mid;
    }
    let best = -1, bestDist = Infinity;
    for (let i = lo - 1, steps = 0; i >= 0 && l.maxEnd[i] >= t - tol && steps < 256; i--, steps++) {
        const d = t < l.start[i] ? l.start[i] - t : t > l.end[i] ? t - l.end[i] : 0;
        if (d <= tol && d < bestDist) { best = i; bestDist = d; }
        if (d === 0) break;
    }
    return best;
}

const isNum = (v) => typeof v === 'number' && Number.isFinite(v);

// schedule {ops, transfers} -> lanes per device. Malformed entries are
// skipped and counted, never guessed at.
export function buildLanes(schedule, deviceCount) {
    const rawOps = Array.isArray(schedule.ops) ? schedule.ops : [];
    const rawX = Array.isArray(schedule.transfers) ? schedule.transfers : [];
    let D = deviceCount;
    const okDev = (d) => Number.isInteger(d) && d >= 0 && d < 4096;
    for (const o of rawOps) if (Array.isArray(o) && okDev(o[1])) D = Math.max(D, o[1] + 1);
    for (const x of rawX) if (Array.isArray(x) && okDev(x[0]) && okDev(x[1])) D = Math.max(D, x[0] + 1, x[1] + 1);
    const ops = Array.from({ length: D }, () => []);
    const send = Array.from({ length: D }, () => []);
    const recv = Array.from({ length: D }, () => []);
    let skipped = 0, end = 0, nOps = 0, nX = 0;
    rawOps.forEach((o, i) => {
        if (!Array.isArray(o) || !okDev(o[1]) || !isNum(o[2]) || !isNum(o[3]) || o[3] < o[2]) { skipped++; return; }
        ops[o[1]].push([o[2], o[3], i, -1]);
        end = Math.max(end, o[3]);
        nOps++;
    });
    rawX.forEach((x, i) => {
        if (!Array.isArray(x) || !okDev(x[0]) || !okDev(x[1]) || !isNum(x[2]) || !isNum(x[3]) || x[3] < x[2]) { skipped++; return; }
        send[x[0]].push([x[2], x[3], i, x[1]]);
        recv[x[1]].push([x[2], x[3], i, x[0]]);
        end = Math.max(end, x[3]);
        nX++;
    });
    return { D, ops: ops.map(lane), send: send.map(lane), recv: recv.map(lane), skipped, end, nOps, nX };
}

// --- chart ----------------------------------------------------------------

export class Gantt {
    // host: element to fill. opts: {schedule, devices: [{name}], makespan,
    // lowerBound, onView(start, end)}.
    constructor(host, { schedule, devices, makespan, lowerBound, onView }) {
        this.host = host;
        this.schedule = schedule;
        this.opNames = Array.isArray(schedule.op_names) ? schedule.op_names : [];
        this.lanes = buildLanes(schedule, devices.length);
        this.names = Array.from({ length: this.lanes.D }, (_, i) => (devices[i] && devices[i].name) || `device ${i}`);
        this.makespan = isNum(makespan) ? makespan : null;
        this.lowerBound = isNum(lowerBound) ? lowerBound : null;
        this.onView = onView || (() => {});
        this.fullEnd = Math.max(this.lanes.end, this.makespan || 0, this.lowerBound || 0) || 1;
        this.vs = 0;
        this.ve = this.fullEnd;
        this.showTransfers = true;
        this.hover = null;  // {kind: 'op'|'send'|'recv', dev, i}
        this.drag = null;
        this.sel = null;    // [x0, x1] CSS px while selecting
        this.frame = 0;
        this.raf = 0;
        this.cssW = 0;

        const D = this.lanes.D;
        this.colors = Array.from({ length: D }, (_, d) => {
            const base = deviceColor(d);
            return { base, alt: shade(base, 0.28), light: shade(base, -0.15) };
        });
        this.opH = D <= 8 ? 26 : D <= 32 ? 18 : 10;
        this.xH = D <= 8 ? 7 : D <= 32 ? 5 : 3;
        this.gap = D <= 32 ? 8 : 3;

        this.canvas = h('canvas', {
            class: 'gantt-canvas', tabindex: '0', role: 'img', 'data-testid': 'gantt-canvas',
            'aria-label': `Gantt chart: ${this.lanes.nOps} ops and ${this.lanes.nX} transfers on ${D} devices over simulated time. ` +
                'Plus and minus zoom, left and right pan, up and down scroll the devices, 0 shows everything.',
        });
        this.tip = h('div', { class: 'chart-tip', 'data-testid': 'gantt-tooltip', hidden: true, role: 'tooltip' });
        this.spacer = h('div', { class: 'gantt-spacer' }, this.canvas);
        this.scroller = h('div', { class: 'gantt-scroll', 'data-testid': 'gantt-scroll' }, this.spacer);
        this.wrap = h('div', { class: 'gantt-wrap' }, this.scroller, this.tip);
        host.replaceChildren(this.wrap);
        this.scroller.addEventListener('scroll', () => { this.hover = null; this.hideTip(); this.requestDraw(); }, { passive: true });
        host.dataset.ops = String(this.lanes.nOps);
        host.dataset.transfers = String(this.lanes.nX);
        if (this.lanes.skipped) host.dataset.skipped = String(this.lanes.skipped);

        this.ctx = this.canvas.getContext('2d', { alpha: false });
        this.listen();
        this.ro = new ResizeObserver(() => this.resize());
        this.ro.observe(this.wrap);
        this.resize();
    }

    destroy() {
        cancelAnimationFrame(this.raf);
        this.ro.disconnect();
        this.dead = true;
    }

    // --- view ---------------------------------------------------------------

    plotX0() { return GUTTER; }
    plotX1() { return Math.max(GUTTER + 10, this.cssW - RIGHT); }
    scale() { return (this.plotX1() - this.plotX0()) / (this.ve - this.vs); }
    timeAt(x) { return this.vs + (x - this.plotX0()) / this.scale(); }

    rowH() { return this.opH + (this.showTransfers ? 2 * this.xH + 2 : 0) + this.gap; }
    fullHeight() { return AXIS + this.lanes.D * this.rowH() + 4; }
    height() { return Math.min(MAX_VIEW_PX, this.fullHeight()); }
    scrollY() { return this.scroller.scrollTop; }
    // Top of device d's row in canvas px, given the rows' scroll position.
    rowTop(d) { return AXIS + d * this.rowH() - this.scrollY() + this.gap / 2; }

    // Sets the visible window [a, b] µs, clamped to the schedule. Calls
    // onView unless silent.
    setView(a, b, silent = false) {
        const full = this.fullEnd;
        const minSpan = Math.max(full * 1e-7, 1e-3);
        let span = Math.min(full, Math.max(minSpan, b - a));
        if (!isNum(span)) span = full;
        let s = isNum(a) ? a : 0;
        s = Math.max(0, Math.min(s, full - span));
        if (s === this.vs && s + span === this.ve) return;
        this.vs = s;
        this.ve = s + span;
        this.requestDraw();
        if (!silent) this.onView(this.vs, this.ve);
    }

    zoomBy(factor, center) {
        const c = isNum(center) ? center : (this.vs + this.ve) / 2;
        this.setView(c - (c - this.vs) * factor, c + (this.ve - c) * factor);
    }

    panBy(us) { this.setView(this.vs + us, this.ve + us); }

    reset() { this.setView(0, this.fullEnd); }

    setShowTransfers(on) {
        this.showTransfers = !!on;
        this.hover = null;
        this.hideTip();
        this.resize();
    }

    resize() {
        if (this.dead) return;
        this.cssW = Math.max(200, this.scroller.clientWidth);
        this.requestDraw();
    }

    requestDraw() {
        if (this.raf || this.dead) return;
        this.raf = requestAnimationFrame(() => { this.raf = 0; this.draw(); });
    }

    // --- drawing ------------------------------------------------------------

    draw() {
        const t0 = performance.now();
        const dpr = window.devicePixelRatio || 1;
        const H = this.height();
        const c = this.canvas;
        const fullH = this.fullHeight();
        if (this.spacer.style.height !== `${fullH}px`) {
            this.spacer.style.height = `${fullH}px`;
            this.scroller.style.height = `${H}px`;
        }
        // The width inside the rows' scrollbar, if there is one.
        const W = this.cssW = Math.max(200, this.scroller.clientWidth);
        if (c.width !== Math.round(W * dpr) || c.height !== Math.round(H * dpr)) {
            c.width = Math.round(W * dpr);
            c.height = Math.round(H * dpr);
            c.style.width = `${W}px`;
            c.style.height = `${H}px`;
        }
        const ctx = this.ctx;
        ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
        ctx.fillStyle = '#ffffff';
        ctx.fillRect(0, 0, W, H);

        const x0 = this.plotX0(), x1 = this.plotX1();
        const vs = this.vs, ve = this.ve, k = this.scale();
        const X = (t) => x0 + (t - vs) * k;
        const rowH = this.rowH();
        const first = Math.max(0, Math.floor(this.scrollY() / rowH));
        const rowsInView = [];
        for (let d = first; d < this.lanes.D && this.rowTop(d) - this.gap / 2 < H; d++) rowsInView.push(d);

        // Everything below the time axis is clipped to the rows area.
        ctx.save();
        ctx.beginPath();
        ctx.rect(0, AXIS, W, H - AXIS);
        ctx.clip();

        // Row backgrounds and device names.
        for (const d of rowsInView) {
            const y = this.rowTop(d);
            if (d % 2 === 1) {
                ctx.fillStyle = '#f7f8fa';
                ctx.fillRect(0, y - this.gap / 2, W, rowH);
            }
            ctx.fillStyle = '#1c2228';
            ctx.textAlign = 'left';
            ctx.textBaseline = 'middle';
            ctx.font = FONT;
            ctx.fillText(clip(ctx, this.names[d], GUTTER - 48), 6, y + this.opH / 2);
            if (this.showTransfers && this.xH >= 5) {
                ctx.font = SMALL_FONT;
                ctx.fillStyle = '#5d6873';
                ctx.textAlign = 'right';
                ctx.fillText('send', GUTTER - 6, y + this.opH + 1 + this.xH / 2);
                ctx.fillText('recv', GUTTER - 6, y + this.opH + 2 + this.xH * 1.5);
            }
        }

        // Grid lines at the time ticks.
        const step = niceStep((ve - vs) / Math.max(1, (x1 - x0) / 110));
        const ticks = [];
        for (let t = Math.ceil(vs / step) * step; t <= ve + step * 1e-9 && ticks.length < 200; t += step) ticks.push(t);
        ctx.strokeStyle = '#e6e9ed';
        ctx.lineWidth = 1;
        for (const t of ticks) {
            const x = Math.round(X(t)) + 0.5;
            ctx.beginPath();
            ctx.moveTo(x, AXIS);
            ctx.lineTo(x, H);
            ctx.stroke();
        }

        // Bars, clipped to the plot.
        ctx.save();
        ctx.beginPath();
        ctx.rect(x0, AXIS, x1 - x0, H - AXIS);
        ctx.clip();
        let opsDrawn = 0, xDrawn = 0;
        const labelsToDraw = [];
        for (const d of rowsInView) {
            const y = this.rowTop(d);
            const { base, alt } = this.colors[d];
            opsDrawn += this.drawLane(this.lanes.ops[d], y, this.opH, X, x0, x1,
                (i, wide) => (wide && i % 2 ? alt : base), labelsToDraw);
            if (this.showTransfers) {
                const peerColor = (l) => (i) => (this.colors[l.peer[i]] || this.colors[0]).light;
                const sl = this.lanes.send[d], rl = this.lanes.recv[d];
                xDrawn += this.drawLane(sl, y + this.opH + 1, this.xH, X, x0, x1, peerColor(sl), null);
                this.drawLane(rl, y + this.opH + 2 + this.xH, this.xH, X, x0, x1, peerColor(rl), null);
            }
        }

        // Text never overlaps text: every label drawn below is placed only where
        // it fits (placed: boxes in CSS px); what does not fit is elided or hidden.
        const placed = [];
        let hidden = 0;
        const fits = (b) => !placed.some((o) => b[0] < o[1] && o[0] < b[1] && b[2] < o[3] && o[2] < b[3]);

        // The makespan and lower bound markers' labels (drawn further down, on
        // top): the makespan's first, the lower bound's beside it or a line lower.
        ctx.font = SMALL_FONT;
        const markerLabels = [];
        for (const [t, color, text, dash] of [[this.makespan, '#b3261e', 'makespan', []], [this.lowerBound, '#8a5a00', 'lower bound', [4, 3]]]) {
            if (t === null || t === undefined || t < vs || t > ve) continue;
            const x = Math.round(X(t)) + 0.5;
            const tw = ctx.measureText(text).width;
            const tx = x > W - 90 ? x - 4 - tw : x + 4;
            let box = null;
            for (const dy of [0, 13, 26]) {
                const b = [tx - 2, tx + tw + 2, AXIS + 1 + dy, AXIS + 13 + dy, text];
                if (fits(b)) { box = b; break; }
            }
            if (box) placed.push(box); else hidden++;
            markerLabels.push({ x, color, text, dash, box });
        }

        // Op names inside wide bars, elided to the bar; one that would run into
        // another label (overlapping bars) is left out.
        ctx.font = SMALL_FONT;
        ctx.textAlign = 'left';
        ctx.textBaseline = 'middle';
        ctx.fillStyle = '#ffffff';
        for (const [bx0, bx1, y, ref] of labelsToDraw) {
            const text = clip(ctx, this.opName(ref), bx1 - bx0 - 6);
            if (!text) continue;
            const b = [bx0 + 3, Math.min(bx1, bx0 + 3 + ctx.measureText(text).width), y, y + this.opH, text];
            if (!fits(b)) { hidden++; continue; }
            placed.push(b);
            ctx.save();
            ctx.beginPath();
            ctx.rect(bx0, y, bx1 - bx0, this.opH);
            ctx.clip();
            ctx.fillText(text, bx0 + 3, y + this.opH / 2);
            ctx.restore();
        }

        // Hovered bar (and for a transfer, both of its ends).
        if (this.hover) {
            ctx.strokeStyle = '#1c2228';
            ctx.lineWidth = 1.5;
            for (const r of this.hoverRects(X)) ctx.strokeRect(r[0], r[1], r[2], r[3]);
        }
        ctx.restore(); // plot clip

        // Makespan and lower bound markers, their labels where placed above.
        for (const { x, color, text, dash, box } of markerLabels) {
            ctx.save();
            ctx.strokeStyle = color;
            ctx.lineWidth = 1;
            ctx.setLineDash(dash);
            ctx.beginPath();
            ctx.moveTo(x, AXIS);
            ctx.lineTo(x, H);
            ctx.stroke();
            ctx.restore();
            if (!box) continue;
            ctx.font = SMALL_FONT;
            ctx.fillStyle = 'rgba(255, 255, 255, 0.85)';
            ctx.fillRect(box[0], box[2], box[1] - box[0], 12);
            ctx.fillStyle = color;
            ctx.textAlign = 'left';
            ctx.textBaseline = 'middle';
            ctx.fillText(text, box[0] + 2, box[2] + 6);
        }
        ctx.restore(); // rows clip

        // Time axis, on top whatever the rows' scroll position.
        const labels = microsAxis(ticks, step);
        ctx.font = FONT;
        ctx.textBaseline = 'middle';
        ctx.textAlign = 'center';
        ctx.strokeStyle = '#e6e9ed';
        ctx.lineWidth = 1;
        ticks.forEach((t, i) => {
            const x = Math.round(X(t)) + 0.5;
            ctx.beginPath();
            ctx.moveTo(x, AXIS - 4);
            ctx.lineTo(x, AXIS);
            ctx.stroke();
            const cx = Math.min(Math.max(x, x0 + 24), W - 30), tw = ctx.measureText(labels[i]).width;
            const b = [cx - tw / 2 - 2, cx + tw / 2 + 2, 0, AXIS - 4, labels[i]];
            if (!fits(b)) { hidden++; return; } // a tick pushed in from the edge onto its neighbour's label
            placed.push(b);
            ctx.fillStyle = '#5d6873';
            ctx.fillText(labels[i], cx, AXIS / 2);
        });
        ctx.strokeStyle = '#b9c1ca';
        ctx.beginPath();
        ctx.moveTo(x0, AXIS - 0.5);
        ctx.lineTo(x1, AXIS - 0.5);
        ctx.stroke();

        // Range being selected.
        if (this.sel) {
            const a = Math.max(x0, Math.min(this.sel[0], this.sel[1])), b = Math.min(x1, Math.max(this.sel[0], this.sel[1]));
            ctx.fillStyle = 'rgba(35, 86, 194, 0.15)';
            ctx.fillRect(a, 0, b - a, H);
            ctx.strokeStyle = 'rgba(35, 86, 194, 0.6)';
            ctx.strokeRect(a + 0.5, 0.5, b - a - 1, H - 1);
        }

        this.frame++;
        const ms = performance.now() - t0;
        const ds = this.host.dataset;
        ds.opsDrawn = String(opsDrawn);
        ds.transfersDrawn = String(xDrawn);
        ds.rowsDrawn = String(rowsInView.length);
        ds.viewStart = String(vs);
        ds.viewEnd = String(ve);
        ds.renderMs = ms.toFixed(2);
        // every label drawn in the plot, [x0, x1, y0, y1, text] in CSS px, and how many did not fit
        ds.labels = placed.length <= 2000 ? JSON.stringify(placed.map((b) => [...b.slice(0, 4).map((v) => Math.round(v * 10) / 10), b[4]])) : '';
        ds.labelsHidden = String(hidden);
        ds.frame = String(this.frame);
    }

    // Draws the lane's bars in the window; returns how many were in it.
    drawLane(l, y, hgt, X, x0, x1, color, labels) {
        const ctx = this.ctx;
        const vs = this.vs, ve = this.ve;
        let count = 0;
        let runA = 0, runB = -Infinity, runColor = null, curFill = null;
        const flush = () => {
            if (runColor === null) return;
            if (curFill !== runColor) { ctx.fillStyle = runColor; curFill = runColor; }
            ctx.fillRect(runA, y, runB - runA, hgt);
            runColor = null;
        };
        for (let i = firstReaching(l, vs); i < l.n && l.start[i] <= ve; i++) {
            if (l.end[i] < vs) continue; // an earlier long bar kept maxEnd high
            count++;
            let a = Math.max(x0 - 1, X(l.start[i])), b = Math.min(x1 + 1, X(l.end[i]));
            const wide = b - a >= NARROW_PX;
            if (b - a < 1) b = a + 1; // zero-length bars still show
            const col = color(i, wide);
            if (!wide && col === runColor && a <= runB + 0.75) {
                runB = Math.max(runB, b);
                continue;
            }
            flush();
            if (wide) {
                // A separating hairline between touching wide bars.
                if (curFill !== col) { ctx.fillStyle = col; curFill = col; }
                ctx.fillRect(a, y, Math.max(1, b - a - 0.5), hgt);
                if (labels && b - a >= LABEL_PX) labels.push([a, b, y, l.ref[i]]);
            } else {
                runA = a; runB = b; runColor = col;
            }
        }
        flush();
        return count;
    }

    opName(ref) {
        const o = this.schedule.ops[ref];
        const idx = o && o[0];
        const n = Number.isInteger(idx) ? this.opNames[idx] : undefined;
        return typeof n === 'string' ? n : `op #${idx}`;
    }

    // Rectangles outlining the hovered bar(s), in CSS px.
    hoverRects(X) {
        const hv = this.hover;
        const rowY = (d) => this.rowTop(d);
        const rect = (s, e, y, hgt) => {
            const a = X(s), b = Math.max(X(e), X(s) + 2);
            return [a - 1, y - 1, b - a + 2, hgt + 2];
        };
        if (hv.kind === 'op') {
            const l = this.lanes.ops[hv.dev];
            return [rect(l.start[hv.i], l.end[hv.i], rowY(hv.dev), this.opH)];
        }
        const l = this.lanes[hv.kind][hv.dev];
        const x = this.schedule.transfers[l.ref[hv.i]];
        return [rect(x[2], x[3], rowY(x[0]) + this.opH + 1, this.xH),
            rect(x[2], x[3], rowY(x[1]) + this.opH + 2 + this.xH, this.xH)];
    }

    // --- hover ----------------------------------------------------------------

    hitTest(x, y) {
        if (x < this.plotX0() || x > this.plotX1() || y < AXIS) return null;
        const d = Math.floor((y - AXIS + this.scrollY()) / this.rowH());
        if (d < 0 || d >= this.lanes.D) return null;
        const yy = y - this.rowTop(d);
        let kind = null;
        if (yy >= -1 && yy <= this.opH + 1) kind = 'op';
        else if (this.showTransfers && yy > this.opH && yy <= this.opH + 1.5 + this.xH) kind = 'send';
        else if (this.showTransfers && yy > this.opH + 1.5 + this.xH && yy <= this.opH + 3 + 2 * this.xH) kind = 'recv';
        if (!kind) return null;
        const l = kind === 'op' ? this.lanes.ops[d] : this.lanes[kind][d];
        const i = barAt(l, this.timeAt(x), 3 / this.scale());
        return i < 0 ? null : { kind, dev: d, i };
    }

    showTip(hv, x, y) {
        const lines = [];
        if (hv.kind === 'op') {
            const l = this.lanes.ops[hv.dev];
            const s = l.start[hv.i], e = l.end[hv.i];
            lines.push(['strong', this.opName(l.ref[hv.i])],
                ['', `device ${this.names[hv.dev]}`],
                ['', `start ${fmtMicros(s)} · end ${fmtMicros(e)}`],
                ['', `duration ${fmtMicros(e - s)}`]);
        } else {
            const l = this.lanes[hv.kind][hv.dev];
            const t = this.schedule.transfers[l.ref[hv.i]];
            const prod = Number.isInteger(t[5]) && typeof this.opNames[t[5]] === 'string' ? this.opNames[t[5]] : null;
            lines.push(['strong', `transfer ${this.names[t[0]] || t[0]} → ${this.names[t[1]] || t[1]}`],
                ['', prod ? `output of ${prod}` : 'output of an op'],
                ['', isNum(t[4]) ? fmtBytes(t[4]) : 'size unknown'],
                ['', `start ${fmtMicros(t[2])} · end ${fmtMicros(t[3])}`],
                ['', `duration ${fmtMicros(t[3] - t[2])}`]);
        }
        this.tip.replaceChildren(...lines.map(([cls, text]) => h('div', { class: cls }, text)));
        this.tip.hidden = false;
        const tw = this.tip.offsetWidth, th = this.tip.offsetHeight;
        const left = x + 14 + tw > this.cssW ? Math.max(0, x - 14 - tw) : x + 14;
        const top = Math.max(0, Math.min(y + 14, this.height() - th));
        this.tip.style.left = `${left}px`;
        this.tip.style.top = `${top}px`;
    }

    hideTip() { this.tip.hidden = true; }

    // --- input ----------------------------------------------------------------

    listen() {
        const c = this.canvas;
        const pos = (e) => { const r = c.getBoundingClientRect(); return [e.clientX - r.left, e.clientY - r.top]; };
        c.addEventListener('wheel', (e) => {
            const [x] = pos(e);
            let dx = e.deltaX, dy = e.deltaY;
            const unit = e.deltaMode === 1 ? 16 : e.deltaMode === 2 ? 400 : 1;
            dx *= unit; dy *= unit;
            if (e.shiftKey && dx === 0) { dx = dy; dy = 0; }
            if (dx === 0 && dy === 0) return;
            // Over the device names, a vertical wheel scrolls (the rows, else the page).
            if (x < this.plotX0() && Math.abs(dy) >= Math.abs(dx)) return;
            e.preventDefault();
            if (Math.abs(dx) > Math.abs(dy)) this.panBy(dx / this.scale());
            else this.zoomBy(Math.exp(Math.max(-300, Math.min(300, dy)) * 0.002), x >= this.plotX0() ? this.timeAt(x) : undefined);
        }, { passive: false });
        c.addEventListener('pointerdown', (e) => {
            if (e.button !== 0) return;
            const [x, y] = pos(e);
            c.setPointerCapture(e.pointerId);
            this.drag = { mode: e.shiftKey || y < AXIS ? 'select' : 'pan', x, vs: this.vs, ve: this.ve, k: this.scale() };
            this.hover = null;
            this.hideTip();
            c.classList.add('dragging');
        });
        c.addEventListener('pointermove', (e) => {
            const [x, y] = pos(e);
            const dr = this.drag;
            if (dr) {
                if (dr.mode === 'pan') {
                    const dt = (x - dr.x) / dr.k;
                    this.setView(dr.vs - dt, dr.ve - dt);
                } else {
                    this.sel = [dr.x, x];
                    this.requestDraw();
                }
                return;
            }
            const hv = this.hitTest(x, y);
            const same = hv && this.hover && hv.kind === this.hover.kind && hv.dev === this.hover.dev && hv.i === this.hover.i;
            if (!same) { this.hover = hv; this.requestDraw(); }
            if (hv) this.showTip(hv, x, y); else this.hideTip();
        });
        const end = (e) => {
            const dr = this.drag;
            if (!dr) return;
            this.drag = null;
            c.classList.remove('dragging');
            if (dr.mode === 'select' && this.sel) {
                const [a, b] = [Math.min(...this.sel), Math.max(...this.sel)];
                this.sel = null;
                if (b - a >= 4 && e.type === 'pointerup') this.setView(this.timeAt(a), this.timeAt(b));
                this.requestDraw();
            }
        };
        c.addEventListener('pointerup', end);
        c.addEventListener('pointercancel', end);
        c.addEventListener('pointerleave', () => {
            if (this.drag) return;
            if (this.hover) { this.hover = null; this.requestDraw(); }
            this.hideTip();
        });
        c.addEventListener('dblclick', () => this.reset());
        c.addEventListener('keydown', (e) => {
            const span = this.ve - this.vs;
            switch (e.key) {
            case '+': case '=': this.zoomBy(0.5); break;
            case '-': case '_': this.zoomBy(2); break;
            case 'ArrowLeft': this.panBy(-span * 0.2); break;
            case 'ArrowRight': this.panBy(span * 0.2); break;
            case '0': case 'Home': this.reset(); break;
            case 'ArrowUp': this.scroller.scrollTop -= 2 * this.rowH(); break;
            case 'ArrowDown': this.scroller.scrollTop += 2 * this.rowH(); break;
            default: return;
            }
            e.preventDefault();
        });
    }
}

// text shortened with "…" to fit width px in ctx's current font.
function clip(ctx, text, width) {
    const s = String(text);
    if (width <= 0) return '';
    if (ctx.measureText(s).width <= width) return s;
    let lo = 0, hi = s.length;
    while (lo < hi) {
        const mid = (lo + hi + 1) >> 1;
        if (ctx.measureText(`${s.slice(0, mid)}…`).width <= width) lo = mid; else hi = mid - 1;
    }
    return lo ? `${s.slice(0, lo)}…` : '';
}
