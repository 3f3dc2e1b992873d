// Formatting of times, sizes and states. Pure functions except badge/timeEl,
// which build small DOM pieces.
import { h } from './dom.js';

export const STATES = ['queued', 'scheduled', 'running', 'resizing', 'succeeded', 'failed', 'cancelled'];
export const TYPES = ['placement', 'training', 'inference', 'federated'];
export const PRIORITIES = ['low', 'normal', 'high'];
const TERMINAL = new Set(['succeeded', 'failed', 'cancelled']);

export function isTerminal(state) {
    return TERMINAL.has(state);
}

const pad = (n, w = 2) => String(n).padStart(w, '0');

// Local time "2026-11-22 07:12:00"; "—" when absent or unparsable.
export function fmtTime(iso) {
    if (!iso) return '—';
    const d = new Date(iso);
    if (Number.isNaN(d.getTime())) return String(iso);
    return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ` +
        `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}

// Local time with milliseconds, for event timelines where order matters.
export function fmtTimeMs(iso) {
    if (!iso) return '—';
    const d = new Date(iso);
    if (Number.isNaN(d.getTime())) return String(iso);
    return `${fmtTime(iso)}.${pad(d.getMilliseconds(), 3)}`;
}

// <time> element: local time shown, the server's ISO string in datetime/title.
export function timeEl(iso, withMs = false) {
    if (!iso) return h('span', { class: 'muted' }, '—');
    return h('time', { datetime: iso, title: iso }, withMs ? fmtTimeMs(iso) : fmtTime(iso));
}

// Binary units: 1536 -> "1.5 KiB".
export function fmtBytes(n) {
    if (typeof n !== 'number' || !Number.isFinite(n)) return '—';
    const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];
    let v = Math.abs(n), i = 0;
    while (v >= 1024 && i < units.length - 1) { v /= 1024; i++; }
    const s = i === 0 ? String(v) : v >= 100 ? v.toFixed(0) : v.toFixed(v >= 10 ? 1 : 2);
    return `${n < 0 ? '-' : ''}${s} ${units[i]}`;
}

// Microseconds: 850 -> "850 µs", 12500 -> "12.5 ms", 3.2e6 -> "3.20 s".
export function fmtMicros(us) {
    if (typeof us !== 'number' || !Number.isFinite(us)) return '—';
    if (Math.abs(us) < 1000) return `${trim(us)} µs`;
    if (Math.abs(us) < 1e6) return `${trim(us / 1000)} ms`;
    return `${trim(us / 1e6)} s`;
}

export function fmtMillis(ms) {
    if (typeof ms !== 'number' || !Number.isFinite(ms)) return '—';
    return `${trim(ms)} ms`;
}

// Seconds as "250 ms", "4 s", "3 min 20 s", "2 h 5 min".
export function fmtSeconds(s) {
    if (typeof s !== 'number' || !Number.isFinite(s)) return '—';
    if (s < 1) return `${Math.max(0, Math.round(s * 1000))} ms`;
    s = Math.round(s);
    if (s < 60) return `${s} s`;
    if (s < 3600) return `${Math.floor(s / 60)} min ${s % 60} s`;
    return `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min`;
}

// Three significant digits, no trailing zeros beyond what is needed.
function trim(v) {
    const a = Math.abs(v);
    if (a === 0) return '0';
    if (a >= 100) return v.toFixed(0);
    if (a < 1) return String(parseFloat(v.toPrecision(2)));
    return String(parseFloat(v.toFixed(a >= 10 ? 1 : 2)));
}

export function fmtPct(x) {
    if (typeof x !== 'number' || !Number.isFinite(x)) return '—';
    if (x > 0 && x < 0.005) return '<1%';
    return `${Math.round(x * 100)}%`;
}

// Accuracy (a fraction) as a percentage with two decimals: 0.8854 -> "88.54%".
export function fmtAccuracy(x) {
    if (typeof x !== 'number' || !Number.isFinite(x)) return '—';
    return `${(100 * x).toFixed(2)}%`;
}

