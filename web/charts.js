// uPlot (npm "uplot", vendored by deploy/build into web/vendor/uplot/) and
// small helpers for the charts built with it.
//
// uPlot is loaded on demand with a dynamic import, so the dashboard still
// works, and says what is missing, when the vendored copy is absent.

let loading = null;

export function loadUplot() {
    if (!loading) {
        loading = import('./vendor/uplot/uPlot.esm.js').then((m) => m.default, (e) => {
            loading = null; // a later page may try again
            throw new Error(`the chart library could not be loaded from vendor/uplot/ (${e && e.message ? e.message : e}); deploy/build installs it`);
        });
    }
    return loading;
}

const isNum = (v) => typeof v === 'number' && Number.isFinite(v);

// Step series [[x, y], ...] (one list per series, any order) -> uPlot's
// aligned data [xs, ys0, ys1, ...] over the union of all x (plus extraX).
// Each series holds its last value until its next point; before its first
// point it is null (no line). At equal x the later point of a list wins.
export function alignSteps(lists, extraX = []) {
    const clean = lists.map((l) => (Array.isArray(l) ? l : [])
        .filter((p) => Array.isArray(p) && isNum(p[0]) && isNum(p[1]))
        .sort((a, b) => a[0] - b[0]));
    const all = [];
    for (const l of clean) for (const p of l) all.push(p[0]);
    for (const x of extraX) if (isNum(x)) all.push(x);
    all.sort((a, b) => a - b);
    const xs = [];
    for (const x of all) if (xs.length === 0 || xs[xs.length - 1] !== x) xs.push(x);
    const ys = clean.map((l) => {
        const out = new Array(xs.length);
        let j = 0, last = null;
        for (let i = 0; i < xs.length; i++) {
            while (j < l.length && l[j][0] <= xs[i]) last = l[j++][1];
            out[i] = last;
        }
        return out;
    });
    return [xs, ...ys];
}

// A uPlot plugin: a dashed vertical line across the plot at each mark's x
// (marks() -> [{x, label}]), its label at the top; onDraw(xs) hears the x of the
// marks drawn at each redraw (those inside the x range), in order.
export function xMarks(marks, { color = '#5d6873', dash = [5, 4], onDraw } = {}) {
    return {
        hooks: {
            draw: [(u) => {
                const { ctx } = u;
                const { left, top, width, height } = u.bbox;
                const px = (typeof window !== 'undefined' && window.devicePixelRatio) || 1;
                const drawn = [];
                ctx.save();
                ctx.strokeStyle = color;
                ctx.fillStyle = color;
                ctx.lineWidth = px;
                ctx.setLineDash(dash.map((d) => d * px));
                ctx.font = `${Math.round(11 * px)}px system-ui, sans-serif`;
                ctx.textBaseline = 'top';
                for (const m of marks()) {
                    if (!m || !isNum(m.x)) continue;
                    const x = u.valToPos(m.x, 'x', true);
                    if (!(x >= left - 0.5 && x <= left + width + 0.5)) continue;
                    const xr = Math.round(x) + 0.5;
                    ctx.beginPath();
                    ctx.moveTo(xr, top);
                    ctx.lineTo(xr, top + height);
                    ctx.stroke();
                    if (m.label) ctx.fillText(m.label, xr + 3 * px, top + 2 * px);
                    drawn.push(m.x);
                }
                ctx.restore();
                if (onDraw) onDraw(drawn);
            }],
        },
    };
}

// Axis increments for byte values: powers of two, so ticks fall on 256 MiB,
// 512 MiB, 1 GiB... rather than on 200,000,000.
export const BYTE_INCRS = Array.from({ length: 54 }, (_, k) => 2 ** k);

// Width of a chart host in CSS px, never below min.
export function widthOf(el, min = 320) {
    return Math.max(min, Math.floor(el.clientWidth || el.getBoundingClientRect().width || 0));
}

// Time axis labels (x in seconds since the epoch), local 24-hour clock:
// "14:05" for steps of a minute or more, "14:05:30" below.
export function clockAxis(splits, incr) {
    const pad = (n) => String(n).padStart(2, '0');
    return splits.map((s) => {
        if (typeof s !== 'number' || !Number.isFinite(s)) return '';
        const d = new Date(s * 1000);
        const hm = `${pad(d.getHours())}:${pad(d.getMinutes())}`;
        return incr >= 60 ? hm : `${hm}:${pad(d.getSeconds())}`;
    });
}

// Time axis increments in seconds, never below one second (polls are 2 s
// apart; sub-second ticks would only repeat the same label).
export const CLOCK_INCRS = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400];

// The share of [from, to] covered by intervals [[s, e], ...] (any order,
// possibly overlapping: two jobs on one worker at once, a restarted run):
// overlaps are merged first, so the answer is in [0, 1]; null for an empty
// window.
export function coveredFraction(intervals, from, to) {
    if (!isNum(from) || !isNum(to) || !(to > from)) return null;
    const parts = (Array.isArray(intervals) ? intervals : [])
        .map(([s, e]) => [Math.max(s, from), Math.min(e, to)])
        .filter(([s, e]) => isNum(s) && isNum(e) && e > s)
        .sort((a, b) => a[0] - b[0]);
    let covered = 0, cs = null, ce = null;
    for (const [s, e] of parts) {
        if (ce !== null && s <= ce) { ce = Math.max(ce, e); continue; }
        if (ce !== null) covered += ce - cs;
        cs = s; ce = e;
    }
    if (ce !== null) covered += ce - cs;
    return Math.min(1, covered / (to - from));
}