// A loss to four significant digits, without trailing zeros: 0.48231234 -> "0.4823", 1.5 -> "1.5".
export function fmtLoss(x) {
    if (typeof x !== 'number' || !Number.isFinite(x)) return '—';
    return String(Number(x.toPrecision(4)));
}

// A latency in milliseconds: two decimals under 10 ms, one above: "3.27 ms", "12.3 ms", "1,250.5 ms".
export function fmtLatencyMs(ms) {
    if (typeof ms !== 'number' || !Number.isFinite(ms)) return '—';
    const d = Math.abs(ms) < 10 ? 2 : 1;
    return `${ms.toLocaleString('en-US', { minimumFractionDigits: d, maximumFractionDigits: d })} ms`;
}

// One metric of a job (a training, serving or federated point, or a result's metrics) by its name:
// accuracies and SLO attainment as percentages, losses to 4 digits, latencies in ms, times and sizes
// in their units, counts as integers, anything else to 4 significant digits.
export function fmtMetric(key, v) {
    if (typeof v !== 'number' || !Number.isFinite(v)) return '—';
    const k = String(key);
    if (k.includes('accuracy') || k === 'slo_attainment') return fmtAccuracy(v);
    if (k.includes('loss')) return fmtLoss(v);
    if (k.endsWith('_ms')) return fmtLatencyMs(v);
    if (k.endsWith('_us')) return fmtMicros(v);
    if (k.endsWith('_bytes')) return fmtBytes(v);
    if (k === 'epoch') return Number.isInteger(v) ? String(v) : v.toFixed(2);
    if (k === 'residual') return v.toExponential(1);
    if (Number.isInteger(v)) return v.toLocaleString('en-US');
    if (Math.abs(v) >= 100) return Math.round(v).toLocaleString('en-US');
    return String(Number(v.toPrecision(4)));
}

// Coloured state badge; the text is the state itself, colour only repeats it.
export function badge(state, extraClass = '') {
    const s = state || '—';
    return h('span', { class: `badge badge-${STATES.includes(s) ? s : 'other'} ${extraClass}`.trim() }, s);
}

// A small horizontal bar for a fraction in [0,1] (clamped visually), with text beside.
export function bar(fraction, label, { over = false, title } = {}) {
    const f = typeof fraction === 'number' && Number.isFinite(fraction) ? fraction : 0;
    const fill = h('span', { class: `bar-fill${over ? ' bar-over' : ''}` });
    fill.style.width = `${Math.max(0, Math.min(1, f)) * 100}%`;
    return h('span', { class: 'bar-wrap', title },
        h('span', { class: 'bar', 'aria-hidden': 'true' }, fill),
        h('span', { class: 'bar-label' }, label));
}

export function progressCell(progress) {
    if (typeof progress !== 'number' || !Number.isFinite(progress)) return h('span', { class: 'muted' }, '—');
    return bar(progress, fmtPct(progress));
}

export function prettyJson(v) {
    return JSON.stringify(v, null, 2);
}

// Axis ticks over simulated time: one unit (µs, ms or s) for the whole axis,
// chosen from the largest value shown, with as many decimals as the tick step
// needs, so neighbouring ticks never read the same.
export function microsAxis(values, step) {
    const top = Math.max(0, ...values.map((v) => Math.abs(v)).filter(Number.isFinite));
    const [div, unit] = top >= 1e6 ? [1e6, 's'] : top >= 1000 ? [1000, 'ms'] : [1, 'µs'];
    const decimals = step > 0 ? Math.max(0, Math.min(9, Math.ceil(-Math.log10(step / div) - 1e-9))) : 0;
    return values.map((v) => (Number.isFinite(v) ? `${(v / div).toFixed(decimals)} ${unit}` : ''));
}

// A "nice" step (1, 2 or 5 × 10^k) at least raw.
export function niceStep(raw) {
    if (!(raw > 0) || !Number.isFinite(raw)) return 1;
    const p = 10 ** Math.floor(Math.log10(raw));
    const m = raw / p;
    return (m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10) * p;
}
